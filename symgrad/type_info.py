"""Questions about dtypes: ``finfo``/``iinfo`` (a type's limits), ``promote_types``, ``result_type``,
``can_cast`` and ``typename``.

The limits are NumPy's description of the same IEEE and two's-complement formats; promotion is
symgrad.dtypes' rule, the one every op follows, so what these answer is what an op would do.
"""
from __future__ import annotations

import numbers

import numpy as np

from symgrad import dtypes
from symgrad.legacy_types import type_of
from symgrad.tensor import Tensor


def _dtype_argument(function: str, name: str, position: int, value) -> dtypes.dtype:
    if not isinstance(value, dtypes.dtype):
        raise TypeError(f"{function}(): argument '{name}' (position {position}) must be torch.dtype, "
                        f"not {type(value).__name__}")
    return value


class finfo:
    """``torch.finfo(dtype)``: a floating dtype's bits, eps, max, min, tiny (= smallest_normal) and
    resolution (10 to minus its decimal digits); without a dtype, the default dtype's."""

    __hash__ = None  # equal by dtype, as PyTorch's, and so not hashable

    def __init__(self, type=None):
        type = dtypes.get_default_dtype() if type is None else _dtype_argument("finfo", "type", 1, type)
        if not type.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        info = np.finfo(type.numpy)
        self.bits = int(info.bits)
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # (NumPy rounds it to the dtype: float16 0.0010004)
        self.dtype = type.name

    def __eq__(self, other):
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """``torch.iinfo(dtype)``: an integer dtype's bits, max and min (bool has none, as in PyTorch)."""

    __hash__ = None

    def __init__(self, type):
        type = _dtype_argument("iinfo", "type", 1, type)
        if type is dtypes.bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if not type.is_integer:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        info = np.iinfo(type.numpy)
        self.bits, self.max, self.min, self.dtype = int(info.bits), int(info.max), int(info.min), type.name

    def __eq__(self, other):
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __repr__(self):
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"


def promote_types(type1, type2) -> dtypes.dtype:
    """The dtype two tensors of these dtypes give an arithmetic op."""
    return dtypes.promote([(_dtype_argument("promote_types", "type1", 1, type1), 2),
                           (_dtype_argument("promote_types", "type2", 2, type2), 2)])


def result_type(tensor1, tensor2) -> dtypes.dtype:
    """The dtype of ``tensor1 + tensor2``: a dimensioned tensor outranks a 0-dim one, which outranks a
    Python number, within the same kind (bool < integer < floating)."""
    operands = []
    for value in (tensor1, tensor2):
        if isinstance(value, Tensor):
            operands.append((value.dtype, 2 if value.ndim else 1))
        elif isinstance(value, numbers.Number) and not isinstance(value, complex):
            operands.append((dtypes.default_for(value), 0))
        else:
            kinds = ["Tensor" if isinstance(v, Tensor) else type(v).__name__ for v in (tensor1, tensor2)]
            raise TypeError(f"result_type() received an invalid combination of arguments - got "
                            f"({', '.join(kinds)}), but expected one of: (Tensor tensor, Tensor other), "
                            f"(Number scalar, Tensor tensor), (Tensor tensor, Number other), "
                            f"(Number scalar1, Number scalar2)")
    return dtypes.promote(operands)


def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rule lets an op write ``from_`` values into a ``to`` tensor: never
    to a lower kind (float to integer, a number to bool); any width within a kind."""
    from_ = _dtype_argument("can_cast", "from_", 1, from_)
    return from_.category <= _dtype_argument("can_cast", "to", 2, to).category


def typename(obj) -> str:
    """A tensor's legacy type name (``'torch.FloatTensor'``), else the dotted name of the object's
    type (of the object itself when it is a class or function); builtins without their module."""
    if isinstance(obj, Tensor):
        return type_of(obj)
    named = obj if hasattr(obj, "__qualname__") else type(obj)
    module = getattr(named, "__module__", "") or ""
    return named.__qualname__ if module in ("", "builtins") else f"{module}.{named.__qualname__}"
