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

    def __repr__(self):
        return f"torch.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


BOOLEAN, INTEGER, FLOATING = 0, 1, 2  # dtype categories, in promotion order

bool_ = dtype("bool", BOOLEAN)
int32 = dtype("int32", INTEGER)
int64 = dtype("int64", INTEGER)
float16 = dtype("float16", FLOATING)
float32 = dtype("float32", FLOATING)
float64 = dtype("float64", FLOATING)

ALL = (bool_, int32, int64, float16, float32, float64)
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


_TORCH_NAMES = {"bool": "Bool", "int32": "Int", "int64": "Long", "float16": "Half", "float32": "Float",
                "float64": "Double"}


def torch_name(d: dtype) -> str:
    """The name PyTorch's kernels use in their errors: ``Long``, ``Float``."""
    return _TORCH_NAMES[d.name]


_CXX_NAMES = {"int32": "int", "int64": "int64_t", "float16": "c10::Half", "float32": "float", "float64": "double"}
_RANGES = {d: (float(np.finfo(d.numpy).max) if d.category == FLOATING else None,
               np.iinfo(d.numpy) if d.category == INTEGER else None) for d in ALL}


def number_in(value, d: dtype):
    """The Python number ``value`` as a tensor of ``d`` holds it (ints truncate), refused as PyTorch's
    checked conversion refuses it: outside ``d``'s range, or NaN/inf into an integer type."""
    if isinstance(value, int) and not -2 ** 63 <= value < 2 ** 64:
        raise OverflowError("int too big to convert")
    if d is bool_:
        return bool(value)
    largest, limits = _RANGES[d]
    if limits is not None:
        if not limits.min <= value <= limits.max:  # False for NaN too
            raise RuntimeError(f"value cannot be converted to type {_CXX_NAMES[d.name]} without overflow")
        return int(value)
    value = float(value)
    if abs(value) > largest and abs(value) != float("inf"):
        raise RuntimeError(f"value cannot be converted to type {_CXX_NAMES[d.name]} without overflow")
    return value


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
            return max((d for d in group if d.category == top), key=lambda d: d.itemsize)
    raise AssertionError("unreachable")


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
