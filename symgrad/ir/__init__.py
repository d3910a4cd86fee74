"""The intermediate representation shared by the front end, autodiff and codegen."""
from symgrad.ir.functions import (ELEMENTWISE_FUNCTIONS, STRUCTURAL_PRIMITIVES, Structural,
                                  broadcast_shapes, equal, matmul_shape, reduced_shape, relu,
                                  sigmoid, softplus, step)
from symgrad.ir.program import Program

__all__ = ["Program", "Structural", "ELEMENTWISE_FUNCTIONS", "STRUCTURAL_PRIMITIVES", "broadcast_shapes",
           "matmul_shape", "reduced_shape", "sigmoid", "softplus", "relu", "step", "equal"]
