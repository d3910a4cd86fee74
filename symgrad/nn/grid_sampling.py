"""Spatial transformers: ``F.affine_grid`` makes a sampling grid from affine matrices and
``F.grid_sample`` reads an input at a grid's points (bilinear, nearest or bicubic, with zeros,
border or reflection padding).

A sample is one gather of the input at its taps' integer positions (2 or 4 per axis), each tap
times a weight that is a polynomial in the grid's fractional part.  Positions come from ``floor`` and
``rint`` (no derivative) and the padding's clipping and reflecting are ``select``s, so the
symbolic gradient is PyTorch's backward: the weights' derivatives for the grid (zero at and past
a clipped border, the sign flipped by each reflection; zero for nearest), scatter-adds of the
weighted cotangent for the input.  Arithmetic follows PyTorch's vectorised CPU kernel
(GridSamplerKernel.cpp) but for the order the taps are added in, and the 3-D kernel's weights are
rounded in another order too (last bits only).
"""
from __future__ import annotations

import warnings

import numpy as np
import sympy as sp

from symgrad import dtypes, ir
from symgrad.ir import ieee
from symgrad.ir.indexing import take
from symgrad.nodes import leaf
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. Please "
                  "specify align_corners=True if the old behavior is desired. See the documentation of grid_sample "
                  "for details.")

# ------------------------------------------------------------------------------ grid_sample


class _Sampler:
    """One grid_sample being built: the input channels last, the grid's coordinates per spatial
    axis (D, H, W order).  The taps of every axis lie along trailing axes of their own, so one
    gather reads them all and one scatter-add sends their gradient back."""

    def __init__(self, p, node, x, grid, batch):
        self.p, self.dtype = p, node.dtype.name
        x_shape, grid_shape = node.inputs[0].shape, node.inputs[1].shape
        self.rank = len(x_shape) - 2
        self.sizes, self.lead = x_shape[2:], grid_shape[:-1]
        self.x = p.permute(x, (0, *range(2, 2 + self.rank), 1))
        self.batch = batch
        whole = [(1, 0, n, 1) for n in self.lead]
        self.coords = [p.index(grid, (*whole, (0, self.rank - 1 - k))) for k in range(self.rank)]  # grid is (x, y, z)

    def assign(self, expr, hint, dtype=None):
        return self.p.assign(expr, self.p.shape_of(expr), dtype or self.dtype, hint)

    def along(self, pieces, k):
        """Arrays of the grid's shape, one per tap, stacked along the tap axis of spatial axis k."""
        if len(pieces) == 1:
            return pieces[0]
        column = (*self.lead, 1)
        stacked = self.p.concatenate([self.p.reshape(a, column) for a in pieces], len(self.lead),
                                     (*self.lead, len(pieces)), self.dtype)
        taps = [1] * self.rank
        taps[k] = len(pieces)
        return self.p.reshape(stacked, (*self.lead, *taps))

    def unnormalized(self, c, size, align):
        """[-1, 1] to pixel positions: the corners' centres (align_corners) or their outer edges."""
        shifted = self.assign(c + 1, "shifted")
        if align:
            return self.assign(ieee.mul(shifted, sp.Rational(size - 1, 2)), "source")
        return self.assign(ieee.mul(shifted, sp.Rational(size, 2)) - sp.Rational(1, 2), "source")

    def clipped(self, c, size):
        """clip_coordinates, whose gradient PyTorch zeroes at the borders as well as past them."""
        top = size - 1
        return self.assign(ir.select(ir.less_equal(c, 0), 0, ir.select(ir.greater_equal(c, top), top, c)), "clipped")

    def reflected(self, c, size, align):
        """Mirror c into [low, low + span]: |c - low| modulo twice the span, folded back when past
        the span; the gradient is -1 per fold and per negative side, as PyTorch's."""
        twice_low, twice_high = (0, 2 * (size - 1)) if align else (-1, 2 * size - 1)
        if twice_low == twice_high:
            return self.p.materialize(sp.S.Zero, self.p.shape_of(c), self.dtype)
        low, twice_span = sp.Rational(twice_low, 2), twice_high - twice_low
        m = self.assign(c - low, "from_low")
        a = self.assign(ir.select(ir.less(m, 0), -m, m), "distance")
        extra = self.assign(a - ir.trunc(a / twice_span) * twice_span, "extra")
        back = self.assign(twice_span - extra, "back")
        return self.assign(ir.select(ir.greater(extra, back), back, extra) + low, "reflected")

    def padded(self, c, size, padding, align):
        if padding == "zeros":
            return c
        if padding == "reflection":
            c = self.reflected(c, size, align)
        return self.clipped(c, size)

    def read(self, positions):
        """The input at integer-valued float ``positions`` (one array per spatial axis, taps along
        trailing axes), 0 outside it: the taps' shape + (C,)."""
        conditions = [ir.logical_and(ir.greater_equal(pos, 0), ir.less_equal(pos, size - 1))
                      for pos, size in zip(positions, self.sizes)]
        inside = conditions[0]
        for condition in conditions[1:]:
            inside = ir.logical_and(inside, condition)
        inside = self.assign(inside, "inside")  # of the values' dtype, as the select's derivative is
        shape = self.p.shape_of(inside)
        batch = self.p.reshape(self.batch, (self.lead[0], *(1,) * (len(shape) - 1)))
        indices = [self.p.astype(self.assign(ir.select(inside, pos, 0), "at"), "int64") for pos in positions]
        values = take(self.p, self.x, [batch, *indices], tuple(range(self.rank + 1)))
        mask = self.p.reshape(inside, (*shape, 1))
        return self.p.assign(ir.select(mask, values, 0), self.p.shape_of(values), self.dtype, "value")

    def weighted_sum(self, values, weights):
        """The taps' values times their weights, summed over the tap axes."""
        shape = self.p.shape_of(values)
        terms = self.p.assign(values * self.p.reshape(weights, (*shape[:-1], 1)), shape, self.dtype, "weighted")
        return self.p.reduce_sum(terms, range(len(self.lead), len(shape) - 1), keepdim=False)


def _cubic_weights(s, t):
    """Keys' cubic convolution (A = -0.75) at distances 1 + t, t, 1 - t, 2 - t."""
    a = sp.Rational(-3, 4)

    def near(x):
        return s.assign(((a + 2) * x - (a + 3)) * x * x + 1, "cubic")

    def far(x):
        return s.assign(((a * x - 5 * a) * x + 8 * a) * x - 4 * a, "cubic")

    opposite = s.assign(1 - t, "opposite")
    return [far(s.assign(t + 1, "t")), near(t), near(opposite), far(s.assign(opposite + 1, "t"))]


def _taps(s, k, source, mode, padding, align):
    """Axis k's tap positions and weights: the entry at or below the (padded) source and the next,
    weighted 1 - frac and frac; or four around the unpadded source, each padded, cubic weights."""
    size = s.sizes[k]
    if mode == "bilinear":
        source = s.padded(source, size, padding, align)
    low = s.assign(ir.floor(source), "floor")
    frac = s.assign(source - low, "frac")
    if mode == "bilinear":
        return s.along([low, s.assign(low + 1, "next")], k), s.along([s.assign(1 - frac, "weight"), frac], k)
    positions = s.along([s.assign(low + offset, "tap") for offset in (-1, 0, 1, 2)], k)
    return s.padded(positions, size, padding, align), s.along(_cubic_weights(s, frac), k)


def _build_grid_sample(p, node, x, grid, batch):
    mode, padding, align = node.attrs
    s = _Sampler(p, node, x, grid, batch)
    sources = [s.unnormalized(c, size, align) for c, size in zip(s.coords, s.sizes)]
    if mode == "nearest":
        out = s.read([s.assign(ir.rint(s.padded(c, size, padding, align)), "nearest")
                      for c, size in zip(sources, s.sizes)])
    else:
        positions, weights = zip(*(_taps(s, k, c, mode, padding, align) for k, c in enumerate(sources)))
        weight = weights[0]
        for w in weights[1:]:
            weight = s.assign(weight * w, "weight")
        out = s.weighted_sum(s.read(list(positions)), weight)
    return p.permute(out, (0, s.rank + 1, *range(1, s.rank + 1)))


def _infer_grid_sample(nodes, mode, padding, align):
    x, grid = nodes[:2]
    return (*x.shape[:2], *grid.shape[1:-1]), x.dtype


GRID_SAMPLE = register(Op("grid_sample", lambda nodes, *attrs: f"GridSampler{len(nodes[0].shape) - 2}DBackward0",
                          _infer_grid_sample, _build_grid_sample, shown_inputs=lambda inputs: inputs[:2]))
# No generic examples: tests/test_nn_grid_fold_bag.py checks values and gradients against PyTorch.


def _sizes(t) -> str:
    return f"[{', '.join(map(str, t.shape))}]"


def _check_grid_sample(input, grid, mode):
    """PyTorch's checks, in its order (check_grid_sampler_common, then the 2-D or 3-D ones)."""
    if input.dtype != grid.dtype:
        raise RuntimeError(f"expected scalar type {dtypes.torch_name(input.dtype).capitalize()} but found "
                           f"{dtypes.torch_name(grid.dtype).capitalize()}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {_sizes(input)} and grid with sizes {_sizes(grid)}")
    if grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in last dimension, but got "
                           f"grid with sizes {_sizes(grid)}")
    for axis in range(2, input.dim()):
        if input.shape[axis] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {_sizes(input)} with dimension {axis} being empty")
    rank = 4 if input.dim() == 4 else 5
    if input.dim() != rank or grid.dim() != rank:
        raise RuntimeError(f"grid_sampler(): expected {rank}D input and grid with same number of dimensions, but got "
                           f"input with sizes {_sizes(input)} and grid with sizes {_sizes(grid)}")
    if mode == "bicubic" and rank == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"grid_sampler_{rank - 2}d_cpu{'_kernel_impl' if rank == 4 else ''}\" not "
                                  f"implemented for '{dtypes.torch_name(input.dtype).capitalize()}'")


@GRID_SAMPLE.publish(Names(functional=("grid_sample",)))
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    _check_grid_sample(input, grid, mode)
    n = input.shape[0]
    batch = Tensor(leaf(np.arange(n, dtype=np.int64).reshape((n,) + (1,) * (grid.dim() - 2)), dtypes.int64))
    return apply(GRID_SAMPLE, input, grid, batch, attrs=(mode, padding_mode, bool(align_corners)))


# ------------------------------------------------------------------------------ affine_grid


def _linspace_from_neg_one(steps, align, real):
    """PyTorch's base-grid coordinates: linspace(-1, 1) filled from both ends as its kernel
    does, scaled by (steps - 1) / steps unless align_corners; 0 for a single step."""
    if steps <= 1:
        return np.zeros(max(steps, 1), real)
    step = np.longdouble(real(2) / real(steps - 1))  # its multiply-adds are fused: rounded once
    idx = np.arange(steps).astype(np.longdouble)
    values = np.where(idx < steps // 2, -1 + step * idx, 1 - step * (steps - 1 - idx)).astype(real)
    return values if align else (values * real(steps - 1) / real(steps)).astype(real)


def _base_grid(spatial, align, real):
    """(prod(spatial), rank + 1): each point's (x, y[, z], 1), the last axis varying fastest."""
    axes = [_linspace_from_neg_one(n, align, real) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    columns = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(spatial)), real)]
    return np.stack(columns, axis=-1)


def _infer_affine_grid(nodes, size):
    return (size[0], *size[2:], len(size) - 2), nodes[0].dtype


def _build_affine_grid(p, node, theta, base):
    """base (P, rank + 1) times theta transposed, batched: (N, P, rank), then the grid's shape."""
    grid = p.matmul(base, p.permute(theta, (0, 2, 1)))
    return p.reshape(grid, node.shape)


AFFINE_GRID = register(Op("affine_grid", "AffineGridGeneratorBackward0", _infer_affine_grid, _build_affine_grid,
                          shown_inputs=lambda inputs: inputs[:1], saves=False))


@AFFINE_GRID.publish(Names(functional=("affine_grid",)))
def affine_grid(theta, size, align_corners=None):
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(int(n) for n in size)
    shape = tuple(theta.shape)
    if len(size) == 4 and (len(shape) != 3 or shape[-2:] != (2, 3)):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                         f"torch.Size({list(shape)}).")
    if len(size) == 5 and (len(shape) != 3 or shape[-2:] != (3, 4)):
        raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                         f"torch.Size({list(shape)}).")
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if align_corners and min(size[2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if shape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, "
                           f"{shape[-1]}] but got: [{shape[0]}, {shape[-1]}].")
    real = np.float64 if theta.dtype is dtypes.float64 else np.float32
    base = _base_grid(size[2:], bool(align_corners), real)
    return apply(AFFINE_GRID, theta, Tensor(leaf(base, theta.dtype)), attrs=(size,))
