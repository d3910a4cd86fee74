"""``F.conv_transpose1d/2d/3d`` and ``nn.ConvTranspose1d/2d/3d``: the transposed convolution, one
node built as PyTorch's CPU kernel computes it: each input entry times the kernel (an einsum over
the input channels of a group) gives every output entry it reaches, and a fold (ir.linalg.Fold,
PyTorch's col2im) adds them up where they land, the padding cut away.

Its VJP is then PyTorch's too: the fold's is the windows of the cotangent (im2col), the einsum's
two einsums.  So an Inf or NaN reaches the outputs and gradients PyTorch's reach: a weight meets
only real input entries going forward, and the cotangent's zero padding going back.  (XLA's
dilated convolution, the other natural form, multiplies the holes of a dilated kernel, and on CPU
its weight gradient was several times slower than the fold.)
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.ir.linalg import Einsum, Fold, Pad, dilated, emit
from symgrad.nn import functional as F
from symgrad.nn.convolution import _ConvNd
from symgrad.ops.convolution import _sizes, _tuple
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import apply

_AXES = {2: ("height", "width"), 3: ("depth", "height", "width")}


def _labelled(name, values):
    """PyTorch's kernel's wording of a per-axis value ('stride_height: 2 stride_width: 1'); a 1-D
    call runs PyTorch's 2-D kernel, so it reads with a height of its defaults."""
    return [f"{name}_{axis}: {v}" for axis, v in zip(_AXES[len(values)], values)]


def _infer(nodes, stride, padding, output_padding, dilation, groups):
    x, w, *bias = nodes
    if x.dtype is not w.dtype:
        raise ValueError(f"expected scalar type {dtypes.torch_name(x.dtype).capitalize()} but found "
                         f"{dtypes.torch_name(w.dtype).capitalize()}")
    if len(w.shape) != len(x.shape):
        raise ValueError(f"Expected {len(w.shape)}-dimensional input for {len(w.shape)}-dimensional weight "
                         f"{_sizes(w.shape)}, but got {len(x.shape)}-dimensional input of size {_sizes(x.shape)} "
                         "instead")
    if w.shape[0] < groups:
        raise ValueError(f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got "
                         f"weight of size {_sizes(w.shape)} instead")
    if w.shape[0] % groups:
        raise ValueError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                         f"got weight of size [{_sizes(w.shape)}] instead")
    if x.shape[1] != w.shape[0]:
        raise ValueError(f"Given transposed=1, weight of size {_sizes(w.shape)}, expected input{_sizes(x.shape)} "
                         f"to have {w.shape[0]} channels, but got {x.shape[1]} channels instead")
    out_channels = w.shape[1] * groups
    if bias and bias[0].shape != (out_channels,):
        raise ValueError(f"Given transposed=1, weight of size {_sizes(w.shape)}, expected bias to be 1-dimensional "
                         f"with {out_channels} elements, but got bias of size {_sizes(bias[0].shape)} instead")
    return (x.shape[0], out_channels, *_checked_sizes(x.shape[2:], w.shape[2:], stride, padding, output_padding,
                                                      dilation)), x.dtype


def _refuse_bias_dtype(dtype, bias_dtype, dims: int, groups: int) -> None:
    """A bias of another dtype, where PyTorch's CPU kernels refuse it: its oneDNN path (float32 in groups)
    and its 3-D kernel; its 1-D and 2-D kernels otherwise read it in the input's dtype, as symgrad does."""
    if dtype is dtypes.float32 and groups > 1:
        raise RuntimeError(f"Input type (torch.{dtypes.torch_name(dtype).capitalize()}Tensor) and bias type "
                           f"(torch.{dtypes.torch_name(bias_dtype).capitalize()}Tensor) should be the same or "
                           "input should be a MKLDNN tensor and bias is a dense tensor")
    if dims == 3:
        raise RuntimeError(f"expected scalar type {dtypes.torch_name(dtype).capitalize()} but found "
                           f"{dtypes.torch_name(bias_dtype).capitalize()}")


def _checked_sizes(spatial, window, stride, padding, output_padding, dilation):
    """The output's spatial sizes, after the checks PyTorch's kernel makes (with its wording)."""
    one = (1,) if len(spatial) == 1 else ()  # what PyTorch's 2-D kernel sees of a 1-D call
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        raise ValueError("output padding must be smaller than either stride or dilation, but got " + " ".join(
            _labelled("output_padding", (0,) * len(one) + output_padding) + _labelled("stride", one + stride)
            + _labelled("dilation", one + dilation)))
    if any(d == 0 for d in dilation):
        raise ValueError("dilation should be greater than zero, but got " + ", ".join(
            _labelled("dilation", one + dilation)))
    out = tuple((n - 1) * s - 2 * p + dilated(k, d) + o
                for n, k, s, p, o, d in zip(spatial, window, stride, padding, output_padding, dilation))
    if min(out) < 1:
        raise ValueError(f"Given input size per channel: ({' x '.join(map(str, one + tuple(spatial)))}). Calculated "
                         f"output size per channel: ({' x '.join(map(str, one + out))}). Output size is too small")
    return out


def _build(p, node, x, w, *bias):
    stride, padding, output_padding, dilation, groups = node.attrs
    (batch, channels, *spatial), (_, per_group, *window) = node.inputs[0].shape, node.inputs[1].shape
    rank, taps = len(spatial), int(np.prod(window))
    # every (output channel, kernel tap) an input entry reaches: (N, G, O/G, K, *spatial)
    x = p.reshape(x, (batch, groups, channels // groups, *spatial))
    w = p.reshape(w, (groups, channels // groups, per_group, taps))
    b_, g_, i_, o_, k_, *s_ = range(5 + rank)  # einsum labels: batch, group, in, out, tap, spatial
    labels = sp.Tuple(sp.Tuple(b_, g_, i_, *s_), sp.Tuple(g_, i_, o_, k_))
    reached = emit(p, Einsum, x, w, labels, sp.Tuple(b_, g_, o_, k_, *s_), hint="reached")
    reached = p.reshape(reached, (batch, groups * per_group, taps, *spatial))
    # added where they land; an output padding beyond the cut padding is zeros (PyTorch's too)
    kept = [min(q, o) for q, o in zip(padding, output_padding)]
    size = [m - o + c for m, o, c in zip(node.shape[2:], output_padding, kept)]
    out = emit(p, Fold, reached, sp.Tuple(*window), sp.Tuple(*stride), sp.Tuple(*dilation),
               sp.Tuple(*(sp.Tuple(q, q - c) for q, c in zip(padding, kept))), sp.Tuple(*size), hint="conv_transpose")
    if any(o > c for o, c in zip(output_padding, kept)):
        widths = ((0, 0), (0, 0), *((0, o - c) for o, c in zip(output_padding, kept)))
        out = emit(p, Pad, out, sp.S.Zero, sp.Tuple(*(sp.Tuple(*pair) for pair in widths)), hint="output_padded")
    if not bias:
        return out
    b = p.reshape(bias[0], (node.shape[1],) + (1,) * rank)
    return p.assign(out + b, node.shape, node.dtype.name, "conv_transpose_bias")


def _reference(x, w, *rest):
    """The same convolution written directly in JAX: the input dilated by the stride, the kernel
    flipped with its channels swapped per group."""
    *bias, stride, padding, output_padding, dilation, groups = rest
    channels, per_group, *window = w.shape
    kernel = w.reshape(groups, channels // groups, per_group, *window).swapaxes(1, 2)
    kernel = jnp.flip(kernel.reshape(groups * per_group, channels // groups, *window), tuple(range(2, 2 + len(window))))
    pads = [(d * (k - 1) - q, d * (k - 1) - q + o) for k, q, o, d in zip(window, padding, output_padding, dilation)]
    out = jax.lax.conv_general_dilated(x, kernel, (1,) * len(window), pads, lhs_dilation=stride, rhs_dilation=dilation,
                                       feature_group_count=groups, precision=jax.lax.Precision.HIGHEST)
    return out + bias[0].reshape((-1,) + (1,) * len(window)) if bias else out


def _torch(t, x, w, *rest):
    *bias, stride, padding, output_padding, dilation, groups = rest
    function = (t.nn.functional.conv_transpose1d, t.nn.functional.conv_transpose2d,
                t.nn.functional.conv_transpose3d)[len(stride) - 1]
    return function(x, w, bias[0] if bias else None, stride, padding, output_padding, groups, dilation)


def _op(name, with_bias):
    examples = (Example(((1, 2, 3, 3), (2, 3, 2, 2)), ((2, 2), (0, 0), (1, 0), (1, 1), 1)),
                Example(((2, 4, 3, 2), (4, 1, 3, 2)), ((1, 2), (1, 0), (0, 1), (2, 1), 2)),
                Example(((1, 2, 4), (2, 2, 3)), ((3,), (2,), (1,), (1,), 1)),
                Example(((1, 2, 2, 2, 2), (2, 1, 2, 1, 2)), ((2, 1, 1), (0, 0, 1), (1, 0, 0), (1, 1, 1), 2)))
    if with_bias:
        examples = tuple(Example((*e.shapes, (e.shapes[1][1] * e.attrs[-1],)), e.attrs) for e in examples)
    return register(Op(name, "ConvolutionBackward0", _infer, _build, reference=_reference, torch_fn=_torch,
                       examples=examples))


CONV_TRANSPOSE = _op("conv_transpose", with_bias=False)
CONV_TRANSPOSE_BIAS = _op("conv_transpose_bias", with_bias=True)


def _conv_transpose(n, input, weight, bias, stride, padding, output_padding, groups, dilation):
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to conv_transpose{n}d, but "
                           f"got input of size: {_sizes(input.shape)}")
    if input.ndim == n + 1:  # unbatched: PyTorch adds the batch axis and squeezes it away
        return _conv_transpose(n, input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups,
                               dilation).squeeze(0)
    stride, padding, dilation = (_tuple(v, n, name) for v, name in ((stride, "stride"), (padding, "padding"),
                                                                     (dilation, "dilation")))
    output_padding = _tuple(output_padding, n, "output_padding")
    for failed, message in ((min(padding) < 0, "negative padding is not supported"),
                            (min(output_padding) < 0, "negative output_padding is not supported"),
                            (min(stride) <= 0, "non-positive stride is not supported"),
                            (min(dilation) < 0, "dilation should be greater than zero"),  # zero: _checked_sizes
                            (groups <= 0, "non-positive groups is not supported")):
        if failed:
            raise RuntimeError(message)
    if not (input.dtype.is_floating_point and weight.dtype.is_floating_point):
        raise NotImplementedError(f'"slow_conv_transpose{max(n, 2)}d_out_cpu" not implemented for '
                                  f"'{dtypes.torch_name(input.dtype).capitalize()}'")
    attrs = (stride, padding, output_padding, dilation, int(groups))
    if bias is None:
        return apply(CONV_TRANSPOSE, input, weight, attrs=attrs)
    if bias.dtype is not input.dtype:
        _refuse_bias_dtype(input.dtype, bias.dtype, n, groups)
        bias = bias.to(input.dtype)
    return apply(CONV_TRANSPOSE_BIAS, input, weight, bias, attrs=attrs)


@CONV_TRANSPOSE.publish(Names(function=("conv_transpose1d",), functional=("conv_transpose1d",)))
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


@CONV_TRANSPOSE.publish(Names(function=("conv_transpose2d",), functional=("conv_transpose2d",)))
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


@CONV_TRANSPOSE.publish(Names(function=("conv_transpose3d",), functional=("conv_transpose3d",)))
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation)


# ------------------------------------------------------------------------------ modules


class _ConvTransposeNd(_ConvNd):
    """PyTorch's ConvTranspose: its weight is (in, out / groups, *kernel), so the default
    initialisation's fan-in is ``out / groups * prod(kernel)``, as PyTorch's."""

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype, output_padding=output_padding)

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return getattr(F, self.function)(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                           self.groups, self.dilation)

    def _output_padding(self, input, output_size):
        """The output padding that makes the output ``output_size`` (its spatial sizes, or all its
        sizes), checked against the sizes this layer can make, in PyTorch's words."""
        if output_size is None:
            return self.output_padding
        n = self.dims
        lead = 2 if input.dim() == n + 2 else 1
        output_size = list(output_size)
        if len(output_size) == lead + n:
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must have {n} or {lead + n} "
                             f"elements (got {len(output_size)})")
        smallest = [(input.shape[lead + i] - 1) * self.stride[i] - 2 * self.padding[i]
                    + self.dilation[i] * (self.kernel_size[i] - 1) + 1 for i in range(n)]
        largest = [low + s - 1 for low, s in zip(smallest, self.stride)]
        if any(not low <= size <= high for size, low, high in zip(output_size, smallest, largest)):
            raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {smallest} to "
                             f"{largest} (for an input of {input.shape[lead:]})")
        return tuple(size - low for size, low in zip(output_size, smallest))


class ConvTranspose1d(_ConvTransposeNd):
    dims, function = 1, "conv_transpose1d"


class ConvTranspose2d(_ConvTransposeNd):
    dims, function = 2, "conv_transpose2d"


class ConvTranspose3d(_ConvTransposeNd):
    dims, function = 3, "conv_transpose3d"

