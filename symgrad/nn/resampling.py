"""Resampling: ``F.interpolate`` (and the deprecated ``F.upsample*``), ``nn.Upsample`` and its two
fixed-mode subclasses, and the sub-pixel rearrangements ``pixel_shuffle``, ``pixel_unshuffle`` and
``channel_shuffle`` with their modules.

An interpolation reads, along each spatial axis, a few input entries per output entry, weighted.
Which entries and what weights are PyTorch's CPU kernel's (UpSample.h): computed here on the host
in its arithmetic (float32 for float32 and smaller inputs, float64 for float64), and given to the
program as constant arrays, so the program is a gather per tap times its weight, axis after axis
(the last axis innermost, as PyTorch's kernel nests them).  The gradient is the gathers' adjoint:
scatter-adds of the weighted cotangent.  Every tap PyTorch reads is read, zero weights included,
so an Inf makes NaN where PyTorch's does (``inf * 0``).
"""
from __future__ import annotations

import functools
import warnings
from fractions import Fraction

import jax.numpy as jnp
import numpy as np

from symgrad import dtypes
from symgrad.ir.indexing import take
from symgrad.nn.module import Module
from symgrad.nn.pools import adaptive_avg_pool1d, adaptive_avg_pool3d
from symgrad.nodes import leaf
from symgrad.ops.convolution import adaptive_avg_pool2d
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply

# --------------------------------------------------------------------- PyTorch's source positions


def _scale(scale, n_in, n_out, real):
    """compute_scales_value: 1 / the user's scale factor where one is used, else in / out."""
    return real(1.0 / scale) if scale is not None and scale > 0 else real(n_in) / real(n_out)


def _area_scale(n_in, n_out, align_corners, scale, real):
    if align_corners:
        return real(n_in - 1) / real(n_out - 1) if n_out > 1 else real(0)
    return _scale(scale, n_in, n_out, real)


def _fused(a, b, c, real):
    """a * b + c rounded once, as the fused multiply-add PyTorch's compiled kernel does: exact in
    extended precision for float32 operands, as fractions for float64 ones."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, real) for v in (a, b, c)))
    if real is np.float32:
        return (a.astype(np.longdouble) * b.astype(np.longdouble) + c.astype(np.longdouble)).astype(np.float32)
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a.flat, b.flat, c.flat)]
    return np.array([float(v) for v in exact], np.float64).reshape(a.shape)


def _source_positions(ratio, n_out, align_corners, cubic, real):
    """area_pixel_compute_source_index for every output position (linear modes clamp below at 0)."""
    dst = np.arange(n_out).astype(real)
    if align_corners:
        return ratio * dst
    src = _fused(ratio, dst + real(0.5), real(-0.5), real)
    return src if cubic else np.where(src < 0, real(0), src)


def _nearest(n_in, n_out, scale, exact, planar, real):
    """The entry each output copies.  On 2-D inputs PyTorch's nearest_idx / nearest_exact_idx: a
    float32 scale (and for 'nearest' plain copies at sizes x1 and x2); on 1-D and 3-D ones its
    HelperInterpNearest(Exact), in the input's precision."""
    dst = np.arange(n_out)
    if planar:
        if not exact and n_out == n_in:
            return dst
        if not exact and n_out == 2 * n_in:
            return dst >> 1
        s = _scale(scale, n_in, n_out, np.float32)
        src = (dst + 0.5) * np.float64(s) if exact else dst.astype(np.float32) * s
    else:
        s = _scale(scale, n_in, n_out, real)
        src = _source_positions(s, n_out, False, False, real) + 0.5 if exact else s * dst.astype(real)
    return np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n_in - 1)


def _guarded(src, n_in, real):
    """guard_index_and_lambda: the entry at or below each position (floored as a float32, which
    PyTorch's ``floorf`` rounds a float64 position to) and the distance past it, within [0, 1]."""
    base = np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n_in - 1)
    return base, np.clip(src - base.astype(real), real(0), real(1)).astype(real)


def _linear(n_in, n_out, align_corners, scale, real):
    """compute_source_index_and_lambda: two taps (the second is the first at the last entry)."""
    if n_out == n_in:
        dst = np.arange(n_out)
        return [dst, dst.copy()], [np.ones(n_out, real), np.zeros(n_out, real)]
    src = _source_positions(_area_scale(n_in, n_out, align_corners, scale, real), n_out, align_corners, False, real)
    first, weight = _guarded(src, n_in, real)
    return [first, first + (first < n_in - 1)], [real(1) - weight, weight]


def _cubic(n_in, n_out, align_corners, scale, real):
    """Keys' cubic convolution (A = -0.75) on the four entries around each source position, the
    positions clamped into the input."""
    src = _source_positions(_area_scale(n_in, n_out, align_corners, scale, real), n_out, align_corners, True, real)
    base, t = _guarded(src, n_in, real)
    a = real(-0.75)

    def near(x):  # ((a + 2) x - (a + 3)) x x + 1, with the multiply-add PyTorch's build fuses
        return _fused(a + 2, x, -(a + 3), real) * x * x + real(1)

    def far(x):  # ((a x - 5 a) x + 8 a) x - 4 a, likewise
        return _fused(_fused(a, x, -5 * a, real), x, 8 * a, real) * x - 4 * a

    opposite = real(1) - t
    weights = [far(t + real(1)), near(t), near(opposite), far(opposite + real(1))]
    return [np.clip(base - 1 + j, 0, n_in - 1) for j in range(4)], [w.astype(real) for w in weights]


@functools.lru_cache(maxsize=256)
def _taps(mode, n_in, n_out, align_corners, scale, dtype_name, planar):
    """(indices, weights) of one axis, cached: a training loop makes them once.  NumPy arrays, as
    constants are host values whether or not the call is being traced by JAX."""
    real = np.float64 if dtype_name == "float64" else np.float32
    if mode in ("nearest", "nearest-exact"):
        return (_nearest(n_in, n_out, scale, mode == "nearest-exact", planar, real),), ()
    indices, weights = (_cubic if mode == "bicubic" else _linear)(n_in, n_out, align_corners, scale, real)
    return (tuple(i.astype(np.int64) for i in indices),
            tuple(np.asarray(jnp.asarray(w, dtype=dtype_name)) for w in weights))


# ----------------------------------------------------------------------------------- the op

_NAMES = {"nearest": "Nearest", "nearest-exact": "NearestExact", "linear": "Linear", "bilinear": "Bilinear",
          "bicubic": "Bicubic", "trilinear": "Trilinear"}


def _infer(nodes, mode, sizes):
    x = nodes[0]
    return (*x.shape[:2], *sizes), x.dtype


def _build(p, node, x, *arrays):
    """Nearest modes: one gather of every spatial axis at once.  Others: per axis, from the last,
    the sum of each tap's gather times its weight, added in PyTorch's order."""
    mode, sizes = node.attrs
    axes = tuple(range(2, 2 + len(sizes)))
    if mode in ("nearest", "nearest-exact"):
        return take(p, x, arrays, axes)
    taps = len(arrays) // (2 * len(sizes))
    dtype = node.dtype.name
    for axis in reversed(axes):
        group = arrays[2 * taps * (axis - 2): 2 * taps * (axis - 1)]
        total = None
        for index, weight in zip(group[:taps], group[taps:]):
            gathered = take(p, x, (index,), (axis,))
            term = p.assign(gathered * weight, p.shape_of(gathered), dtype, "weighted")
            total = term if total is None else p.assign(total + term, p.shape_of(term), dtype, "interpolated")
        x = total
    return x


# No generic examples: the index and weight arrays are PyTorch's, not random draws;
# tests/test_nn_resampling.py checks values and gradients against PyTorch.
INTERPOLATE = register(Op("interpolate", lambda nodes, mode, sizes: f"Upsample{_NAMES[mode]}{len(sizes)}DBackward0",
                          _infer, _build, saves=False, shown_inputs=lambda inputs: inputs[:1]))

_NEEDS = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


def _check_mode(input, mode, align_corners, antialias):
    """PyTorch's checks of the mode against the input's rank and the other options."""
    if mode in ("nearest", "area", "nearest-exact") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    rank = input.dim()
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and rank == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D "
                         "tensor as input")
    known = mode in ("nearest", "nearest-exact", "area") or _NEEDS.get(mode) == rank
    if rank not in (3, 4, 5) or not known:
        if mode in ("linear", "bilinear", "trilinear") and rank in (3, 4, 5):
            raise NotImplementedError(f"Got {rank}D input, but {mode} mode needs {_NEEDS[mode]}D input")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {rank}D) for the "
                                  f"modes: {_MODES} (got {mode})")
    if antialias:
        raise NotImplementedError(f"interpolate(mode={mode!r}, antialias=True): symgrad has no antialiased kernels")


def _output_sizes(input, size, scale_factor, recompute_scale_factor, mode):
    """The output's spatial sizes and the scale of each axis PyTorch's kernel uses (None where it
    is recomputed from the sizes), as torch.nn.functional.interpolate works them out."""
    dim, spatial = input.dim() - 2, list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {spatial} and output size of {size}. Please provide "
                                 "input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                                 "format.")
            if not all(isinstance(n, int) or (isinstance(n, Tensor) and not n.dtype.is_floating_point) for n in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, "
                                f"int], but got size with types {[type(n) for n in size]}")
            return [int(n) for n in size], [None] * dim
        return [int(size)] * dim, [None] * dim
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {spatial} and scale_factor of shape {scale_factor}. Please "
                             "provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in "
                             "(s1, s2, ...,sK) format.")
        scales = [float(s) for s in scale_factor]
    else:
        scales = [float(scale_factor)] * dim
    sizes = [int(n * s) for n, s in zip(spatial, scales)]
    if recompute_scale_factor or mode == "area":
        return sizes, [None] * dim
    return sizes, scales


def _check_sizes(input, sizes):
    spatial, rank = input.shape[2:], input.dim()
    if min(spatial) <= 0 or min(sizes) <= 0:
        names = ("D", "H", "W")[3 - len(sizes):]
        given = ", ".join(f"{a}: {n}" for a, n in zip(names, spatial))
        wanted = ", ".join(f"{a}: {n}" for a, n in zip(names, sizes))
        joint = ") and output (" if rank == 3 else ") output ("
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({given}{joint}{wanted})")
    if input.shape[1] == 0:
        raise RuntimeError(f"Non-empty {rank}D data tensor expected but got a tensor with sizes "
                           f"[{', '.join(map(str, input.shape))}]")


def _refuse_integers(input, mode):
    if input.dtype.is_floating_point:
        return
    rank = input.dim()
    kernel = {"nearest-exact": "nearest", "linear": "linear", "bilinear": "linear", "trilinear": "linear",
              "bicubic": "cubic"}.get(mode, mode)
    name = (f"upsample_{'nearest' if kernel == 'nearest' else 'bilinear'}2d_channels_last"
            if rank == 4 and kernel != "cubic" else f"compute_indices_weights_{kernel}")
    raise NotImplementedError(f'"{name}" not implemented for \'{dtypes.torch_name(input.dtype).capitalize()}\'')


def _tap_arrays(input, mode, sizes, scales, align_corners):
    """The program's constant inputs: per axis its taps' indices, then their weights, laid out
    along the axis (the nearest modes' indices broadcast together, for their single gather)."""
    rank, planar, nearest = len(sizes), input.dim() == 4, mode in ("nearest", "nearest-exact")
    arrays = []
    for k, (n_in, n_out, scale) in enumerate(zip(input.shape[2:], sizes, scales)):
        indices, weights = _taps(mode, n_in, n_out, align_corners, scale, input.dtype.name, planar)
        trailing = (1,) * (rank - 1 - k)
        arrays += [Tensor(leaf(i.reshape(i.shape + trailing) if nearest else i, dtypes.int64)) for i in indices]
        arrays += [Tensor(leaf(w.reshape(w.shape + trailing), input.dtype)) for w in weights]
    return arrays


@INTERPOLATE.publish(Names(functional=("interpolate",)))
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    _check_mode(input, mode, align_corners, antialias)
    sizes, scales = _output_sizes(input, size, scale_factor, recompute_scale_factor, mode)
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area":  # PyTorch's adaptive average pool
        return {3: adaptive_avg_pool1d, 4: adaptive_avg_pool2d, 5: adaptive_avg_pool3d}[input.dim()](input, sizes)
    _check_sizes(input, sizes)
    _refuse_integers(input, mode)
    return apply(INTERPOLATE, input, *_tap_arrays(input, mode, sizes, scales, bool(align_corners)),
                 attrs=(mode, tuple(sizes)))


def _deprecated(name):
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=3)


@INTERPOLATE.publish(Names(functional=("upsample",)))
def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


@INTERPOLATE.publish(Names(functional=("upsample_nearest",)))
def upsample_nearest(input, size=None, scale_factor=None):
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


@INTERPOLATE.publish(Names(functional=("upsample_bilinear",)))
def upsample_bilinear(input, size=None, scale_factor=None):
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------------- sub-pixel rearranging


def _factor(name, what, factor):
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {factor}")


def _at_least_3d(name, input):
    if input.dim() < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input with {input.dim()} "
                           "dimension(s)")


def _infer_pixel_shuffle(nodes, r):
    (x,) = nodes
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                         f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    return (*lead, c // (r * r), h * r, w * r), x.dtype


def _build_pixel_shuffle(p, node, x):
    """(*, C r r, H, W) -> (*, C, r, r, H, W) -> (*, C, H, r, W, r) -> (*, C, H r, W r)."""
    (r,) = node.attrs
    *lead, c, h, w = node.inputs[0].shape
    b = len(lead)
    x = p.reshape(x, (*lead, c // (r * r), r, r, h, w))
    x = p.permute(x, (*range(b), b, b + 3, b + 1, b + 4, b + 2))
    return p.reshape(x, node.shape)


def _infer_pixel_unshuffle(nodes, r):
    (x,) = nodes
    *lead, c, h, w = x.shape
    for axis, n, offset in (("height", h, -2), ("width", w, -1)):
        if n % r:
            raise ValueError(f"pixel_unshuffle expects {axis} to be divisible by downscale_factor, but "
                             f"input.size({offset})={n} is not divisible by {r}")
    return (*lead, c * r * r, h // r, w // r), x.dtype


def _build_pixel_unshuffle(p, node, x):
    """(*, C, H r, W r) -> (*, C, H, r, W, r) -> (*, C, r, r, H, W) -> (*, C r r, H, W)."""
    (r,) = node.attrs
    *lead, c, h, w = node.inputs[0].shape
    b = len(lead)
    x = p.reshape(x, (*lead, c, h // r, r, w // r, r))
    x = p.permute(x, (*range(b), b, b + 2, b + 4, b + 1, b + 3))
    return p.reshape(x, node.shape)


def _infer_channel_shuffle(nodes, groups):
    (x,) = nodes
    if x.shape[1] % groups:
        raise ValueError(f"Number of channels must be divisible by groups. Got {x.shape[1]} channels and {groups} "
                         "groups.")
    return x.shape, x.dtype


def _build_channel_shuffle(p, node, x):
    """(N, C, *) -> (N, g, C / g, *) -> (N, C / g, g, *) -> (N, C, *): the groups interleaved."""
    (groups,) = node.attrs
    n, c, *rest = node.shape
    x = p.reshape(x, (n, groups, c // groups, *rest))
    x = p.permute(x, (0, 2, 1, *range(3, 3 + len(rest))))
    return p.reshape(x, node.shape)


def _reference_pixel_shuffle(x, r):
    *lead, c, h, w = x.shape
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    return jnp.moveaxis(y, (-4, -3), (-3, -1)).reshape(*lead, c // (r * r), h * r, w * r)


def _reference_pixel_unshuffle(x, r):
    *lead, c, h, w = x.shape
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    return jnp.moveaxis(y, (-3, -1), (-4, -3)).reshape(*lead, c * r * r, h // r, w // r)


def _reference_channel_shuffle(x, groups):
    n, c, *rest = x.shape
    return x.reshape(n, groups, c // groups, *rest).swapaxes(1, 2).reshape(x.shape)


PIXEL_SHUFFLE = register(Op(
    "pixel_shuffle", "PixelShuffleBackward0", _infer_pixel_shuffle, _build_pixel_shuffle, saves=False,
    reference=_reference_pixel_shuffle, torch_fn=lambda t, x, r: t.nn.functional.pixel_shuffle(x, r),
    examples=(Example(((1, 8, 2, 3),), (2,)), Example(((9, 2, 1),), (3,)), Example(((2, 1, 4, 1, 2),), (2,)))))

PIXEL_UNSHUFFLE = register(Op(
    "pixel_unshuffle", "PixelUnshuffleBackward0", _infer_pixel_unshuffle, _build_pixel_unshuffle, saves=False,
    reference=_reference_pixel_unshuffle, torch_fn=lambda t, x, r: t.nn.functional.pixel_unshuffle(x, r),
    examples=(Example(((1, 2, 4, 6),), (2,)), Example(((1, 3, 6),), (3,)), Example(((2, 1, 1, 2, 4),), (2,)))))

CHANNEL_SHUFFLE = register(Op(
    "channel_shuffle", "ChannelShuffleBackward0", _infer_channel_shuffle, _build_channel_shuffle, saves=False,
    reference=_reference_channel_shuffle, torch_fn=lambda t, x, groups: t.nn.functional.channel_shuffle(x, groups),
    examples=(Example(((2, 6, 2, 1),), (3,)), Example(((1, 4, 3),), (2,)))))


@PIXEL_SHUFFLE.publish(Names(function=("pixel_shuffle",), functional=("pixel_shuffle",)))
def pixel_shuffle(input, upscale_factor):
    _at_least_3d("pixel_shuffle", input)
    _factor("pixel_shuffle", "upscale_factor", upscale_factor)
    return apply(PIXEL_SHUFFLE, input, attrs=(int(upscale_factor),))


@PIXEL_UNSHUFFLE.publish(Names(function=("pixel_unshuffle",), functional=("pixel_unshuffle",)))
def pixel_unshuffle(input, downscale_factor):
    _at_least_3d("pixel_unshuffle", input)
    _factor("pixel_unshuffle", "downscale_factor", downscale_factor)
    return apply(PIXEL_UNSHUFFLE, input, attrs=(int(downscale_factor),))


@CHANNEL_SHUFFLE.publish(Names(function=("channel_shuffle",), functional=("channel_shuffle",)))
def channel_shuffle(input, groups):
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"[{', '.join(map(str, input.shape))}]")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    return apply(CHANNEL_SHUFFLE, input, attrs=(int(groups),))


# ------------------------------------------------------------------------------------ modules


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, input):
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        shown = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{shown}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
