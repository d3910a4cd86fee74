"""``torch.FloatTensor``, ``torch.LongTensor``...: PyTorch's legacy typed constructors, which are
also types (``isinstance(t, torch.FloatTensor)`` asks for a float32 tensor)."""
from __future__ import annotations

from symgrad import dtypes
from symgrad.tensor import Tensor, legacy_leaf


class _LegacyType(type):
    def __call__(cls, *args):
        return Tensor(legacy_leaf(cls.dtype, args))

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype


class FloatTensor(metaclass=_LegacyType):
    dtype = dtypes.float32


class DoubleTensor(metaclass=_LegacyType):
    dtype = dtypes.float64


class HalfTensor(metaclass=_LegacyType):
    dtype = dtypes.float16


class LongTensor(metaclass=_LegacyType):
    dtype = dtypes.int64


class IntTensor(metaclass=_LegacyType):
    dtype = dtypes.int32


class BoolTensor(metaclass=_LegacyType):
    dtype = dtypes.bool_
