"""A torch-style function traced once into an IR program, evaluated in float64, with its
Jacobians taken two ways: numerically (central differences of the compiled forward) and
symbolically (reverse mode over the program, one compiled vector-Jacobian product)."""
from __future__ import annotations

import inspect

import numpy as np

from symgrad import dtypes, engine
from symgrad.ir import Program
from symgrad.nodes import leaf
from symgrad.tensor import Tensor
from symgrad.tracing import Trace, vjp_program, walk_of


def as_float64(value) -> np.ndarray:
    array = np.asarray(value._value() if isinstance(value, Tensor) else value)
    return array.astype(np.float64) if array.dtype.kind == "f" else array


def input_names(fn, inputs) -> list[str]:
    if isinstance(inputs, dict):
        return list(inputs)
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"input {i}" for i in range(len(inputs))]


class ProgramFunction:
    """A Program seen as a function of its first ``arity`` inputs (the rest are constants)."""

    def __init__(self, program: Program, arity: int, constants: list):
        self.program, self.arity, self.constants = program, arity, list(constants)
        self._forward = engine.compile_program(program)
        self._vjps: dict = {}

    @property
    def output_shapes(self):
        return [shape for _, shape, _ in self.program.outputs]

    def __call__(self, *arrays):
        return [np.asarray(o) for o in self._forward(*arrays, *self.constants)]

    def vjp_program(self, output: int, wrt) -> Program:
        """Inputs (arguments..., constants..., cotangent) -> gradients w.r.t. arguments ``wrt``."""
        return vjp_program(self.program, output, wrt)

    def vjp(self, output: int, wrt, arrays, cotangent):
        key = (output, tuple(wrt))
        if key not in self._vjps:
            self._vjps[key] = engine.compile_program(self.vjp_program(output, wrt))
        return [np.asarray(g) for g in self._vjps[key](*arrays, *self.constants, cotangent)]

    def numerical_jacobian(self, output: int, k: int, arrays, eps: float, refined: bool = False):
        """d output / d argument k by central differences: (output.size, argument.size).

        ``refined``: a step scaled to each input's magnitude and the five-point stencil, whose
        error is O(step^4) instead of O(step^2) (for tiny and huge inputs; two more calls).
        """
        x = np.array(arrays[k], dtype=np.float64)
        stencil = ((1, 8 / 12), (2, -1 / 12)) if refined else ((1, 1 / 2),)
        columns = []
        for index in np.ndindex(x.shape):
            step = eps * max(1.0, abs(x[index])) if refined and np.isfinite(x[index]) else eps
            column = 0.0
            for multiple, weight in stencil:
                up, down = x.copy(), x.copy()
                up[index] += multiple * step
                down[index] -= multiple * step
                f_up = self(*arrays[:k], up, *arrays[k + 1:])[output]
                f_down = self(*arrays[:k], down, *arrays[k + 1:])[output]
                with np.errstate(invalid="ignore", over="ignore"):  # nan/inf inputs are reported, not raised
                    column = column + weight * (f_up - f_down) / step
            columns.append(np.reshape(column, -1))
        return np.stack(columns, axis=1) if columns else np.zeros((int(np.prod(self.output_shapes[output])), 0))

    def analytical_jacobian(self, output: int, wrt, arrays):
        """d output / d arguments ``wrt`` from the symbolic gradient, one row per output entry."""
        shape = self.output_shapes[output]
        size = int(np.prod(shape))
        rows = [[] for _ in wrt]
        for e in range(size):
            basis = np.zeros(size)
            basis[e] = 1.0
            grads = self.vjp(output, wrt, arrays, basis.reshape(shape))
            for r, g in zip(rows, grads):
                r.append(np.asarray(g, dtype=np.float64).reshape(-1))
        return [np.stack(r) if r else np.zeros((0, np.size(arrays[k]))) for r, k in zip(rows, wrt)]


def trace(fn, arrays, differentiable) -> ProgramFunction:
    """Trace ``fn`` (torch-style) on float64 arrays; outputs are its tensor results."""
    leaves = [Tensor(leaf(np.asarray(a), dtypes.from_numpy(np.asarray(a).dtype), k in differentiable))
              for k, a in enumerate(arrays)]
    result = fn(*leaves)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    for o in outputs:
        if not isinstance(o, Tensor):
            raise TypeError(f"{getattr(fn, '__name__', 'fn')} must return tensors, got {type(o).__name__}")
    walk, _ = walk_of((), [t._node for t in leaves])
    roots = [walk.add(o._node, True) for o in outputs]
    trace = Trace(walk, "forward")
    for position in roots:
        trace.output(position, "output")
    return ProgramFunction(trace.program, len(arrays), engine.arrays(walk.inputs[len(arrays):]))


def vjp_function(function: ProgramFunction, output: int, wrt) -> ProgramFunction:
    """The first-order gradient program as a function of (arguments..., cotangent)."""
    program = function.vjp_program(output, wrt)
    # Put the cotangent right after the arguments, before the captured constants.
    arity = function.arity
    cotangent = program.inputs.pop()
    program.inputs.insert(arity, cotangent)
    return ProgramFunction(program, arity + 1, function.constants)
