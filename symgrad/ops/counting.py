"""Counting values: bincount and histc (how many fall in each bin), bucketize and searchsorted (the
bin each value falls in, as PyTorch's binary search finds it), isin (whether each is among others).

Positions are counted by comparisons against every boundary, which is PyTorch's binary search on
sorted boundaries (``!(b >= v)`` and ``!(b > v)``: a NaN value goes past the end).  bincount's
length depends on the values, so they are read when it is called (as PyTorch reads them).
"""
from __future__ import annotations

import collections

import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.creation import linspace
from symgrad.ir import greater_equal, ieee, less_equal, logical_and, minimum, select, trunc
from symgrad.ir import indexing as IX
from symgrad.ir.refused import Underivable
from symgrad.nodes import leaf
from symgrad.ops.indexing import _values
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply
from symgrad.uploads import from_host


def _kernel_name(dtype) -> str:
    return dtypes.torch_name(dtype).removesuffix("Tensor")


# ------------------------------------------------------------------------------ bincount


def _infer_bincount(nodes, length):
    weights = nodes[1:]
    if not weights:
        return (length,), dtypes.int64
    return (length,), dtypes.float32 if weights[0].dtype is dtypes.float32 else dtypes.float64


def _build_bincount(p, node, positions, *weights):
    """The weights (ones) added up at their positions; PyTorch has no derivative for it."""
    dtype = node.dtype.name
    added = p.astype(weights[0], dtype) if weights else sp.S.One
    counts = IX.scatter_along(p, p.materialize(sp.S.Zero, node.shape, dtype), p.astype(positions, "int64"), added, 0,
                              "add")
    if not weights:
        return counts
    return p.assign(Underivable(counts, sp.Symbol("bincount")), node.shape, dtype, "bincount")


BINCOUNT = register(Op("bincount", "NotImplemented", _infer_bincount, _build_bincount, saves=False))


@BINCOUNT.publish(Names(function=("bincount",), method=("bincount",)))
def bincount(input, weights=None, minlength: int = 0):
    """How often each of 0 .. max(input) occurs (at least ``minlength`` counts), or the sum of the
    weights at each: int64 counts, float32 sums of float32 weights, float64 otherwise."""
    if input.dtype.is_floating_point or input.dtype is dtypes.bool_:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{_kernel_name(input.dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    values = _values(input) if input.ndim == 1 else None
    if input.ndim != 1 or (values is not None and values.size and values.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if values is None:
        raise NotImplementedError("symgrad: bincount inside a traced function (its length depends on the values)")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    length = max(int(values.max()) + 1 if values.size else 0, int(minlength))
    return apply(BINCOUNT, input, *(() if weights is None else (weights,)), attrs=(length,))


# --------------------------------------------------------------------------------- histc


def _build_histc(p, node, x):
    """PyTorch's linear bins: position ``(x - lo) * bins / (hi - lo)`` truncated (its arithmetic,
    in x's dtype, in its order), the last bin closed; values outside [lo, hi] and NaN counted nowhere."""
    bins, lo, hi, width = node.attrs
    dtype = node.dtype.name
    flat = p.reshape(x, (int(np.prod(node.inputs[0].shape)),))
    shape = p.shape_of(flat)
    lo, hi, width = (ieee.constant(v) for v in (lo, hi, width))
    inside = p.assign(logical_and(greater_equal(flat, lo), less_equal(flat, hi)), shape, "bool", "inside")
    scaled = p.assign(ieee.unevaluated(lambda v, a, n, w: (v - a) * n / w, flat, lo, sp.Integer(bins), width),
                      shape, dtype, "scaled")
    where = p.astype(p.assign(trunc(scaled), shape, dtype, "bin"), "int64")
    where = p.assign(select(inside, minimum(where, bins - 1), 0), shape, "int64", "bin")
    counted = p.assign(select(inside, sp.S.One, sp.S.Zero), shape, dtype, "counted")
    return IX.scatter_along(p, p.materialize(sp.S.Zero, node.shape, dtype), where, counted, 0, "add")


HISTC = register(Op("histc", None, lambda nodes, bins, lo, hi, width: ((bins,), nodes[0].dtype), _build_histc,
                    saves=False))


def _range(input, low, high):
    """The bins' range: as given, or the values' own (read at once, as PyTorch reads them) when both
    bounds are equal; widened by one each way if it is empty; PyTorch's errors."""
    if low == high and input.numel():
        values = _values(input)
        if values is None:
            raise NotImplementedError("symgrad: histc of the values' own range inside a traced function")
        low, high = values.min(), values.max()
    if low == high:
        low, high = low - 1, high + 1
    if not (np.isfinite(low) and np.isfinite(high)):
        raise RuntimeError(f"torch.histc: range of [{low}, {high}] is not finite")
    if low > high:
        raise RuntimeError("torch.histc: max must be larger than min")
    return low, high


@HISTC.publish(Names(function=("histc",), method=("histc",)))
def histc(input, bins: int = 100, min=0, max=0):
    """Counts of the values in ``bins`` equal bins over [min, max] (the values' range if min == max),
    in the input's dtype; no gradient, as PyTorch's."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{_kernel_name(input.dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    low, high = _range(input, min, max)
    real = input.dtype.numpy.type
    low, high = real(low), real(high)
    return apply(HISTC, input.detach(), attrs=(int(bins), float(low), float(high), float(real(high - low))))


Histogram = collections.namedtuple("histogram", ("hist", "bin_edges"))
Histogram.__repr__ = lambda self: f"torch.return_types.histogram(\nhist={self.hist!r},\nbin_edges={self.bin_edges!r})"


@HISTC.publish(Names(function=("histogram",), method=("histogram",)))
def histogram(input, bins, *, range=None, weight=None, density: bool = False) -> Histogram:
    """``(hist, bin_edges)``: the (weighted) count of values in each bin, the last bin closed; ``bins``
    equal bins over ``range`` (the values' own, widened by 1/2 each way if a point) or the edges given.
    Read when called, as PyTorch's kernel reads them; no gradient."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{_kernel_name(input.dtype)}'")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have the same shape as the "
                           f"input tensor excluding its innermost dimension, but got input with shape "
                           f"[{input.numel()}, 1] and weight with shape {list(weight.shape)}")
    values = _values(input)
    if values is None:
        raise NotImplementedError("symgrad: histogram inside a traced function (it reads the values)")
    edges = _bin_edges(values.reshape(-1), input.dtype, bins, range)
    boundaries = edges.numpy()
    flat, real = values.reshape(-1), input.dtype.numpy.type
    inside = (flat >= boundaries[0]) & (flat <= boundaries[-1])  # (False for NaN)
    where = np.minimum(np.searchsorted(boundaries, flat[inside], side="right") - 1, len(boundaries) - 2)
    counts = np.zeros(len(boundaries) - 1, dtype=real)
    np.add.at(counts, where, _values(weight).reshape(-1)[inside] if weight is not None else real(1))
    if density:
        counts = counts / real(counts.sum(dtype=np.float64)) / np.diff(boundaries)
    return Histogram(Tensor(leaf(from_host(counts.astype(real)), input.dtype)), edges)


def _bin_edges(values, dtype, bins, given_range):
    """The edges given (of the input's dtype), or ``bins + 1`` of them spaced as ``linspace`` spaces them."""
    if isinstance(bins, Tensor):
        if bins.dtype is not dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same dtype, but got "
                               f"input with dtype {dtypes.type_id(dtype)} and bins for dimension 0 with dtype "
                               f"{dtypes.type_id(bins.dtype)}")
        return bins.detach()
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if given_range is not None:
        low, high = (float(v) for v in given_range)
    elif values.size:
        low, high = float(values.min()), float(values.max())
    else:
        low, high = 0.0, 1.0
    if low > high:
        raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {low:g} max {high:g} for "
                           f"dimension 0")
    if not (np.isfinite(low) and np.isfinite(high)):
        raise RuntimeError(f"torch.histogramdd: dimension 0's range [{low:g}, {high:g}] is not finite")
    if low == high:
        low, high = low - 0.5, high + 0.5
    return linspace(low, high, int(bins) + 1, dtype=dtype)


# --------------------------------------------------------------------- bins and membership
# (compositions of comparisons, published beside histc)


def _positions(boundaries, values, right: bool, out_int32: bool):
    """How many boundaries (the last axis) each value (the last axis of ``values``) is past:
    ``!(b >= v)`` (``!(b > v)`` if ``right``) summed, the binary search's answer on sorted ones."""
    wide, each = boundaries.unsqueeze(-2), values.unsqueeze(-1)
    past = (wide > each if right else wide >= each).logical_not().sum(-1)
    return past.int() if out_int32 else past


def _scalar_tensor(value, like):
    return value if isinstance(value, Tensor) else like.new_tensor(value, dtype=dtypes.default_for(value))


@HISTC.publish(Names(function=("bucketize",)))
def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """The index of the bucket of ``boundaries`` (1-D, increasing) each value falls in."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    values = _scalar_tensor(input, boundaries)
    return _positions(boundaries, values.reshape(-1), right, out_int32).reshape(values.shape)


SEARCH = "torch.searchsorted(): "


def _search_checks(sorted_sequence, values, side, right, sorter):
    if side not in (None, "left", "right"):
        raise RuntimeError(f"{SEARCH}side can only be 'left' or 'right' but got {side}")
    if side is not None and (side == "right") != bool(right) and right:
        raise RuntimeError(f"{SEARCH}side and right can't be set to opposites, got side of {side} while right was True")
    if sorter is not None and tuple(sorter.shape) != tuple(sorted_sequence.shape):
        raise RuntimeError(f"{SEARCH}boundary and sorter must have the same size, but got boundary tensor "
                           f"{list(sorted_sequence.shape)}and got sorter tensor {list(sorter.shape)}")
    if values.ndim == 0 and sorted_sequence.ndim != 1:
        raise RuntimeError(f"{SEARCH}input value can be a scalar only when boundaries tensor dimension is 1, but we "
                           f"got boundaries tensor dim({sorted_sequence.ndim}) and input value's dim(0) numel(1)")
    if sorted_sequence.ndim != 1 and tuple(sorted_sequence.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(f"{SEARCH}boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                           f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(sorted_sequence.shape)} and input value tensor {list(values.shape)}")


@HISTC.publish(Names(function=("searchsorted",)))
def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False, side=None, sorter=None):
    """Where each value would go in the last dim of ``sorted_sequence`` (1-D, or one row per row of
    the values) to keep it sorted: the first such place, or the last (``right``, side="right");
    ``sorter`` sorts the sequence first."""
    values = _scalar_tensor(input, sorted_sequence)
    _search_checks(sorted_sequence, values, side, right, sorter)
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    right = bool(right) or side == "right"
    if sorted_sequence.ndim == 1:
        return _positions(sorted_sequence, values.reshape(-1), right, out_int32).reshape(values.shape)
    return _positions(sorted_sequence, values, right, out_int32)


@HISTC.publish(Names(function=("isin",)))
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """Whether each element equals one of ``test_elements`` (either may be a number; NaN equals
    nothing), or does not (``invert``)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got "
                        f"({type(elements).__name__}, {type(test_elements).__name__}), but expected one of:")
    like = elements if isinstance(elements, Tensor) else test_elements
    elements, test_elements = _scalar_tensor(elements, like), _scalar_tensor(test_elements, like)
    for t in (elements, test_elements):
        if t.dtype is dtypes.bool_:
            raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    found = (elements.reshape(-1, 1) == test_elements.reshape(1, -1)).any(1).reshape(elements.shape)
    return found.logical_not() if invert else found
