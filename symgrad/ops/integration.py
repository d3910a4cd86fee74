"""The trapezoidal rule along a dim: trapezoid (trapz) and cumulative_trapezoid, at a constant
spacing or at given sample points, with PyTorch's formulas (so its roundings and gradients)."""
from __future__ import annotations

from symgrad import dtypes
from symgrad.creation import zeros
from symgrad.ops.dims import dim_index
from symgrad.ops.reductions import SUM
from symgrad.ops.registry import Names
from symgrad.ops.shape import narrow, reshape
from symgrad.ops.sorting import CUMSUM
from symgrad.tensor import Tensor


def _axis(y, x, dx, dim, name: str) -> int:
    if x is not None and dx is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, Tensor, dx=...), but "
                        f"expected one of:\n * (Tensor y, Tensor x, *, int dim = -1)\n"
                        f" * (Tensor y, *, Number dx = 1, int dim = -1)\n")
    if y.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    axis = dim_index(dim, y.ndim)
    if y.dtype is dtypes.bool_ and y.shape[axis]:
        raise RuntimeError("trapezoid: received a bool input for `y`, but bool is not supported")
    return axis


def _spacing(y, x, axis: int):
    """The differences of the sample points along the axis, laid out to meet y's (NumPy's rule: a
    vector along the axis, fewer dims padded in front)."""
    if x.dtype is dtypes.bool_:
        raise RuntimeError("trapezoid: received a bool input for `x`, but bool is not supported")
    if x.ndim == 1:
        if x.shape[0] != y.shape[axis]:
            raise RuntimeError("trapezoid: There must be one `x` value for each sample point")
        x = reshape(x, *(x.shape[0] if d == axis else 1 for d in range(y.ndim)))
    elif x.ndim < y.ndim:
        x = reshape(x, *(1,) * (y.ndim - x.ndim), *x.shape)
    n = x.shape[axis]
    return narrow(x, axis, 1, n - 1) - narrow(x, axis, 0, n - 1)


def _number(dx):
    return 1 if dx is None else dx.item() if isinstance(dx, Tensor) else dx


def _sides(y, axis: int):
    n = y.shape[axis]
    return narrow(y, axis, 0, max(n - 1, 0)), narrow(y, axis, min(1, n), max(n - 1, 0))


@SUM.publish(Names(function=("trapezoid", "trapz")))
def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The integral of y along ``dim``: at spacing ``dx`` (1), or at the sample points ``x``; with
    no samples, 0."""
    axis = _axis(y, x, dx, dim, "trapezoid")
    if not y.shape[axis]:
        return zeros(*(n for d, n in enumerate(y.shape) if d != axis), dtype=y.dtype)
    if x is None:
        first, last = (y[(slice(None),) * axis + (i,)] for i in (0, -1))
        return (y.sum(axis) - (first + last) * 0.5) * _number(dx)
    left, right = _sides(y, axis)
    return (_spacing(y, x, axis) * (left + right)).sum(axis) / 2.0


@CUMSUM.publish(Names(function=("cumulative_trapezoid",)))
def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The running integral of y along ``dim``, one entry fewer than y has."""
    axis = _axis(y, x, dx, dim, "cumulative_trapezoid")
    left, right = _sides(y, axis)
    if x is None:
        return (_number(dx) / 2.0 * (left + right)).cumsum(axis)
    return (_spacing(y, x, axis) * (left + right)).cumsum(axis) / 2.0
