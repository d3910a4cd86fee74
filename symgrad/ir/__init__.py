"""The intermediate representation shared by the front end, autodiff and codegen."""
from symgrad.ir.functions import (ELEMENTWISE_FUNCTIONS, STRUCTURAL_PRIMITIVES, Structural,
                                  binary_cross_entropy_with_logits, broadcast_shapes, equal, index_shape, matmul_shape, python_index,
                                  reduced_shape, relu, select, sigmoid, softplus, step, greater,
                                  greater_equal, less, less_equal, not_equal)
from symgrad.ir.functions import (ceil, clamp, floor, hardswish, hardtanh, rerouted, isfinite, isinf, isnan, logical_and, logical_not,  # noqa: F401
                                  logical_or, logical_xor, maximum, minimum, remainder, rint, root, sign, softplus_kernel, trunc)
from symgrad.ir.program import Program
from symgrad.ir.special import binary_cross_entropy

__all__ = ["Program", "Structural", "binary_cross_entropy", "binary_cross_entropy_with_logits", "ELEMENTWISE_FUNCTIONS", "STRUCTURAL_PRIMITIVES", "broadcast_shapes",
           "matmul_shape", "reduced_shape", "index_shape", "python_index", "sigmoid", "softplus", "relu", "step",
           "equal", "greater", "greater_equal", "less", "less_equal", "not_equal", "select", "ceil", "clamp",
           "floor", "isfinite", "isinf", "isnan", "logical_and", "logical_not", "logical_or", "logical_xor",
           "maximum", "minimum", "remainder", "rint", "root", "sign", "trunc", "hardtanh", "hardswish", "rerouted"]
