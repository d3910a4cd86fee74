"""PyTorch's dtypes, ``torch.Size``, and its type-promotion rule.

Promotion follows PyTorch, not NumPy or JAX: a Python number never widens a tensor's dtype
(``float32_tensor * 0.1`` stays float32), a 0-dim tensor only does so when it is of a higher
kind (bool < integer < floating), and integers meeting a float number give the default float.
"""
from __future__ import annotations

import numpy as np


class dtype:
    """A tensor element type; ``repr`` is PyTorch's (``torch.float32``)."""

    __slots__ = ("name", "numpy", "category", "itemsize")

    def __init__(self, name: str, category: int):
        self.name = name
        self.numpy = np.dtype(name if name != "bool" else np.bool_)
        self.category = category  # BOOLEAN < INTEGER < FLOATING: the order promotion follows
        self.itemsize = self.numpy.itemsize

    @property
    def is_floating_point(self) -> bool:
        return self.category == FLOATING

    @property
    def is_integer(self) -> bool:
        return self.category == INTEGER

    @property
    def is_signed(self) -> bool:
        return self.category == FLOATING or (self.category == INTEGER and self.numpy.kind == "i")

    def __repr__(self):
        return f"torch.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


BOOLEAN, INTEGER, FLOATING = 0, 1, 2  # dtype categories, in promotion order

bool_ = dtype("bool", BOOLEAN)
uint8 = dtype("uint8", INTEGER)
int8 = dtype("int8", INTEGER)
int16 = dtype("int16", INTEGER)
int32 = dtype("int32", INTEGER)
int64 = dtype("int64", INTEGER)
float16 = dtype("float16", FLOATING)
float32 = dtype("float32", FLOATING)
float64 = dtype("float64", FLOATING)

ALL = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64)
_BY_NUMPY = {d.numpy: d for d in ALL}
_DEFAULT_FOR_CATEGORY = {BOOLEAN: bool_, INTEGER: int64}


def _by_name(name: str) -> dtype:
    return next(d for d in ALL if d.name == name)


def from_numpy(np_dtype) -> dtype:
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _BY_NUMPY:
        return _BY_NUMPY[np_dtype]
    if np_dtype.kind in "iu":
        return int64
    raise TypeError(f"can't convert np.ndarray of type {np_dtype} to a symgrad dtype; "
                    "supported: " + ", ".join(d.name for d in ALL))


_TORCH_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
                "float16": "Half", "float32": "Float", "float64": "Double"}


def torch_name(d: dtype) -> str:
    """The name PyTorch's kernels use in their errors: ``Long``, ``Float``."""
    return _TORCH_NAMES[d.name]


_CXX_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t",
              "float16": "c10::Half", "float32": "float", "float64": "double"}
_TYPE_IDS = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
             "int64": "long int", "float16": "c10::Half", "float32": "float", "float64": "double"}


def type_id(d: dtype) -> str:
    """The C++ type name PyTorch's messages print from its typeid: ``long int``, ``unsigned char``."""
    return _TYPE_IDS[d.name]


_RANGES = {d: (float(np.finfo(d.numpy).max) if d.category == FLOATING else None,
               np.iinfo(d.numpy) if d.category == INTEGER else None) for d in ALL}


def _integer_limits(d: dtype) -> tuple:
    """The numbers PyTorch's checked conversion lets into integer type ``d``: its range, and for
    uint8 the negatives down to -255 too (they wrap around, as two's complement)."""
    limits = _RANGES[d][1]
    return (-int(limits.max) if limits.min == 0 else int(limits.min)), int(limits.max)


def number_in(value, d: dtype):
    """The Python number ``value`` as a tensor of ``d`` holds it (ints truncate, uint8 wraps negatives
    around), refused as PyTorch's checked conversion refuses it: outside ``d``'s range, or NaN/inf
    into an integer type."""
    if isinstance(value, int) and not -2 ** 63 <= value < 2 ** 64:
        raise OverflowError("int too big to convert")
    if d is bool_:
        return bool(value)
    largest, limits = _RANGES[d]
    if limits is not None:
        low, high = _integer_limits(d)
        if not low <= value <= high:  # False for NaN too
            raise RuntimeError(f"value cannot be converted to type {_CXX_NAMES[d.name]} without overflow")
        return int(value) % (high + 1) if limits.min == 0 else int(value)
    value = float(value)
    if abs(value) > largest and abs(value) != float("inf"):
        raise RuntimeError(f"value cannot be converted to type {_CXX_NAMES[d.name]} without overflow")
    return value


def array_in(data, d: dtype) -> np.ndarray:
    """``torch.tensor(data, dtype=d)``'s values: numbers outside an integer type's range (int32 and
    narrower; uint8 wraps negatives down to -255 around) refused as PyTorch refuses them.  A whole
    array (or tensor) is cast instead, wrapping around, as PyTorch copies one."""
    if d.category != INTEGER or d is int64 or isinstance(data, np.ndarray):
        return np.array(data, dtype=d.numpy)
    values = np.array(data)
    if values.dtype.kind not in "iuf" or not values.size:
        return np.array(values, dtype=d.numpy)
    low, high = _integer_limits(d)
    if values.min() < low or values.max() > high:
        raise RuntimeError(f"value cannot be converted to type {d.name} without overflow")
    return values.astype(d.numpy)


_default_float = [float32]  # torch.set_default_dtype's setting


def get_default_dtype() -> dtype:
    """The dtype of Python floats and of tensors made without one (float32 unless changed)."""
    return _default_float[0]


def set_default_dtype(d: dtype) -> None:
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default_float[0] = d


def default_for(value) -> dtype:
    """The dtype PyTorch gives a Python scalar."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    return _default_float[0]


def promote(operands) -> dtype:
    """Result dtype for ``(dtype, priority)`` pairs: 2 dim>0 tensor, 1 0-dim tensor, 0 Python number."""
    top = max(d.category for d, _ in operands)
    for priority in (2, 1, 0):
        group = [d for d, p in operands if p == priority]
        if group and max(d.category for d in group) == top:
            if priority == 0:
                return _default_float[0] if top == FLOATING else _DEFAULT_FOR_CATEGORY[top]
            return _widest([d for d in group if d.category == top])
    raise AssertionError("unreachable")


def _widest(group) -> dtype:
    """The widest of one kind's dtypes; uint8 meeting int8 needs int16 to hold both ranges."""
    if uint8 in group and int8 in group and all(d.itemsize == 1 for d in group):
        return int16
    return max(group, key=lambda d: d.itemsize)


class device:
    """``torch.device``: a type (``cpu``, ``cuda``) and an optional index; symgrad.devices maps
    it to a JAX device."""

    __slots__ = ("type", "index")

    def __init__(self, type="cpu", index: int | None = None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int):
            raise RuntimeError("symgrad has no accelerator: a device given by index alone names one")
        elif ":" in type:
            type, _, number = type.partition(":")
            if not number.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}:{number}'")
            index = int(number)
        self.type, self.index = type, index

    def __repr__(self):
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self):
        return self.type + (f":{self.index}" if self.index is not None else "")

    def __eq__(self, other):
        return str(other) == str(self)

    def __hash__(self):
        return hash(str(self))


CPU = device("cpu")


class Size(tuple):
    """``torch.Size``: a tuple that prints as ``torch.Size([5, 3])``."""

    def __repr__(self):
        return f"torch.Size({list(self)})"

    def __getitem__(self, item):
        result = tuple.__getitem__(self, item)
        return Size(result) if isinstance(item, slice) else result

    __str__ = __repr__

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


def size_at(shape, dim: int) -> int:
    """``tensor.size(dim)``, with PyTorch's IndexError for a dim out of range."""
    if not shape:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -len(shape) <= dim < len(shape):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape)}, {len(shape) - 1}], "
                         f"but got {dim})")
    return shape[dim]
