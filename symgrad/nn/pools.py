"""The pools beyond the 2-D and 3-D windows of symgrad.ops.convolution: the 1-D pools (PyTorch's
are its 2-D ones on the input with a height of 1, so their grad_fn is the squeeze's), adaptive
max pooling, and every pooling module.

An adaptive max pool's windows differ in size (k or k + 1 entries, PyTorch's floor/ceil bounds),
so each axis's windows are gathered as a padded table of positions, a short window repeating its
last entry; the max over the table's taps, in PyTorch's scan order (the first largest, or the last
NaN), is then the window max of symgrad.ir.linalg, whose gradient reaches the one entry picked. A
repeated entry is never picked ahead of the original, and where it is the last NaN it stands for
the same input entry, so values, indices and gradients are PyTorch's.
"""
from __future__ import annotations

import functools

import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.ir.indexing import take
from symgrad.ir.linalg import ArgmaxMask, WindowMax, emit
from symgrad.nn.module import Module
from symgrad.nodes import leaf
from symgrad.ops.convolution import (ADAPTIVE_AVG_POOL, AVG_POOL, MAX_POOL, _sizes, adaptive_avg_pool2d,
                                     adaptive_avg_pool3d, adaptive_windows, avg_pool2d, avg_pool3d, max_pool2d,
                                     max_pool3d, picked_positions, plane_positions)
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply

# ---------------------------------------------------------------------------- 1-D pools


def _one(value, function: str, argument: str, wording: str):
    """An int or a sequence of one, as PyTorch's 1-D pools read their arguments."""
    if isinstance(value, int):
        return value
    values = tuple(value)
    if len(values) != 1:
        raise RuntimeError(wording.format(function=function, argument=argument, size=len(values)))
    return int(values[0])


_MAX_POOL1D_SIZE = "{function}() {argument} must be an int, list of ints or tuple of ints of size 1 but got size {size}"
_ONE_INT = "{function}() argument '{argument}' should contain one int (got {size})"


def _check_rank_1d(input, function):
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional tensor for argument #1 "
                           f"'self' (while checking arguments for {function})")


@MAX_POOL.publish(Names(function=("max_pool1d",), functional=("max_pool1d",)))
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if input.dim() not in (2, 3):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{_sizes(input.shape)}")
    kernel = _one(kernel_size, "max_pool1d", "kernel_size", _MAX_POOL1D_SIZE)
    no_stride = stride is None or (not isinstance(stride, int) and not len(stride))
    stride = kernel if no_stride else _one(stride, "max_pool1d", "stride", _MAX_POOL1D_SIZE)
    padding = _one(padding, "max_pool1d", "padding", _MAX_POOL1D_SIZE)
    dilation = _one(dilation, "max_pool1d", "dilation", _MAX_POOL1D_SIZE)
    for value, name in ((kernel, "kernel_size"), (stride, "stride")):
        if value <= 0:
            raise RuntimeError(f"max_pool1d() {name} must be greater than zero, but got {value}")
    if padding < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {padding}")
    if padding > kernel // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={padding} "
                           f"and kernel_size={kernel}")
    if dilation <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {dilation}")
    span = input.shape[-1] + 2 * padding - dilation * (kernel - 1) - 1
    if (-(-span // stride) if ceil_mode else span // stride) + 1 < 1:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {span // stride + 1}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"max_pool1d_impl" not implemented for '
                                  f"'{dtypes.torch_name(input.dtype).capitalize()}'")
    result = max_pool2d(input.unsqueeze(-2), (1, kernel), (1, stride), (0, padding), (1, dilation), ceil_mode,
                        return_indices)
    return tuple(r.squeeze(-2) for r in result) if return_indices else result.squeeze(-2)


@MAX_POOL.publish(Names(function=("max_pool1d_with_indices",), functional=("max_pool1d_with_indices",)))
def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


@AVG_POOL.publish(Names(function=("avg_pool1d",), functional=("avg_pool1d",)))
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    _check_rank_1d(input, "avg_pool1d")
    kernel = _one(kernel_size, "avg_pool1d", "kernel_size", _ONE_INT)
    no_stride = stride is None or (not isinstance(stride, int) and not len(stride))
    stride = kernel if no_stride else _one(stride, "avg_pool1d", "stride", _ONE_INT)
    padding = _one(padding, "avg_pool1d", "padding", _ONE_INT)
    return avg_pool2d(input.unsqueeze(-2), (1, kernel), (1, stride), (0, padding), ceil_mode,
                      count_include_pad).squeeze(-2)


@ADAPTIVE_AVG_POOL.publish(Names(function=("adaptive_avg_pool1d",), functional=("adaptive_avg_pool1d",)))
def adaptive_avg_pool1d(input, output_size):
    _check_rank_1d(input, "adaptive_avg_pool1d")
    size = _one(output_size, "adaptive_avg_pool1d", "output_size", _ONE_INT)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


# ---------------------------------------------------------------------- adaptive max pool


@functools.lru_cache(maxsize=256)
def _window_table(n: int, out: int):
    """(out, K) positions of each adaptive window, a short one repeating its last entry (a NumPy
    array: a constant, whether or not the call is being traced by JAX)."""
    windows = adaptive_windows(n, out)
    width = max((end - start for start, end in windows), default=1)
    table = [[min(start + j, end - 1) for j in range(width)] for start, end in windows]
    return np.array(table, dtype=np.int64).reshape(out, width)


def _windows(p, x, tables, rank):
    """x's windows as (*lead, *out, K): one gather whose index tables broadcast (out_i at axis i,
    taps at axis n + i), the taps then flattened in row-major (PyTorch's scan) order."""
    n = len(tables)
    taken = take(p, x, tables, tuple(range(rank - n, rank)))
    shape = p.shape_of(taken)
    return p.reshape(taken, (*shape[:len(shape) - n], int(np.prod(shape[len(shape) - n:]))))


def _infer_adaptive_max(nodes, sizes):
    x = nodes[0]
    return (*x.shape[:len(x.shape) - len(sizes)], *sizes), x.dtype


def _build_adaptive_max(p, node, x, *tables):
    windows = _windows(p, x, tables, len(node.inputs[0].shape))
    return emit(p, WindowMax, windows, sp.Integer(len(node.shape)), hint="adaptive_max_pool")


def _build_adaptive_max_indices(p, node, x, positions, *tables):
    rank = len(node.inputs[0].shape)
    axis = len(node.shape)
    picked = emit(p, ArgmaxMask, _windows(p, x, tables, rank), sp.Integer(axis), hint="picked")
    return picked_positions(p, picked, _windows(p, positions, tables, len(tables)), axis)


# No generic examples: the window tables are computed, not drawn; tests/test_nn_pools_more.py
# checks values, indices and gradients against PyTorch.
ADAPTIVE_MAX_POOL = register(Op("adaptive_max_pool2d", lambda nodes, sizes: f"AdaptiveMaxPool{len(sizes)}DBackward0",
                                _infer_adaptive_max, _build_adaptive_max, shown_inputs=lambda inputs: inputs[:1]))
ADAPTIVE_MAX_POOL_INDICES = register(Op(
    "adaptive_max_pool2d_indices", None, lambda nodes, sizes: (_infer_adaptive_max(nodes, sizes)[0], dtypes.int64),
    _build_adaptive_max_indices, saves=False))


def _adaptive_max_pool(input, output_size, return_indices, n):
    name = f"adaptive_max_pool{n}d"
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got: {_sizes(input.shape)}")
    for axis in range(input.dim() - n - 1, input.dim()):
        if input.shape[axis] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {_sizes(input.shape)} with dimension {axis} being empty")
    sizes = (output_size,) * n if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != n:
        raise RuntimeError(f"{name}(): internal error: output_size.size() must be {n}")
    spatial = input.shape[-n:]
    sizes = tuple(int(m) if m is not None else size for m, size in zip(sizes, spatial))
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{name}" not implemented for \'{dtypes.torch_name(input.dtype).capitalize()}\'')
    tables = []
    for i, (size, out) in enumerate(zip(spatial, sizes)):
        table = _window_table(size, out)  # (out, K), its axes placed at i and n + i
        shape = [1] * (2 * n)
        shape[i], shape[n + i] = table.shape
        tables.append(Tensor(leaf(table.reshape(shape), dtypes.int64)))
    output = apply(ADAPTIVE_MAX_POOL, input, *tables, attrs=(sizes,))
    if not return_indices:
        return output
    return output, apply(ADAPTIVE_MAX_POOL_INDICES, input, plane_positions(spatial), *tables, attrs=(sizes,))


@ADAPTIVE_MAX_POOL.publish(Names(functional=("adaptive_max_pool2d",)))
def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, output_size, return_indices, 2)


@ADAPTIVE_MAX_POOL.publish(Names(functional=("adaptive_max_pool3d",)))
def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, output_size, return_indices, 3)


@ADAPTIVE_MAX_POOL.publish(Names(functional=("adaptive_max_pool1d",)))
def adaptive_max_pool1d(input, output_size, return_indices=False):
    _check_rank_1d(input, "adaptive_max_pool1d")
    size = _one(output_size, "adaptive_max_pool1d", "output_size", _ONE_INT)
    result = adaptive_max_pool2d(input.unsqueeze(-2), (1, size), return_indices)
    return tuple(r.squeeze(-2) for r in result) if return_indices else result.squeeze(-2)


# ------------------------------------------------------------------------------ modules


class _MaxPoolNd(Module):
    function = None  # the functional form

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation, self.return_indices, self.ceil_mode = padding, dilation, return_indices, ceil_mode

    def forward(self, input):
        return type(self).function(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                                   self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    function = max_pool1d


class MaxPool2d(_MaxPoolNd):
    function = max_pool2d


class MaxPool3d(_MaxPoolNd):
    function = max_pool3d


class _AvgPoolNd(Module):
    function = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return type(self).function(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                   self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """PyTorch's keeps its sizes as 1-tuples (so its repr shows them so) and has no divisor."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__(_single(kernel_size), _single(stride if stride is not None else kernel_size),
                         _single(padding), ceil_mode, count_include_pad)

    def forward(self, input):
        return avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    function = avg_pool2d


class AvgPool3d(_AvgPoolNd):
    function = avg_pool3d


def _single(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class _AdaptivePoolNd(Module):
    function = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self).function(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    function = adaptive_avg_pool1d


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    function = adaptive_avg_pool2d


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    function = adaptive_avg_pool3d


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return type(self).function(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    function = adaptive_max_pool1d


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    function = adaptive_max_pool2d


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    function = adaptive_max_pool3d
