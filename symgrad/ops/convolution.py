"""Convolutions and pooling: ``F.conv1d/2d/3d``, ``F.max_pool2d/3d``, ``F.avg_pool2d/3d`` and
``F.adaptive_avg_pool2d/3d``, each one node whose IR is a head of symgrad.ir.linalg (a convolution, or
a window's patches), so its VJP is symbolic: transposed convolutions, and folds of the patches.

The checks are PyTorch's, with its wording, made when the call is recorded.
"""
from __future__ import annotations

import functools
import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.grad_mode import is_grad_enabled, no_grad
from symgrad import ir
from symgrad.ir import functions as F
from symgrad.ir import ieee
from symgrad.ir.linalg import ArgmaxMask, Conv, Pad, Patches, WindowMax, conv_output_size, dilated, emit
from symgrad.nodes import leaf
from symgrad.ops.reductions import mean_over
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply


def _tuple(value, n: int, name: str) -> tuple:
    """An int or a sequence of n ints (or of one, repeated), as PyTorch's ``stride=``, ``padding=``..."""
    values = (value,) * n if isinstance(value, int) else tuple(value)
    if len(values) == 1:
        values *= n
    if len(values) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match the "
                           f"convolution dimensions, but got {name}={list(values)}")
    return tuple(int(v) for v in values)


def _sizes(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


# --------------------------------------------------------------------------- convolution


def _infer_conv(nodes, stride, padding, dilation, groups):
    x, w, *bias = nodes
    if x.dtype is not w.dtype:
        raise ValueError(f"expected scalar type {dtypes.torch_name(x.dtype).capitalize()} but found "
                         f"{dtypes.torch_name(w.dtype).capitalize()}")
    if bias and bias[0].dtype is not x.dtype:
        raise ValueError(f"Input type ({dtypes.torch_name(x.dtype)}) and bias type "
                         f"({dtypes.torch_name(bias[0].dtype)}) should be the same")
    if not x.dtype.is_floating_point:
        raise ValueError(f'"slow_conv2d_cpu" not implemented for \'{dtypes.torch_name(x.dtype).capitalize()}\'')
    if len(w.shape) != len(x.shape):
        raise ValueError(f"weight should have at least three dimensions; expected a {len(x.shape)}-D weight for "
                         f"input of size {_sizes(x.shape)}, but got weight of size {_sizes(w.shape)} instead")
    if w.shape[0] % groups:
        raise ValueError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                         f"got weight of size [{_sizes(w.shape)}] instead")
    if x.shape[1] != w.shape[1] * groups:
        raise ValueError(f"Given groups={groups}, weight of size {_sizes(w.shape)}, expected input{_sizes(x.shape)} "
                         f"to have {w.shape[1] * groups} channels, but got {x.shape[1]} channels instead")
    if bias and bias[0].shape != (w.shape[0],):
        raise ValueError(f"Given weight of size {_sizes(w.shape)}, expected bias to be 1-dimensional with "
                         f"{w.shape[0]} elements, but got bias of size {_sizes(bias[0].shape)} instead")
    spatial, window = x.shape[2:], w.shape[2:]
    padded = [n + lo + hi for n, (lo, hi) in zip(spatial, padding)]
    if any(dilated(k, d) > n for n, k, d in zip(padded, window, dilation)):
        raise ValueError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
                         f"({' x '.join(str(dilated(k, d)) for k, d in zip(window, dilation))}). Kernel size can't "
                         "be greater than actual input size")
    out = tuple(conv_output_size(n, k, s, pad, 1, d) for n, k, s, pad, d in zip(spatial, window, stride, padding,
                                                                                 dilation))
    return (x.shape[0], w.shape[0], *out), x.dtype


def _build_conv(p, node, x, w, *bias):
    stride, padding, dilation, groups = node.attrs
    tup = lambda values: sp.Tuple(*(sp.Tuple(*v) if isinstance(v, tuple) else v for v in values))  # noqa: E731
    if any(lo or hi for lo, hi in padding):  # zeros that meet the kernel, as PyTorch's: XLA's own padding
        # skips them, and an inf in the kernel gave numbers where PyTorch's convolution has NaN
        x = emit(p, Pad, x, sp.S.Zero, tup(((0, 0), (0, 0), *padding)), hint="padded")
        padding = tuple((0, 0) for _ in padding)
    out = emit(p, Conv, x, w, tup(stride), tup(padding), tup((1,) * len(stride)), tup(dilation), sp.Integer(groups),
               sp.Integer(1), hint="conv")
    if not bias:
        return out
    b = p.reshape(bias[0], (node.shape[1],) + (1,) * len(stride))
    return p.assign(out + b, node.shape, node.dtype.name, "conv_bias")


def _reference_conv(x, w, *rest):
    *bias, stride, padding, dilation, groups = rest
    out = jax.lax.conv_general_dilated(x, w, stride, padding, rhs_dilation=dilation, feature_group_count=groups,
                                       precision=jax.lax.Precision.HIGHEST)
    return out + bias[0].reshape((-1,) + (1,) * len(stride)) if bias else out


def _torch_conv(t, x, w, *rest):
    *bias, stride, padding, dilation, groups = rest
    conv = (t.nn.functional.conv1d, t.nn.functional.conv2d, t.nn.functional.conv3d)[len(stride) - 1]
    bias = bias[0] if bias else None
    if any(lo != hi for lo, hi in padding):  # 'same' with an even window: PyTorch pads the input itself
        return conv(x, w, bias, stride, "same", dilation, groups)
    return conv(x, w, bias, stride, tuple(lo for lo, _ in padding), dilation, groups)


def _conv_op(name, with_bias):
    examples = (Example(((2, 3, 6, 5), (4, 3, 3, 2)), ((1, 1), ((0, 0), (0, 0)), (1, 1), 1)),
                Example(((1, 4, 7, 6), (6, 2, 3, 3)), ((2, 1), ((1, 1), (2, 2)), (1, 2), 2)),
                Example(((1, 2, 5, 5), (2, 2, 2, 2)), ((1, 1), ((0, 1), (0, 1)), (1, 1), 1)),
                Example(((2, 2, 9), (4, 1, 3)), ((2,), ((1, 1),), (2,), 2)),
                Example(((1, 3, 8), (2, 3, 4)), ((3,), ((0, 0),), (1,), 1)),
                Example(((1, 2, 3, 4, 3), (2, 1, 2, 2, 1)), ((1, 2, 1), ((1, 1), (0, 0), (1, 1)), (1, 1, 2), 2)))
    if with_bias:
        examples = tuple(Example((*e.shapes, (e.shapes[1][0],)), e.attrs) for e in examples)
    return register(Op(name, "ConvolutionBackward0", _infer_conv, _build_conv, reference=_reference_conv,
                       torch_fn=_torch_conv, examples=examples))


CONV = _conv_op("convolution", with_bias=False)
CONV_BIAS = _conv_op("convolution_bias", with_bias=True)


def _conv_padding(padding, window, dilation, stride, n):
    """PyTorch's ``padding=``: an int or ints (both sides), 'valid' (none) or 'same' (the output
    as large as the input: the extra one of an odd total on the high side)."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for k, d in zip(window, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)
    pads = _tuple(padding, n, "padding")
    if any(v < 0 for v in pads):
        raise RuntimeError("negative padding is not supported")
    return tuple((v, v) for v in pads)


def _convolution(n, input, weight, bias, stride, padding, dilation, groups):
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to conv{n}d, but got input "
                           f"of size: {_sizes(input.shape)}")
    if input.ndim == n + 1:  # unbatched: PyTorch adds the batch axis and squeezes it away
        return _convolution(n, input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    stride, dilation = _tuple(stride, n, "stride"), _tuple(dilation, n, "dilation")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    padding = _conv_padding(padding, tuple(weight.shape[2:]), dilation, stride, n)
    attrs = (stride, padding, dilation, int(groups))
    if bias is None:
        return apply(CONV, input, weight, attrs=attrs)
    return apply(CONV_BIAS, input, weight, bias, attrs=attrs)


@CONV.publish(Names(function=("conv1d",), functional=("conv1d",)))
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convolution(1, input, weight, bias, stride, padding, dilation, groups)


@CONV.publish(Names(function=("conv2d",), functional=("conv2d",)))
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convolution(2, input, weight, bias, stride, padding, dilation, groups)


@CONV.publish(Names(function=("conv3d",), functional=("conv3d",)))
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convolution(3, input, weight, bias, stride, padding, dilation, groups)


# ------------------------------------------------------------------------------ pooling

_AXES = {2: ("H", "W"), 3: ("T", "H", "W")}


def _labelled(prefix, values):
    """PyTorch's pool messages name each axis: 'dH: 2 dW: 1', 'dilationT: 0 ...'."""
    return " ".join(f"{prefix}{a}: {v}" for a, v in zip(_AXES[len(values)], values))


def _pool_tuple(value, n: int, name: str, what: str) -> tuple:
    values = (value,) * n if isinstance(value, int) else tuple(value)
    if len(values) == 1:
        values *= n
    if len(values) != n:
        raise RuntimeError(f"{name}: {what} must either be a single int, or a tuple of {('two', 'three')[n - 2]} ints")
    return tuple(int(v) for v in values)


def _pool_arguments(name, input, kernel_size, stride, padding, dilation):
    """PyTorch's n-D pool arguments as n-tuples (the stride is the kernel's by default), checked
    in PyTorch's order; ``name`` ('max_pool2d', 'avg_pool3d') says n."""
    n = int(name[-2])
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"non-empty {n + 1}D or {n + 2}D (batch mode) tensor expected for input, but got "
                           f"{_sizes(input.shape)}")
    kernel = _pool_tuple(kernel_size, n, name, "kernel_size")
    no_stride = stride is None or (not isinstance(stride, int) and not len(stride))
    stride = kernel if no_stride else _pool_tuple(stride, n, name, "stride")
    padding, dilation = _pool_tuple(padding, n, name, "padding"), _pool_tuple(dilation, n, name, "dilation")
    if 0 in stride:
        raise RuntimeError("stride should not be zero")
    for values, label, what in ((kernel, "k", "kernel size"), (stride, "d", "stride"),
                                (dilation, "dilation", "dilation")):
        if min(values) <= 0:
            raise RuntimeError(f"{what} should be greater than zero, but got {_labelled(label, values)}")
    for k, p, d in zip(kernel, padding, dilation):
        if p > k // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    return kernel, stride, padding, dilation


def _pool_geometry(spatial, kernel, stride, padding, dilation, ceil_mode):
    """The output size and the (lo, hi) padding the windows read, hi extended in ceil mode (a
    window must start inside the input or its left padding), as PyTorch's pooling_output_shape."""
    out, pads = [], []
    for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation):
        span = n + 2 * p - dilated(k, d)
        size = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (size - 1) * s >= n + p:
            size -= 1
        out.append(size)
        pads.append((p, max((size - 1) * s + dilated(k, d) - n - p, 0)))
    return tuple(out), tuple(pads)


def _infer_max_pool(nodes, kernel, stride, padding, dilation, ceil_mode):
    return _infer_pool(f"max_pool{len(kernel)}d", nodes, kernel, stride, padding, dilation, ceil_mode)


def _infer_avg_pool(nodes, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    n = len(kernel)
    spatial = nodes[0].shape[-n:]
    if n == 3 and any(k > size for k, size in zip(kernel, spatial)):  # avg_pool3d's own check
        raise ValueError(f"input image ({_labelled('', spatial)}) smaller than kernel size "
                         f"({_labelled('k', kernel)})")
    return _infer_pool(f"avg_pool{n}d", nodes, kernel, stride, padding, (1,) * n, ceil_mode)


def _infer_pool(name, nodes, kernel, stride, padding, dilation, ceil_mode):
    (x,) = nodes
    n = len(kernel)
    _refuse_pool_dtype(name, x.dtype)
    out, _ = _pool_geometry(x.shape[-n:], kernel, stride, padding, dilation, ceil_mode)
    if min(out) < 1:
        raise ValueError(f"Given input size: ({'x'.join(map(str, x.shape[-n - 1:]))}). Calculated output size: "
                         f"({x.shape[-n - 1]}x{'x'.join(map(str, out))}). Output size is too small")
    return (*x.shape[:-n], *out), x.dtype


def _refuse_pool_dtype(name, dtype) -> None:
    """PyTorch's CPU kernels: max pools take every number type, average pools floats and int64 (which
    they divide truncating)."""
    if dtype.is_floating_point or (dtype is not dtypes.bool_ if name.startswith("max") else dtype is dtypes.int64):
        return
    kernel = "avg_pool3d_out_frame" if name == "avg_pool3d" else name
    raise NotImplementedError(f'"{kernel}" not implemented for \'{dtypes.torch_name(dtype).capitalize()}\'')


def _lowest(dtype):
    """What a max pool pads with: below every value of ``dtype``."""
    return sp.S.NegativeInfinity if dtype.is_floating_point else sp.Integer(int(np.iinfo(dtype.numpy).min))


def _patches(p, x, spatial, kernel, stride, padding, dilation, ceil_mode, value):
    """x's windows: (*lead, K, *out), the padding filled with ``value``."""
    _, pads = _pool_geometry(spatial, kernel, stride, padding, dilation, ceil_mode)
    window = (sp.Tuple(*kernel), sp.Tuple(*stride), sp.Tuple(*dilation), sp.Tuple(*(sp.Tuple(*q) for q in pads)))
    return emit(p, Patches, x, *window, value, sp.Tuple(*spatial), hint="windows")


def _build_max_pool(p, node, x):
    x_node, n = node.inputs[0], len(node.attrs[0])
    patches = _patches(p, x, x_node.shape[-n:], *node.attrs, _lowest(x_node.dtype))
    return emit(p, WindowMax, patches, sp.Integer(len(x_node.shape) - n), hint="max_pool")


def _reference_max_pool(x, kernel, stride, padding, dilation, ceil_mode):
    """The max over strided slices of the padded input (JAX has no VJP for dilated max windows)."""
    n = len(kernel)
    out, pads = _pool_geometry(x.shape[-n:], kernel, stride, padding, dilation, ceil_mode)
    padded = jnp.pad(x, [(0, 0)] * (x.ndim - n) + list(pads), constant_values=-jnp.inf)
    views = [padded[(..., *(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in
                            zip(offset, dilation, stride, out)))]
             for offset in itertools.product(*(range(k) for k in kernel))]
    return jnp.max(jnp.stack(views), axis=0)


_POOL_EXAMPLES = (((2, 3, 6, 5), (2, 2), (2, 2), (0, 0)), ((1, 2, 7, 7), (3, 3), (2, 2), (1, 1)),
                  ((2, 5, 6), (3, 2), (2, 1), (1, 0)), ((1, 1, 7, 8), (2, 3), (3, 2), (1, 1)),
                  ((1, 2, 4, 3, 5), (2, 1, 3), (2, 1, 2), (1, 0, 1)))

MAX_POOL = register(Op(
    "max_pool2d", lambda nodes, kernel, *rest: f"MaxPool{len(kernel)}DWithIndicesBackward0", _infer_max_pool,
    _build_max_pool, reference=_reference_max_pool,
    torch_fn=lambda t, x, kernel, stride, padding, dilation, ceil_mode: (
        t.nn.functional.max_pool2d, t.nn.functional.max_pool3d)[len(kernel) - 2](
        x, kernel, stride, padding, dilation, ceil_mode=ceil_mode),
    examples=(*(Example((shape,), (k, s, pad, (1,) * len(k), ceil)) for (shape, k, s, pad), ceil
                in zip(_POOL_EXAMPLES, (False, False, True, True, True))),
              Example(((1, 2, 7, 6),), ((2, 2), (1, 2), (1, 0), (2, 1), False)))))


def _build_max_pool_indices(p, node, x, positions):
    """Where each max-pool window's pick sits in its plane (``h * W + w``): the one-hot of the pick
    (ir.linalg.ArgmaxMask, the rule of the gradient) selecting from the windows of the positions."""
    x_node, n = node.inputs[0], len(node.attrs[0])
    axis = sp.Integer(len(x_node.shape) - n)
    picked = emit(p, ArgmaxMask, _patches(p, x, x_node.shape[-n:], *node.attrs, _lowest(x_node.dtype)), axis,
                  hint="picked")
    windows = _patches(p, positions, x_node.shape[-n:], *node.attrs, sp.S.Zero)
    return picked_positions(p, picked, windows, int(axis))


def picked_positions(p, picked, windows, axis: int):
    """The positions (``windows``) where the one-hot ``picked`` is 1, along ``axis``."""
    chosen = p.assign(ir.select(ir.greater(picked, 0), windows, 0), p.shape_of(picked), "int64", "chosen")
    return p.reduce_sum(chosen, (axis,), False)


def plane_positions(spatial) -> Tensor:
    """Each entry's flat position in its plane (int64), the indices PyTorch's max pools return."""
    return Tensor(leaf(jnp.arange(int(np.prod(spatial)), dtype=jnp.int64).reshape(spatial), dtypes.int64))


MAX_POOL_INDICES = register(Op("max_pool2d_indices", None,
                               lambda nodes, *attrs: (_infer_max_pool(nodes[:1], *attrs)[0], dtypes.int64),
                               _build_max_pool_indices, saves=False))


def _max_pool(name, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    """With ``return_indices``, also each pick's position in its input plane (int64, as PyTorch's)."""
    kernel, stride, padding, dilation = _pool_arguments(name, input, kernel_size, stride, padding, dilation)
    attrs = (kernel, stride, padding, dilation, bool(ceil_mode))
    output = apply(MAX_POOL, input, attrs=attrs)
    if not return_indices:
        return output
    positions = plane_positions(input.shape[-len(kernel):])
    return output, apply(MAX_POOL_INDICES, input, positions, attrs=attrs)


@MAX_POOL.publish(Names(function=("max_pool2d",), functional=("max_pool2d",)))
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@MAX_POOL.publish(Names(functional=("max_pool2d_with_indices",)))
def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, True)


@MAX_POOL.publish(Names(function=("max_pool3d",), functional=("max_pool3d",)))
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool("max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@MAX_POOL.publish(Names(functional=("max_pool3d_with_indices",)))
def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return _max_pool("max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _divisor(spatial, kernel, stride, padding, ceil_mode, count_include_pad):
    """How many entries each window of an average pool divides by: PyTorch's pool_size (the window
    cut at the padding's end) or, without ``count_include_pad``, the input entries it covers."""
    out, _ = _pool_geometry(spatial, kernel, stride, padding, (1,) * len(kernel), ceil_mode)
    counts = []
    for n, k, s, p, o in zip(spatial, kernel, stride, padding, out):
        starts = np.arange(o) * s - p
        ends = np.minimum(starts + k, n + p)
        counts.append(ends - starts if count_include_pad else np.minimum(ends, n) - np.maximum(starts, 0))
    return functools.reduce(np.multiply.outer, counts)


def _build_avg_pool(p, node, x):
    kernel, stride, padding, ceil_mode, count_include_pad, divisor_override = node.attrs
    x_node, dtype, n = node.inputs[0], node.dtype.name, len(kernel)
    spatial, ones = x_node.shape[-n:], (1,) * n
    patches = _patches(p, x, spatial, kernel, stride, padding, ones, ceil_mode, sp.S.Zero)
    total = p.reduce_sum(patches, (len(x_node.shape) - n,), False)
    quotient = (lambda a, b: a / b) if node.dtype.is_floating_point else partial(ieee.unevaluated, F.trunc_divide)
    if divisor_override:
        return p.assign(quotient(total, divisor_override), node.shape, dtype, "avg_pool")
    counts = _divisor(spatial, kernel, stride, padding, ceil_mode, count_include_pad)
    if np.all(counts == counts.flat[0]):
        return p.assign(quotient(total, sp.Integer(int(counts.flat[0]))), node.shape, dtype, "avg_pool")
    # windows of several sizes: count them as windows of ones (the padding counted, or not)
    area = tuple(m + 2 * q for m, q in zip(spatial, padding)) if count_include_pad else spatial
    covered = _patches(p, p.materialize(sp.S.One, area, dtype), area, kernel, stride,
                       (0,) * n if count_include_pad else padding, ones, ceil_mode, sp.S.Zero)
    count = p.reduce_sum(covered, (0,), False)
    return p.assign(quotient(total, count), node.shape, dtype, "avg_pool")


def _reference_avg_pool(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    n = len(kernel)
    _, pads = _pool_geometry(x.shape[-n:], kernel, stride, padding, (1,) * n, ceil_mode)
    lead = (1,) * (x.ndim - n)
    padded = jnp.pad(x, [(0, 0)] * (x.ndim - n) + list(pads))
    total = jax.lax.reduce_window(padded, 0.0, jax.lax.add, lead + kernel, lead + stride, "VALID")
    if divisor_override:
        return total / divisor_override
    return total / _divisor(x.shape[-n:], kernel, stride, padding, ceil_mode, count_include_pad)


AVG_POOL = register(Op(
    "avg_pool2d", lambda nodes, kernel, *rest: f"AvgPool{len(kernel)}DBackward0", _infer_avg_pool, _build_avg_pool,
    reference=_reference_avg_pool,
    torch_fn=lambda t, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override: (
        t.nn.functional.avg_pool2d, t.nn.functional.avg_pool3d)[len(kernel) - 2](
        x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override),
    examples=(*(Example((shape,), (k, s, pad, ceil, include, None)) for (shape, k, s, pad), ceil, include
                in zip(_POOL_EXAMPLES, (False, False, True, True, True), (True, False, True, False, False))),
              Example(((1, 2, 5, 5),), ((3, 3), (2, 2), (1, 1), False, True, 4)))))


def _avg_pool(name, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    kernel, stride, padding, _ = _pool_arguments(name, input, kernel_size, stride, padding, 1)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    return apply(AVG_POOL, input, attrs=(kernel, stride, padding, bool(ceil_mode), bool(count_include_pad),
                                         None if divisor_override is None else int(divisor_override)))


@AVG_POOL.publish(Names(function=("avg_pool2d",), functional=("avg_pool2d",)))
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool("avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


@AVG_POOL.publish(Names(functional=("avg_pool3d",)))
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool("avg_pool3d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def adaptive_windows(n: int, out: int):
    """PyTorch's adaptive windows along one axis: [floor(i n / out), ceil((i + 1) n / out))."""
    return [(i * n // out, -(-(i + 1) * n // out)) for i in range(out)]


def _infer_adaptive(nodes, output_size):
    (x,) = nodes
    n = len(output_size)
    if len(x.shape) not in (n + 1, n + 2) or not all(x.shape[-n - 1:]):
        raise ValueError(f"adaptive_avg_pool{n}d(): Expected {n + 1}D or {n + 2}D tensor, but got {_sizes(x.shape)}")
    return (*x.shape[:-n], *output_size), x.dtype


def _build_adaptive(p, node, x):
    """Each axis in turn: the mean of each window, the windows joined (a window average is the
    mean over rows of the means over columns)."""
    dtype, shape, sizes = node.dtype.name, node.inputs[0].shape, node.attrs[0]
    for axis, out in zip(range(len(shape) - len(sizes), len(shape)), sizes):
        means = []
        for start, end in adaptive_windows(shape[axis], out):
            spec = [(1, 0, n, 1) for n in shape]
            spec[axis] = (1, start, end, 1)
            window = p.index(x, spec)
            total = p.reduce_sum(window, (axis,), True)
            means.append(p.assign(total / (end - start), p.shape_of(total), dtype, "window_mean"))
        shape = shape[:axis] + (out,) + shape[axis + 1:]
        x = means[0] if out == 1 else p.concatenate(means, axis, shape, dtype)
    return x


def _reference_adaptive(x, output_size):
    for axis, out in zip(range(x.ndim - len(output_size), x.ndim), output_size):
        x = jnp.concatenate([jnp.mean(jax.lax.slice_in_dim(x, a, b, axis=axis), axis=axis, keepdims=True)
                             for a, b in adaptive_windows(x.shape[axis], out)], axis=axis)
    return x


ADAPTIVE_AVG_POOL = register(Op(
    "adaptive_avg_pool2d",  # PyTorch's mean where every window is the whole input
    lambda nodes, size: "MeanBackward1" if set(size) == {1} else f"AdaptiveAvgPool{len(size)}DBackward0",
    _infer_adaptive, _build_adaptive,
    reference=_reference_adaptive,
    torch_fn=lambda t, x, output_size: (t.nn.functional.adaptive_avg_pool2d, t.nn.functional.adaptive_avg_pool3d)[
        len(output_size) - 2](x, output_size),
    examples=(Example(((2, 3, 6, 4),), ((3, 2),)), Example(((1, 2, 7, 5),), ((3, 4),)),
              Example(((2, 5, 5),), ((1, 1),)), Example(((1, 1, 3, 4),), ((5, 4),)),
              Example(((1, 2, 3, 5, 4),), ((2, 3, 4),)))))


def _adaptive_avg_pool(input, output_size, n):
    sizes = (output_size,) * n if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != n:
        raise RuntimeError(f"adaptive_avg_pool{n}d: output_size must be {n}")
    sizes = tuple(int(m) if m is not None else input.shape[-n + i] for i, m in enumerate(sizes))
    return apply(ADAPTIVE_AVG_POOL, input, attrs=(sizes,))


@ADAPTIVE_AVG_POOL.publish(Names(function=("adaptive_avg_pool2d",), functional=("adaptive_avg_pool2d",)))
def adaptive_avg_pool2d(input, output_size):
    return _adaptive_avg_pool(input, output_size, 2)


@ADAPTIVE_AVG_POOL.publish(Names(functional=("adaptive_avg_pool3d",)))
def adaptive_avg_pool3d(input, output_size):
    return _adaptive_avg_pool(input, output_size, 3)


# ------------------------------------------------------------------------ normalization


def _standardized(p, x, axes, eps, dtype):
    """(x - mean) / sqrt(var + eps) over ``axes``, with the biased variance, as PyTorch normalizes."""
    shape = p.shape_of(x)
    count = int(np.prod([shape[a] for a in axes]))
    mean = mean_over(p, x, axes, count, corrected=True)  # a constant row's mean is its value, as PyTorch's
    centered = p.assign(x - mean, shape, dtype, "centered")
    variance = p.assign(p.reduce_sum(p.assign(centered ** 2, shape, dtype, "squared"), axes, True) / count,
                        _kept(shape, axes), dtype, "variance")
    return p.assign(centered * (variance + eps) ** sp.Rational(-1, 2), shape, dtype, "normalized")


def _kept(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _affine(p, node, y, params, layout):
    """y * weight + bias, each present as the node's attributes say, laid out as ``layout``."""
    has_weight, has_bias = node.attrs[-2:]
    params = list(params)
    if has_weight:
        y = p.assign(y * p.reshape(params.pop(0), layout), node.shape, node.dtype.name, "scaled")
    if has_bias:
        y = p.assign(y + p.reshape(params.pop(0), layout), node.shape, node.dtype.name, "shifted")
    return y


def _check_float(name, *nodes):
    for n in nodes:
        if not n.dtype.is_floating_point:
            raise NotImplementedError(f'"{name}" not implemented for \'{dtypes.torch_name(n.dtype).capitalize()}\'')
        if n.dtype is not nodes[0].dtype:
            raise ValueError(f"expected scalar type {dtypes.torch_name(nodes[0].dtype).capitalize()} but found "
                             f"{dtypes.torch_name(n.dtype).capitalize()}")


def _infer_layer_norm(nodes, normalized_shape, eps, has_weight, has_bias):
    x, *params = nodes
    _check_float("LayerNormKernelImpl", x, *params)
    n = len(normalized_shape)
    if x.shape[len(x.shape) - n:] != normalized_shape or len(x.shape) < n:
        raise ValueError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                         f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{_sizes(x.shape)}")
    for param in params:
        if param.shape != normalized_shape:
            raise ValueError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                             f"{_sizes(param.shape)} and normalized_shape = {_sizes(normalized_shape)}")
    return x.shape, x.dtype


def _build_layer_norm(p, node, x, *params):
    normalized_shape, eps = node.attrs[:2]
    rank = len(node.shape)
    y = _standardized(p, x, tuple(range(rank - len(normalized_shape), rank)), eps, node.dtype.name)
    return _affine(p, node, y, params, normalized_shape)


def _reference_layer_norm(x, *rest):
    *params, normalized_shape, eps, has_weight, has_bias = rest
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    y = (x - x.mean(axes, keepdims=True)) / jnp.sqrt(x.var(axes, keepdims=True) + eps)
    return _reference_affine(y, params, has_weight, has_bias, normalized_shape)


def _reference_affine(y, params, has_weight, has_bias, layout):
    params = list(params)
    if has_weight:
        y = y * params.pop(0).reshape(layout)
    return y + params.pop(0).reshape(layout) if has_bias else y


def _torch_params(params, has_weight, has_bias):
    params = list(params)
    return (params.pop(0) if has_weight else None), (params.pop(0) if has_bias else None)


LAYER_NORM = register(Op(
    "layer_norm", "NativeLayerNormBackward0", _infer_layer_norm, _build_layer_norm, reference=_reference_layer_norm,
    torch_fn=lambda t, x, *rest: t.nn.functional.layer_norm(x, rest[-4], *_torch_params(rest[:-4], *rest[-2:]),
                                                             eps=rest[-3]),
    examples=(Example(((3, 5),), ((5,), 1e-5, False, False)), Example(((2, 3, 4), (3, 4), (3, 4)), ((3, 4), 1e-5, True, True)),
              Example(((4, 6), (6,)), ((6,), 0.1, True, False)), Example(((2, 6), (6,)), ((6,), 1e-5, False, True)))))


@LAYER_NORM.publish(Names(function=("layer_norm",), functional=("layer_norm",)))
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    params = [t for t in (weight, bias) if t is not None]
    return apply(LAYER_NORM, input, *params, attrs=(tuple(int(n) for n in normalized_shape), float(eps),
                                                      weight is not None, bias is not None))


def _infer_group_norm(nodes, groups, eps, has_weight, has_bias):
    x, *params = nodes
    _check_float("GroupNormKernelImpl", x, *params)
    if len(x.shape) < 2:
        raise ValueError(f"Expected at least 2 dimensions for input tensor but received {len(x.shape)}")
    if x.shape[1] % groups:
        raise ValueError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                         f"shape {_sizes(x.shape)} and num_groups={groups}")
    for param in params:
        if param.shape != (x.shape[1],):
            raise ValueError(f"Expected weight to be a vector of size equal to the number of channels in input, "
                             f"but got weight of shape {_sizes(param.shape)} and input of shape {_sizes(x.shape)}")
    return x.shape, x.dtype


def _build_group_norm(p, node, x, *params):
    groups, eps = node.attrs[:2]
    shape = node.shape
    grouped = p.reshape(x, (shape[0], groups, int(np.prod(shape[1:])) // groups))
    y = p.reshape(_standardized(p, grouped, (2,), eps, node.dtype.name), shape)
    return _affine(p, node, y, params, (shape[1],) + (1,) * (len(shape) - 2))


def _reference_group_norm(x, *rest):
    *params, groups, eps, has_weight, has_bias = rest
    g = x.reshape(x.shape[0], groups, -1)
    y = ((g - g.mean(2, keepdims=True)) / jnp.sqrt(g.var(2, keepdims=True) + eps)).reshape(x.shape)
    return _reference_affine(y, params, has_weight, has_bias, (x.shape[1],) + (1,) * (x.ndim - 2))


GROUP_NORM = register(Op(
    "group_norm", "NativeGroupNormBackward0", _infer_group_norm, _build_group_norm, reference=_reference_group_norm,
    torch_fn=lambda t, x, *rest: t.nn.functional.group_norm(x, rest[-4], *_torch_params(rest[:-4], *rest[-2:]),
                                                             eps=rest[-3]),
    examples=(Example(((2, 4, 3),), (2, 1e-5, False, False)), Example(((2, 6, 2, 2), (6,), (6,)), (3, 1e-5, True, True)),
              Example(((3, 4), (4,)), (1, 0.01, True, False)))))


@GROUP_NORM.publish(Names(function=("group_norm",), functional=("group_norm",)))
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    params = [t for t in (weight, bias) if t is not None]
    return apply(GROUP_NORM, input, *params, attrs=(int(num_groups), float(eps), weight is not None,
                                                      bias is not None))


def _infer_batch_norm(nodes, training, eps, has_weight, has_bias):
    x, *rest = nodes
    _check_float("batch_norm", x, *rest)
    if len(x.shape) < 2:
        raise ValueError(f"batch_norm: expected a 2D or more input, got input of size {_sizes(x.shape)}")
    return x.shape, x.dtype


def _build_batch_norm(p, node, x, *rest):
    """Training: the batch's statistics; eval: the running ones (inputs of their own)."""
    training, eps = node.attrs[:2]
    shape, dtype = node.shape, node.dtype.name
    layout = (shape[1],) + (1,) * (len(shape) - 2)
    if training:
        y = _standardized(p, x, (0, *range(2, len(shape))), eps, dtype)
        return _affine(p, node, y, rest, layout)
    mean, variance, *params = rest  # PyTorch's running statistics get no gradient
    mean, variance = (p.reshape(p.stop_gradient(v), layout) for v in (mean, variance))
    y = p.assign((x - mean) * (variance + eps) ** sp.Rational(-1, 2), shape, dtype, "normalized")
    return _affine(p, node, y, params, layout)


def _reference_batch_norm(x, *rest):
    *inputs, training, eps, has_weight, has_bias = rest
    layout = (x.shape[1],) + (1,) * (x.ndim - 2)
    if training:
        axes = (0, *range(2, x.ndim))
        mean, variance = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    else:
        mean, variance, *inputs = inputs
        mean, variance = mean.reshape(layout), variance.reshape(layout)
    return _reference_affine((x - mean) / jnp.sqrt(variance + eps), inputs, has_weight, has_bias, layout)


def _torch_batch_norm(t, x, *rest):
    *inputs, training, eps, has_weight, has_bias = rest
    mean = variance = None
    if not training:
        mean, variance, *inputs = inputs
    return t.nn.functional.batch_norm(x, mean, variance, *_torch_params(inputs, has_weight, has_bias),
                                      training=training, eps=eps)


def _batch_norm_op(name, examples):
    return register(Op(name, "NativeBatchNormBackward0", _infer_batch_norm, _build_batch_norm,
                       reference=_reference_batch_norm, torch_fn=_torch_batch_norm, examples=examples))


BATCH_NORM = _batch_norm_op("batch_norm", (Example(((4, 3),), (True, 1e-5, False, False)),
                                           Example(((2, 3, 2, 2), (3,), (3,)), (True, 1e-5, True, True)),
                                           Example(((3, 2), (2,)), (True, 0.1, False, True))))
# No generic examples: the running statistics get no gradient, which finite differences would see
# (tests/test_nn_functional.py checks it against PyTorch).
BATCH_NORM_EVAL = _batch_norm_op("batch_norm_eval", ())


@BATCH_NORM.publish(Names(function=("batch_norm",), functional=("batch_norm",)))
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Training normalizes with the batch's statistics and then moves the running ones (given)
    toward them in place, the variance unbiased, as PyTorch does; eval uses the running ones."""
    params = [t for t in (weight, bias) if t is not None]
    flags = (float(eps), weight is not None, bias is not None)
    channels = input.shape[1] if input.ndim > 1 else 0  # PyTorch's count for a 0-d or 1-d input
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (channels,):
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    if training and input.numel() // input.size(1) <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
    for name, stats in (("running_mean", running_mean), ("running_var", running_var)):
        if stats is not None and stats.requires_grad and is_grad_enabled():
            raise RuntimeError(f"The function 'native_batch_norm' is not differentiable with respect to argument "
                               f"'{name}'. This input cannot have requires_grad True.")
    if not training:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        return apply(BATCH_NORM_EVAL, input, running_mean, running_var, *params, attrs=(False, *flags))
    out = apply(BATCH_NORM, input, *params, attrs=(True, *flags))
    if running_mean is not None or running_var is not None:
        _update_running_stats(input, running_mean, running_var, momentum)
    return out


def _update_running_stats(input, running_mean, running_var, momentum):
    axes = (0, *range(2, input.ndim))
    with no_grad():  # (no ``detach()``: under no_grad the statistics have no history, and a replayed step traces them)
        if running_mean is not None:
            running_mean.copy_(momentum * input.mean(axes) + (1 - momentum) * running_mean)
        if running_var is not None:
            running_var.copy_(momentum * input.var(axes, unbiased=True) + (1 - momentum) * running_var)
