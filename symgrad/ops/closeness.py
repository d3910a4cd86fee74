"""isclose, allclose, equal: PyTorch's closeness tests, composed of its comparisons.

PyTorch composes them so too (``isclose`` in ATen's TensorCompare), and the composition is what
fixes its answers at the edges: equal infinities are close, an infinite difference never is,
NaN only with ``equal_nan``, and integers are compared in the default float dtype (so 10**12 and
10**12 + 1 are close in float32).
"""
from __future__ import annotations

from symgrad import dtypes
from symgrad.ops.elementwise import EQ
from symgrad.ops.logical import ISFINITE, ISNAN
from symgrad.ops.reductions import all as all_
from symgrad.ops.registry import Names
from symgrad.ops.shape import to_dtype
from symgrad.tensor import Tensor, apply


def _tensors(name: str, input, other) -> None:
    for position, (which, value) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name}(): argument '{which}' (position {position}) must be Tensor, "
                            f"not {type(value).__name__}")


@EQ.publish(Names(function=("isclose",), method=("isclose",)))
def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """``|input - other| <= atol + rtol * |other|`` where finite, or equal (NaN with ``equal_nan``);
    as NumPy's, not symmetric in its arguments."""
    _tensors("isclose", input, other)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{dtypes.torch_name(input.dtype)} did not match {dtypes.torch_name(other.dtype)}")
    for name, tolerance in (("rtol", rtol), ("atol", atol)):
        if not tolerance >= 0:
            raise RuntimeError(f"{name} must be greater than or equal to zero, but got {tolerance:g}")
    close = input == other
    if equal_nan and input.dtype.is_floating_point:
        close = close | (apply(ISNAN, input) & apply(ISNAN, other))
    if rtol == 0 and atol == 0:  # no tolerance: equality, without an error to round
        return close
    default = dtypes.get_default_dtype()
    input = to_dtype(input, default) if input.dtype is dtypes.bool_ else input
    other = other if other.dtype.is_floating_point else to_dtype(other, default)
    actual_error = (input - other).abs()
    return close | (apply(ISFINITE, actual_error) & (actual_error <= atol + (rtol * other).abs()))


@EQ.publish(Names(function=("allclose",), method=("allclose",)))
def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    _tensors("allclose", input, other)
    return bool(all_(isclose(input, other, rtol, atol, equal_nan)).item())


@EQ.publish(Names(function=("equal",), method=("equal",)))
def equal(input, other) -> bool:
    """The same shape and equal values (dtypes promoted, as ``==``; NaN equals nothing)."""
    _tensors("equal", input, other)
    return input.shape == other.shape and bool(all_(input == other).item())
