"""Fractional max pooling (Graham, 2014): a max over ``kernel_size`` windows whose starts step
pseudo-randomly, so the output size is any fraction of the input's.

Each plane (batch entry and channel) has its own window starts, from one uniform sample per
spatial axis: ``_random_samples`` if given, else ``rand(N, C, n)`` in the input's dtype, drawn as
PyTorch draws it, so a seeded call picks PyTorch's windows.  The starts are computed on the host in
the input's dtype as PyTorch's CPU kernel computes them, and the windows gathered by one gather
whose index tables cover the plane's axes too; the max over a window's taps in PyTorch's scan
order (the first largest, or the last NaN) is the window max of symgrad.ir.linalg, whose gradient
reaches the one entry picked."""
from __future__ import annotations

import numpy as np
import sympy as sp

from symgrad import creation, dtypes
from symgrad.ir.indexing import take
from symgrad.ir.linalg import ArgmaxMask, WindowMax, emit
from symgrad.nn.module import Module
from symgrad.nodes import leaf
from symgrad.ops.convolution import _sizes, picked_positions, plane_positions
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply


def _infer(nodes, sizes):
    x = nodes[0]
    return (*x.shape[:len(x.shape) - len(sizes)], *sizes), x.dtype


def _windows(p, x, tables, n):
    """x's windows as (*lead, *out, taps): x indexed by ``tables`` (its leading axes), which
    broadcast to (*lead, *out, *kernel); the kernel axes flattened in row-major (scan) order."""
    taken = take(p, x, tables, tuple(range(len(tables))))
    shape = p.shape_of(taken)
    return p.reshape(taken, (*shape[:len(shape) - n], int(np.prod(shape[len(shape) - n:]))))


def _build(p, node, x, *tables):
    windows = _windows(p, x, tables, len(node.attrs[0]))
    return emit(p, WindowMax, windows, sp.Integer(len(node.shape)), hint="fractional_max_pool")


def _build_indices(p, node, x, positions, *tables):
    n, axis = len(node.attrs[0]), len(node.shape)
    picked = emit(p, ArgmaxMask, _windows(p, x, tables, n), sp.Integer(axis), hint="picked")
    return picked_positions(p, picked, _windows(p, positions, tables[len(tables) - n:], n), axis)


# No generic examples: the windows come from random samples; tests/test_fractional_pools.py checks
# values, indices and gradients against PyTorch.
FRACTIONAL_MAX_POOL = register(Op("fractional_max_pool",
                                  lambda nodes, sizes: f"FractionalMaxPool{len(sizes)}DBackward0",
                                  _infer, _build, shown_inputs=lambda inputs: inputs[:1]))
FRACTIONAL_MAX_POOL_INDICES = register(Op(
    "fractional_max_pool_indices", None, lambda nodes, sizes: (_infer(nodes, sizes)[0], dtypes.int64),
    _build_indices, saves=False))


def _starts(samples: np.ndarray, size: int, out: int, kernel: int) -> np.ndarray:
    """(planes, out) window starts along one axis from each plane's sample, in the samples' dtype
    and PyTorch's order of operations; the last window ends at the edge."""
    kind = samples.dtype.type
    starts = np.empty((len(samples), out), dtype=np.int64)
    if out > 1:
        alpha = kind(size - kernel) / kind(out - 1)
        steps = np.arange(out - 1, dtype=kind)
        starts[:, :-1] = (((steps[None] + samples[:, None]) * alpha).astype(np.int32)
                          - (samples * alpha).astype(np.int32)[:, None])
    if out > 0:
        starts[:, -1] = size - kernel
    return starts


def _tables(lead, samples, spatial, sizes, kernel) -> list:
    """Index tables for (*lead, *spatial) that broadcast to (*lead, *out, *kernel): an arange per
    leading axis, and per spatial axis each plane's window starts plus the tap offsets."""
    n, width = len(spatial), len(lead) + 2 * len(spatial)
    tables = []
    for j, count in enumerate(lead):
        shape = [1] * width
        shape[j] = count
        tables.append(np.arange(count, dtype=np.int64).reshape(shape))
    for i, (size, out, k) in enumerate(zip(spatial, sizes, kernel)):
        starts = _starts(samples[..., i].reshape(-1), size, out, k)
        at_out = [out if a == i else 1 for a in range(n)]
        at_kernel = [k if a == i else 1 for a in range(n)]
        tables.append(starts.reshape(*lead, *at_out, *[1] * n)
                      + np.arange(k, dtype=np.int64).reshape(*[1] * (len(lead) + n), *at_kernel))
    return tables


_NAMES = {2: ("fractional_max_pool2d", ("height", "width")),  # its checks' wording; the 3-D one checks
          3: ("fractional_max_pool3d_out", ("time", "height", "width"))}  # time, width, then height


def _output_size(input, n, output_size, output_ratio):
    """The output's spatial size, given or as a fraction of the input's (PyTorch's Python layer)."""
    if output_size is None and output_ratio is None:
        raise ValueError(f"fractional_max_pool{n}d requires specifying either an output_size or an output_ratio")
    if output_size is not None:
        return output_size
    if n == 2 and len(output_ratio) > 2:
        raise ValueError("fractional_max_pool2d requires output_ratio to either be a single Int or tuple of Ints.")
    ratios = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * n
    return [int(input.size(i - n) * ratio) for i, ratio in enumerate(ratios)]


def _as_sizes(value, n, what: str) -> tuple:
    values = (value,) * n if isinstance(value, int) else tuple(int(v) for v in value)
    if len(values) != n:
        raise RuntimeError(f"fractional_max_pool{n}d: {what} must either be a single Int or tuple of Ints")
    return values


def _check(input, samples, n, kernel, sizes) -> None:
    """PyTorch's kernel checks, in its words."""
    name, axes = _NAMES[n]
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got: {_sizes(input.shape)}")
    for axis in range(1, input.dim()):
        if input.shape[axis] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but "
                               f"got{_sizes(input.shape)} with dimension {axis} being empty.")
    if samples.dtype is not input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.dim() != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.dim()}")
    if samples.shape[0] < (input.shape[0] if input.dim() == n + 2 else 1):
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != input.shape[-n - 1]:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != n:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {n}; got {samples.shape[2]}.")
    checks = list(zip(axes, input.shape[-n:], sizes, kernel))
    for axis, size, out, k in checks if n == 2 else [checks[0], checks[2], checks[1]]:
        if out + k - 1 > size or (n == 3 and out + k - 1 == size):  # the 3-D kernel wants room to spare
            raise RuntimeError(f"{name}(): pool {axis} {k} too large relative to input {axis} {size}")


def _fractional_max_pool(n, input, kernel_size, output_size, output_ratio, random_samples):
    """(output, indices): the max of each window and its flat position in the input plane."""
    sizes = _output_size(input, n, output_size, output_ratio)
    if random_samples is None:
        batch = 1 if input.dim() == n + 1 else input.size(0)
        random_samples = creation.rand(batch, input.size(-n - 1), n, dtype=input.dtype)
    kernel, sizes = _as_sizes(kernel_size, n, "kernel_size"), _as_sizes(sizes, n, "output_size")
    _check(input, random_samples, n, kernel, sizes)
    lead, spatial = tuple(input.shape[:-n]), tuple(input.shape[-n:])
    samples = random_samples.numpy()[:lead[0] if len(lead) == 2 else 1]
    if n == 2:  # PyTorch's 2-D kernel reads a plane's samples as (width, height)
        samples = samples[..., ::-1]
    tables = [Tensor(leaf(table, dtypes.int64))
              for table in _tables(lead, samples.reshape(*lead, n), spatial, sizes, kernel)]
    output = apply(FRACTIONAL_MAX_POOL, input, *tables, attrs=(sizes,))
    return output, apply(FRACTIONAL_MAX_POOL_INDICES, input, plane_positions(spatial), *tables, attrs=(sizes,))


@FRACTIONAL_MAX_POOL.publish(Names(functional=("fractional_max_pool2d_with_indices",)))
def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, _random_samples)


@FRACTIONAL_MAX_POOL.publish(Names(functional=("fractional_max_pool3d_with_indices",)))
def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, _random_samples)


@FRACTIONAL_MAX_POOL.publish(Names(functional=("fractional_max_pool2d",)))
def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    result = _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, _random_samples)
    return result if return_indices else result[0]


@FRACTIONAL_MAX_POOL.publish(Names(functional=("fractional_max_pool3d",)))
def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    result = _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, _random_samples)
    return result if return_indices else result[0]


class _FractionalMaxPoolNd(Module):
    """Fractional max pooling with a fixed ``output_size`` or ``output_ratio``; fresh windows each
    call unless ``_random_samples`` (a buffer) fixes them."""

    _n = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None):
        super().__init__()
        n, name = self._n, type(self).__name__
        self.kernel_size = _tuple(kernel_size, n)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _tuple(output_size, n) if output_size is not None else None
        self.output_ratio = _tuple(output_ratio, n) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < ratio < 1 for ratio in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        pool = fractional_max_pool2d if self._n == 2 else fractional_max_pool3d
        return pool(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                    _random_samples=self._random_samples)


def _tuple(value, n) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    _n = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    _n = 3
