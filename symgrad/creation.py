"""Making tensors: from data, filled, random.  Floats are the default dtype (float32 unless
``set_default_dtype`` changed it), as PyTorch."""
from __future__ import annotations

from functools import partial

import numpy as np

from symgrad import devices, dtypes, random
from symgrad.grad_mode import is_grad_enabled
from symgrad.inplace import check_writable, write_values
from symgrad.nodes import leaf
from symgrad.tensor import Tensor
from symgrad.uploads import from_host


def _make(array: np.ndarray, dtype, requires_grad: bool) -> Tensor:
    if requires_grad and not dtype.is_floating_point:
        raise RuntimeError(f"Only Tensors of floating point and complex dtype can require gradients "
                           f"(got dtype {dtype}, shape {tuple(array.shape)})")
    return Tensor(leaf(from_host(np.asarray(array, dtype=dtype.numpy)), dtype, requires_grad))


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
        return dtypes.get_default_dtype() if not isinstance(data, np.ndarray) else dtypes.from_numpy(array.dtype)
    if array.dtype.kind == "b":
        return dtypes.bool_
    if array.dtype.kind in "iu":
        return dtypes.int64 if not isinstance(data, np.ndarray) else dtypes.from_numpy(array.dtype)
    if array.size == 0:
        return dtypes.get_default_dtype()
    raise TypeError(f"can't make a tensor from {type(data).__name__} of dtype {array.dtype}")


def _unwrap(data):
    if isinstance(data, Tensor):
        return np.asarray(data)
    if isinstance(data, (list, tuple)):
        return [_unwrap(d) for d in data]
    return data


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new leaf holding a copy of ``data`` (nested lists, numbers, arrays, tensors)."""
    devices.check(device)
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


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    devices.check(device)
    dtype = dtype or dtypes.default_for(fill_value)
    shape = _size((size,) if isinstance(size, int) else tuple(size))
    return _make(np.full(shape, dtypes.number_in(fill_value, dtype), dtype.numpy), dtype, requires_grad)


def ones(*dims, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    devices.check(device)
    return _make(np.ones(_size(dims if size is None else (size,))), dtype or dtypes.get_default_dtype(), requires_grad)


def zeros(*dims, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    devices.check(device)
    return _make(np.zeros(_size(dims if size is None else (size,))), dtype or dtypes.get_default_dtype(), requires_grad)


def empty(*dims, size=None, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False,
          memory_format=None) -> Tensor:
    """PyTorch leaves an empty tensor's values unset: here they are zeros, which PyTorch may give
    too (``pin_memory`` and ``memory_format`` change nothing on a JAX device)."""
    if not dims and size is None:
        raise TypeError('empty() missing 1 required positional arguments: "size"')
    return zeros(*dims, size=size, dtype=dtype, device=device, requires_grad=requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    devices.check(device)
    for name, size in (("n", n), ("m", m)):
        if size is not None and size < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {size}")
    return _make(np.eye(n, m), dtype or dtypes.get_default_dtype(), requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    devices.check(device)
    if end is None:
        start, end = 0, start
    values = np.arange(start, end, step)
    floating = any(isinstance(v, float) for v in (start, end, step))
    return _make(values, dtype or (dtypes.get_default_dtype() if floating else dtypes.int64), requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    devices.check(device)
    return _make(np.linspace(start, end, steps), dtype or dtypes.get_default_dtype(), requires_grad)


def _like(fn, input: Tensor, dtype, requires_grad, device=None, **kwargs) -> Tensor:
    return fn(size=tuple(input.shape), dtype=dtype or input.dtype, device=device, requires_grad=requires_grad,
              **kwargs)


def ones_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(ones, input, dtype, requires_grad, device)


def zeros_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(zeros, input, dtype, requires_grad, device)


def empty_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    return _like(empty, input, dtype, requires_grad, device)


def full_like(input: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype, device=device,
                requires_grad=requires_grad)


# ----------------------------------------------------------------- random (PyTorch's numbers: symgrad.random)

def _draw(draw, shape: tuple, dtype, generator) -> np.ndarray:
    """``draw(generator, n, dtype)`` shaped, C-ordered as PyTorch fills a tensor."""
    return draw(generator or random.default_generator, int(np.prod(shape, dtype=np.int64)), dtype).reshape(shape)


def _random(draw, shape: tuple, dtype, requires_grad: bool, device, generator) -> Tensor:
    devices.check(device)
    return _make(_draw(draw, shape, dtype, generator), dtype, requires_grad)


def draws_like(tensor: Tensor, draw, generator=None) -> Tensor:
    """A new tensor of ``tensor``'s shape and dtype holding ``draw``'s numbers: a leaf with values
    from the start, not a tensor written in place (a dropout mask: a replayed step takes it as one
    more array from outside, symgrad.replaying)."""
    return _make(_draw(draw, tuple(tensor.shape), tensor.dtype, generator), tensor.dtype, False)


def _dims(dims: tuple, size) -> tuple:
    """``rand(2, 3)``, ``rand((2, 3))``, ``rand(size=(2, 3))``; ``rand()`` is PyTorch's TypeError."""
    if not dims and size is None:
        raise TypeError("a size is needed: rand(2, 3), rand((2, 3)) or rand(size=(2, 3))")
    return _size(dims if size is None else (size,))


def rand(*dims, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform on [0, 1)."""
    return _random(random.uniform, _dims(dims, size), dtype or dtypes.get_default_dtype(), requires_grad, device, generator)


def randn(*dims, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal."""
    return _random(random.normal, _dims(dims, size), dtype or dtypes.get_default_dtype(), requires_grad, device, generator)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad: bool = False):
    """``normal(mean, std, size)`` with numbers; with tensors, standard normals scaled by ``std``
    and shifted by ``mean`` (two roundings, as PyTorch's ``mul_`` then ``add_``)."""
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise TypeError("normal() with a float mean and std needs a size")
        draw = partial(random.normal, mean=mean, std=std)
        return _random(draw, _size(tuple(size)), dtype or dtypes.get_default_dtype(), requires_grad, device, generator)
    devices.check(device)
    like = mean if isinstance(mean, Tensor) else std
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in (mean, std) if isinstance(t, Tensor)))
    values = _draw(random.normal, shape, like.dtype, generator)
    values = values * np.asarray(std, dtype=like.dtype.numpy) + np.asarray(mean, dtype=like.dtype.numpy)
    return _make(values, like.dtype, requires_grad)


def randint(*args, size=None, low=None, high=None, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: ``draw % (high - low) + low``."""
    args = list(args)
    if size is None and args and isinstance(args[-1], (tuple, list)):
        size = args.pop()
    if high is None:
        high = args.pop()
    low = args.pop() if args else (low or 0)
    draw = partial(random.random_from_to, low=int(low), high=int(high))
    return _random(draw, _size(tuple(size)), dtype or dtypes.int64, requires_grad, device, generator)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of ``range(n)``, shuffled as PyTorch shuffles."""
    return _random(random.randperm, _size((n,)), dtype or dtypes.int64, requires_grad, device, generator)


def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """Ones with probability ``input`` (or ``p``), zeros otherwise, in ``input``'s dtype."""
    out = _make(np.zeros(tuple(input.shape)), input.dtype, False)
    return bernoulli_(out, input if p is None else p, generator=generator)


def randn_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(randn, input, dtype, requires_grad, generator=generator, device=device)


def rand_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(rand, input, dtype, requires_grad, generator=generator, device=device)


def randint_like(input: Tensor, low: int = 0, high=None, *, generator=None, dtype=None, device=None,
                 requires_grad: bool = False) -> Tensor:
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dtype or input.dtype,
                   device=device, requires_grad=requires_grad)


# ----------------------------------------------------------------- filling a tensor in place (nn.init's)

def _fill(tensor: Tensor, draw, generator, name: str) -> Tensor:
    """``tensor`` takes new random values (no history; a leaf that requires grad refuses under
    grad mode, as PyTorch's in-place ops do, and so do the views PyTorch cannot write into)."""
    node = tensor._node
    if node.requires_grad and node.is_leaf and is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if tensor._view is not None or tensor._inference:
        check_writable(tensor, name)
    values = _draw(draw, tuple(node.shape), node.dtype, generator)
    write_values(tensor, leaf(from_host(np.asarray(values, dtype=node.dtype.numpy)), node.dtype))
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, *, to=None, generator=None) -> Tensor:
    """``Tensor.uniform_(from, to)``."""
    return _fill(tensor, partial(random.uniform, low=a, high=b if to is None else to), generator, "uniform_")


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    return _fill(tensor, partial(random.normal, mean=mean, std=std), generator, "normal_")


def random_(tensor: Tensor, low=None, high=None, *, to=None, generator=None) -> Tensor:
    """``random_()``, ``random_(to)``, ``random_(from, to)``."""
    high = high if to is None else to
    if low is not None and high is None:
        low, high = 0, low
    if high is None:
        return _fill(tensor, random.integers, generator, "random_")
    return _fill(tensor, partial(random.random_from_to, low=int(low or 0), high=int(high)), generator, "random_")


def exponential_(tensor: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    return _fill(tensor, partial(random.exponential, lambd=lambd), generator, "exponential_")


def bernoulli_(tensor: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Ones with probability ``p`` (a number, or a tensor broadcast to ``tensor``'s shape)."""
    if isinstance(p, Tensor):
        p = np.broadcast_to(np.asarray(p), tuple(tensor.shape)).ravel()
    return _fill(tensor, partial(random.bernoulli, p=p), generator, "bernoulli_")
