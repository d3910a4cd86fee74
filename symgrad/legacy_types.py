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


class ShortTensor(metaclass=_LegacyType):
    dtype = dtypes.int16


class CharTensor(metaclass=_LegacyType):
    dtype = dtypes.int8


class ByteTensor(metaclass=_LegacyType):
    dtype = dtypes.uint8


class BoolTensor(metaclass=_LegacyType):
    dtype = dtypes.bool_


LEGACY = {cls.__name__: cls for cls in (FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ShortTensor,
                                        CharTensor, ByteTensor, BoolTensor)}


def type_of(tensor, dtype=None, non_blocking: bool = False, **kwargs):
    """``tensor.type()``: its legacy type's name (``'torch.FloatTensor'``); ``tensor.type(t)`` with a
    dtype, a legacy type or its name: the tensor in that dtype (itself if it has it already)."""
    if dtype is None:
        name = next(name for name, cls in LEGACY.items() if cls.dtype is tensor.dtype)
        return f"torch.{name}"
    if dtype is Tensor or dtype == "torch.Tensor":  # the default tensor type
        dtype = dtypes.get_default_dtype()
    elif isinstance(dtype, str):
        cls = LEGACY.get(dtype.removeprefix("torch."))
        if cls is None or not dtype.startswith("torch."):
            raise ValueError(f"invalid type: {dtype!r}")
        dtype = cls.dtype
    elif isinstance(dtype, _LegacyType):
        dtype = dtype.dtype
    elif isinstance(dtype, type):
        name = dtype.__name__ if dtype.__module__ == "builtins" else f"{dtype.__module__}.{dtype.__qualname__}"
        raise ValueError(f"invalid type: '{name}'")
    elif not isinstance(dtype, dtypes.dtype):
        raise TypeError("dtype must be a type, str, or dtype object")
    return tensor.to(dtype)
