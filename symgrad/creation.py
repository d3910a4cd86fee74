"""Making tensors: from data, filled, random.  float32 by default, as PyTorch."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from symgrad import dtypes
from symgrad.nodes import leaf
from symgrad.tensor import Tensor

_generator = np.random.default_rng()


def _device(array: np.ndarray):
    return jnp.asarray(array)


def _make(array: np.ndarray, dtype, requires_grad: bool) -> Tensor:
    if requires_grad and not dtype.is_floating_point:
        raise RuntimeError(f"Only Tensors of floating point and complex dtype can require gradients "
                           f"(got dtype {dtype}, shape {tuple(array.shape)})")
    return Tensor(leaf(_device(np.asarray(array, dtype=dtype.numpy)), dtype, requires_grad))


def _first_element(data):
    while isinstance(data, (list, tuple)) and data:
        data = data[0]
    return data


def _infer_dtype(data) -> dtypes.dtype:
    first = _first_element(data)
    if isinstance(first, np.generic):  # NumPy scalars keep their dtype, as a NumPy array does
        return dtypes.from_numpy(first.dtype)
    array = np.asarray(data)
    if array.dtype.kind == "f":
        return dtypes.float32 if not isinstance(data, np.ndarray) else dtypes.from_numpy(array.dtype)
    if array.dtype.kind == "b":
        return dtypes.bool_
    if array.dtype.kind in "iu":
        return dtypes.int64 if not isinstance(data, np.ndarray) else dtypes.from_numpy(array.dtype)
    if array.size == 0:
        return dtypes.float32
    raise TypeError(f"can't make a tensor from {type(data).__name__} of dtype {array.dtype}")


def _unwrap(data):
    if isinstance(data, Tensor):
        return np.asarray(data)
    if isinstance(data, (list, tuple)):
        return [_unwrap(d) for d in data]
    return data


def tensor(data, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """A new leaf holding a copy of ``data`` (nested lists, numbers, arrays, tensors)."""
    data = _unwrap(data)
    dtype = dtype or _infer_dtype(data)
    return _make(np.array(data, dtype=dtype.numpy), dtype, requires_grad)


def as_tensor(data, dtype=None) -> Tensor:
    if isinstance(data, Tensor) and (dtype is None or data.dtype is dtype):
        return data
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    return _make(array, dtypes.from_numpy(array.dtype), False)


def _size(size) -> tuple:
    """``zeros(2, 3)`` and ``zeros((2, 3))`` as a shape; a negative size is PyTorch's RuntimeError."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    shape = tuple(int(s) for s in size)
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")
    return shape


def full(size, fill_value, dtype=None, requires_grad: bool = False) -> Tensor:
    dtype = dtype or dtypes.default_for(fill_value)
    shape = _size((size,) if isinstance(size, int) else tuple(size))
    return _make(np.full(shape, fill_value, dtype.numpy), dtype, requires_grad)


def ones(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    return _make(np.ones(_size(size)), dtype or dtypes.float32, requires_grad)


def zeros(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    return _make(np.zeros(_size(size)), dtype or dtypes.float32, requires_grad)


def eye(n: int, m: int | None = None, dtype=None, requires_grad: bool = False) -> Tensor:
    for name, size in (("n", n), ("m", m)):
        if size is not None and size < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {size}")
    return _make(np.eye(n, m), dtype or dtypes.float32, requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    values = np.arange(start, end, step)
    floating = any(isinstance(v, float) for v in (start, end, step))
    return _make(values, dtype or (dtypes.float32 if floating else dtypes.int64), requires_grad)


def linspace(start, end, steps: int, dtype=None, requires_grad: bool = False) -> Tensor:
    return _make(np.linspace(start, end, steps), dtype or dtypes.float32, requires_grad)


def randn(*size, dtype=None, requires_grad: bool = False, generator=None) -> Tensor:
    return _make((generator or _generator).standard_normal(_size(size)), dtype or dtypes.float32, requires_grad)


def rand(*size, dtype=None, requires_grad: bool = False, generator=None) -> Tensor:
    return _make((generator or _generator).random(_size(size)), dtype or dtypes.float32, requires_grad)


def randint(low, high=None, size=None, dtype=None) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``, as PyTorch."""
    if size is None:
        if isinstance(high, (tuple, list)):
            low, high, size = 0, low, high
        else:
            size = ()
    return _make(_generator.integers(low, high, size=_size(tuple(size))), dtype or dtypes.int64, False)


def _like(fn, other: Tensor, dtype, requires_grad):
    return fn(*other.shape, dtype=dtype or other.dtype, requires_grad=requires_grad)


def ones_like(input: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return _like(ones, input, dtype, requires_grad)


def zeros_like(input: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return _like(zeros, input, dtype, requires_grad)


def randn_like(input: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return _like(randn, input, dtype, requires_grad)


def rand_like(input: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return _like(rand, input, dtype, requires_grad)


def full_like(input: Tensor, fill_value, dtype=None, requires_grad: bool = False) -> Tensor:
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype, requires_grad=requires_grad)


class Generator:
    """The object ``manual_seed`` returns; ``initial_seed()`` as PyTorch."""

    def __init__(self, seed: int):
        self._seed = seed

    def initial_seed(self) -> int:
        return self._seed


def manual_seed(seed: int) -> Generator:
    """Seed the global generator (NumPy's PCG64 here, so the draws differ from PyTorch's)."""
    global _generator
    _generator = np.random.default_rng(seed)
    return Generator(seed)
