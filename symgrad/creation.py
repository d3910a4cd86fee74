"""Making tensors: from data, filled, random.  Floats are the default dtype (float32 unless
``set_default_dtype`` changed it), as PyTorch."""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from symgrad import backends, devices, dtypes, random
from symgrad.grad_mode import is_grad_enabled
from symgrad.inplace import check_writable, write_values
from symgrad.nodes import leaf
from symgrad.storage import memory_order
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
    return _make(dtypes.array_in(data, dtype), dtype, requires_grad)


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
    too, or under ``use_deterministic_algorithms(True)`` what PyTorch fills them with then: NaN, or
    the dtype's largest value (``pin_memory`` and ``memory_format`` change nothing on a JAX device)."""
    if not dims and size is None:
        raise TypeError('empty() missing 1 required positional arguments: "size"')
    if backends.are_deterministic_algorithms_enabled():
        dtype = dtype or dtypes.get_default_dtype()
        unset = math.nan if dtype.is_floating_point else True if dtype is dtypes.bool_ else np.iinfo(dtype.numpy).max
        return full(_size(dims if size is None else (size,)), unset, dtype=dtype, device=device,
                    requires_grad=requires_grad)
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


# ----------------------------------------------------------------- evenly spaced (PyTorch's CPU kernels, bit for bit)

def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """PyTorch's kernel: the first half counts up from ``start``, the second down from ``end``
    (so the ends are exact and the middle of ``linspace(-1, 1, 7)`` is -2.98e-08, not 0)."""
    devices.check(device)
    dtype = _spaced_dtype(dtype, "linspace")
    steps = _steps(start, end, steps, "linspace")
    start, end = _ends(start, end, "linspace")
    if steps <= 1:  # (PyTorch's fill: no step, and nothing checked of an empty one)
        return _make(np.full(steps, dtypes.number_in(start, dtype) if steps else 0), dtype, requires_grad)
    return _make(_counted(dtypes.number_in(start, dtype), dtypes.number_in(end, dtype), steps, dtype), dtype,
                 requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """``base`` to the powers PyTorch's ``logspace`` kernel computes: in float64 (as its kernel, unfused),
    from ``start`` and ``end`` held in ``dtype`` first; C's ``pow``; then rounded (or truncated) to ``dtype``."""
    devices.check(device)
    dtype = _spaced_dtype(dtype, "logspace")
    steps = _steps(start, end, steps, "logspace")
    start, end = _ends(start, end, "logspace")
    with np.errstate(invalid="ignore", over="ignore"):  # (infinities and NaN as the kernel gives them)
        powers = np.array([_c_pow(float(base), x) for x in _exponents(start, end, steps, dtype)])
        if dtype is dtypes.float16:  # a double stored into a Half passes through float
            powers = powers.astype(np.float32)
        return _make(powers.astype(dtype.numpy), dtype, requires_grad)


def _exponents(start, end, steps: int, dtype) -> list:
    """logspace's exponents: ``start + step*i`` up to halfway, ``end - step*(steps-1-i)`` from there, in
    float64 with the ends first held in ``dtype`` and their difference taken there; a single step's
    exponent is ``start`` as given."""
    if steps <= 1:
        return [float(start)] * steps
    low, high = (dtype.numpy.type(dtypes.number_in(v, dtype)) for v in (start, end))
    step = float(high - low) / (steps - 1)
    halfway = steps // 2
    up = float(low) + step * np.arange(halfway, dtype=np.float64)
    down = float(high) - step * np.arange(steps - halfway - 1, -1, -1, dtype=np.float64)
    return np.concatenate([up, down]).tolist()


def _spaced_dtype(dtype, name: str) -> dtypes.dtype:
    dtype = dtype or dtypes.get_default_dtype()
    if dtype is dtypes.bool_:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'Bool\'')
    return dtype


def _ends(start, end, name: str) -> tuple:
    """Numbers, or 0-dim tensors read as their numbers (PyTorch's error for others)."""
    tensors = [(which, v) for which, v in (("start", start), ("end", end)) if isinstance(v, Tensor)]
    if any(v.dim() for _, v in tensors):
        got = " and ".join(f"{which} with {v.dim()} dimension(s)" for which, v in tensors)
        raise RuntimeError(f"{name} only supports 0-dimensional start and end tensors, but got {got}.")
    return tuple(v.item() if isinstance(v, Tensor) else v for v in (start, end))


def _steps(start, end, steps, name: str) -> int:
    if not isinstance(steps, int) or isinstance(steps, bool):
        given = ", ".join(type(v).__name__ for v in (start, end, steps))
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({given}), but expected one "
                        f"of:\n * (start, end, int steps, ...)")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return steps


def _counted(start, end, steps: int, dtype) -> np.ndarray:
    """``start + step*i`` below ``steps // 2``, ``end - step*(steps-1-i)`` from there, each a fused
    multiply-add in ``dtype`` (the kernel is compiled with FMA); integers count in float64 and are
    truncated; float16 rounds after each operation (c10::Half's arithmetic)."""
    halfway = steps // 2
    up, down = np.arange(halfway), np.arange(steps - halfway - 1, -1, -1)
    if dtype is dtypes.float16:
        low, high = np.float16(start), np.float16(end)
        step = (high - low) / np.float16(steps - 1)
        return np.concatenate([low + step * up.astype(np.float16), high - step * down.astype(np.float16)])
    counting = dtype.numpy.type if dtype.is_floating_point else np.float64
    low, high = counting(start), counting(end)
    step = (high - low) / counting(steps - 1)
    fma = random.fma32 if counting is np.float32 else random.fma64
    with np.errstate(invalid="ignore", over="ignore"):
        values = np.concatenate([fma(step, up.astype(counting), low), fma(step, -down.astype(counting), high)])
        return values.astype(dtype.numpy)


def _c_pow(base: float, exponent: float) -> float:
    """C's ``pow`` (PyTorch's kernel calls it): ``math.pow`` is the same function, but raises
    where C returns an infinity or NaN."""
    try:
        return math.pow(base, exponent)
    except (OverflowError, ValueError):
        if base < 0 and exponent != math.floor(exponent):
            return -math.nan  # the CPU's default NaN, which C's pow returns: its sign bit set
        negative = math.copysign(1.0, base) < 0 and exponent % 2 == 1  # an odd power keeps the sign
        return -math.inf if negative else math.inf


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

def _draw(draw, shape: tuple, dtype, generator, order=None) -> np.ndarray:
    """``draw(generator, n, dtype)`` shaped as PyTorch fills a tensor: in C order, or, for a tensor
    laid out otherwise, element i takes draw ``order[i]`` (symgrad.storage.memory_order)."""
    generator, n = generator or random.default_generator, int(np.prod(shape, dtype=np.int64))
    if order is None:
        return draw(generator, n, dtype).reshape(shape)
    return random.out_of_order(draw)(generator, n, dtype)[order].reshape(shape)


def _random(draw, shape: tuple, dtype, requires_grad: bool, device, generator, order=None) -> Tensor:
    devices.check(device)
    return _make(_draw(draw, shape, dtype, generator, order), dtype, requires_grad)


def draws_like(tensor: Tensor, draw, generator=None) -> Tensor:
    """A new tensor of ``tensor``'s shape and dtype holding ``draw``'s numbers, drawn in the memory
    order PyTorch's ``empty_like`` keeps (a transposed input's): a leaf with values from the start,
    not a tensor written in place (a dropout mask: a replayed step takes it as one more array from
    outside, symgrad.replaying)."""
    order = memory_order(tensor)
    return _make(_draw(draw, tuple(tensor.shape), tensor.dtype, generator, order), tensor.dtype, False)


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


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Category indices drawn with ``input``'s rows as weights (symgrad.random.multinomial): int64,
    of shape ``(num_samples,)`` or ``(rows, num_samples)``."""
    if not isinstance(num_samples, int) or isinstance(num_samples, bool):
        raise TypeError(f"multinomial(): argument 'num_samples' (position 2) must be int, not "
                        f"{type(num_samples).__name__}")
    if input.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{dtypes.torch_name(input.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > input.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    rows = np.asarray(input).reshape(input.shape[0] if input.dim() == 2 else 1, input.shape[-1])
    if rows.shape[0] == 0:
        drawn = np.zeros((0, num_samples), dtype=np.int64)
    else:
        drawn = random.multinomial(generator or random.default_generator, rows, num_samples, bool(replacement),
                                   input.dtype)
    return _make(drawn.reshape(*input.shape[:-1], num_samples), dtypes.int64, False)


def _random_like(draw, input: Tensor, dtype, requires_grad, device, generator) -> Tensor:
    """Drawn in the memory order of the tensor PyTorch's ``empty_like(input)`` makes."""
    return _random(draw, tuple(input.shape), dtype or input.dtype, requires_grad, device, generator,
                   memory_order(input))


def randn_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _random_like(random.normal, input, dtype, requires_grad, device, generator)


def rand_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _random_like(random.uniform, input, dtype, requires_grad, device, generator)


def randint_like(input: Tensor, low: int = 0, high=None, *, generator=None, dtype=None, device=None,
                 requires_grad: bool = False) -> Tensor:
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``."""
    if high is None:
        low, high = 0, low
    draw = partial(random.random_from_to, low=int(low), high=int(high))
    return _random_like(draw, input, dtype, requires_grad, device, generator)


# ----------------------------------------------------------------- filling a tensor in place (nn.init's)

def _fill(tensor: Tensor, draw, generator, name: str) -> Tensor:
    """``tensor`` takes new random values (no history; a leaf that requires grad refuses under
    grad mode, as PyTorch's in-place ops do, and so do the views PyTorch cannot write into)."""
    node = tensor._node
    if node.requires_grad and node.is_leaf and is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if tensor._view is not None or tensor._inference:
        check_writable(tensor, name)
    values = _draw(draw, tuple(node.shape), node.dtype, generator, memory_order(tensor))
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
