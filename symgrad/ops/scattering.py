"""Writes that reduce or replace along an axis: scatter_reduce and index_reduce (sum, prod, mean,
amax, amin, with or without what self held), index_copy, and select_scatter, slice_scatter and
diagonal_scatter (a view's region of a tensor replaced, out of place).

A reduction's value is XLA's scatter with that combiner (``.at[...].mul``, ``.max`` ...); its
gradient is PyTorch's scatter_reduce_backward, not the scatter's derivative: the value carries it
as a ``rerouted`` sum, ``self * w_self`` scatter-added with ``src * w_src``, the weights PyTorch's
formulas (ties of amax share evenly, a product's zeros are taken out one at a time) held constant.
Their own derivatives are so lost: a second derivative through a product is not PyTorch's.
"""
from __future__ import annotations

import warnings

import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.ir import equal, index_shape, logical_and, not_equal, rerouted, select
from symgrad.ir import indexing as IX
from symgrad.ir.functions import floor_divide
from symgrad.ops.dims import dim_index
from symgrad.ops.indexing import _check_along, _cut_to, _values
from symgrad.ops.refusals import refused
from symgrad.ops.registry import Names, Op, register
from symgrad.ops.views import _diagonal_set
from symgrad.tensor import Tensor, apply

SCATTER_REDUCE, INDEX_REDUCE = "ScatterReduceBackward0", "IndexReduceBackward0"
COMBINER = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min", "max": "max", "min": "min"}


def _identity(reduce: str, dtype: str):
    """What a position starts from when self is left out (include_self=False)."""
    if reduce in ("sum", "mean"):
        return sp.S.Zero
    if reduce == "prod":
        return sp.S.One
    largest = COMBINER[reduce] == "max"
    if "float" in dtype:
        return sp.S.NegativeInfinity if largest else sp.S.Infinity
    limits = np.iinfo(dtype)
    return sp.Integer(int(limits.min if largest else limits.max))


class _Scatter:
    """One scatter_reduce in a program: self, the index (as scatter's: the source's shape, cut to
    it), the source, and scatters into self's shape."""

    def __init__(self, p, node, base, index, src):
        axis, self.reduce, self.include_self, name = node.attrs
        self.p, self.axis, self.dtype = p, axis, node.dtype.name
        self.shape = node.shape or (1,)  # a 0-d tensor: one element along an axis of its own
        base, index, src = (p.reshape(a, (1,)) if not node.shape else a for a in (base, index, src))
        if name == INDEX_REDUCE:  # one position per slice of the source along the axis
            along = [n if d == axis else 1 for d, n in enumerate(p.shape_of(src))]
            index = p.materialize(p.reshape(index, along), p.shape_of(src), node.inputs[1].dtype.name)
        self.base, self.index, self.src = base, index, _cut_to(p, src, p.shape_of(index))

    def scatter(self, base, src, how: str):
        return IX.scatter_along(self.p, base, self.index, src, self.axis, how)

    def gather(self, x):
        return IX.gather(self.p, _cut_to(self.p, x, self.p.shape_of(self.index), self.axis), self.index, self.axis)

    def filled(self, value, dtype=None):
        return self.p.materialize(value, self.shape, dtype or self.dtype)

    def touched(self):
        """Where some source entry lands."""
        marks = self.scatter(self.filled(sp.S.Zero, "int32"), sp.S.One, "set")
        return self.p.assign(equal(marks, 1), self.shape, "bool", "touched")

    def value(self, base, src):
        """The reduction of ``base`` (self, or self with ``src``'s landing places at the identity)
        and ``src``, in the op's dtype (bools as int32: or is a sum, and a product)."""
        p, work = self.p, "int32" if self.dtype == "bool" else self.dtype
        base, src = p.astype(base, work), p.astype(src, work)
        if not self.include_self:
            base = p.assign(select(self.touched(), _identity(self.reduce, work), base), self.shape, work, "start")
        value = self.scatter(base, src, COMBINER[self.reduce])
        if self.reduce == "mean":
            quotient = floor_divide if "int" in work else (lambda a, b: a / b)
            value = p.assign(quotient(value, self.counts()), self.shape, work, "mean")
        return p.assign(not_equal(value, 0), self.shape, "bool", "reduced") if work != self.dtype else value

    def counts(self):
        """How many entries each position's mean is over, at least 1 (PyTorch's N)."""
        start = self.filled(sp.S.One if self.include_self else sp.S.Zero)
        counts = self.scatter(start, sp.S.One, "add")
        return self.p.assign(select(equal(counts, 0), sp.S.One, counts), self.shape, self.dtype, "counts")


def _weights(s: _Scatter, value):
    """PyTorch's gradient as multipliers ``(w_self, w_src)`` of the cotangent (on self's positions
    and the source's), each a function that takes what it multiplies."""
    p, dtype, reduce = s.p, s.dtype, s.reduce
    src_shape = p.shape_of(s.src)
    if reduce == "sum":
        return (lambda x: x), (lambda x: x)
    if reduce == "mean":
        counts = p.stop_gradient(s.counts())
        return (lambda x: x / counts), (lambda x: x / s.gather(counts))
    if reduce in ("amax", "amin"):  # shared evenly by the entries equal to the result
        at_source = s.gather(value)
        self_is = p.astype(p.assign(equal(s.base, value), s.shape, "bool", "is_result"), dtype)
        src_is = p.astype(p.assign(equal(s.src, at_source), src_shape, "bool", "is_result"), dtype)
        shares = p.stop_gradient(s.scatter(self_is, src_is, "add"))
        self_is, src_is = p.stop_gradient(self_is), p.stop_gradient(src_is)
        return (lambda x: x * self_is / shares), (lambda x: x * src_is / s.gather(shares))
    return _product_weights(s, value)


def _product_weights(s: _Scatter, value):
    """prod: for self, the result with self's zeros taken as ones, over self (so taken); for a source
    entry the only zero at its position, the result with it taken as one; else the result over it."""
    p, dtype, src_shape = s.p, s.dtype, s.p.shape_of(s.src)
    self_zero = equal(s.base, 0)
    masked_self = p.assign(select(self_zero, sp.S.One, s.base), s.shape, dtype, "masked_self")
    by_self = p.assign(s.value(masked_self, s.src) / masked_self, s.shape, dtype, "by_self")
    src_zero = p.assign(equal(s.src, 0), src_shape, "bool", "src_zero")
    zeros_there = s.gather(s.scatter(s.filled(sp.S.Zero), p.astype(src_zero, dtype), "add"))
    single = p.assign(logical_and(src_zero, equal(zeros_there, 1)), src_shape, "bool", "single_zero")
    without_it = s.gather(s.value(s.base, p.assign(select(single, sp.S.One, s.src), src_shape, dtype, "masked_src")))
    by_src = select(single, without_it, s.gather(value) / select(src_zero, sp.S.One, s.src))
    by_src = p.stop_gradient(p.assign(by_src, src_shape, dtype, "by_src"))
    by_self = p.stop_gradient(by_self)
    return (lambda x: x * by_self), (lambda x: x * by_src)


def _build_reduce(p, node, base, index, src):
    s = _Scatter(p, node, base, index, src)
    value = s.value(s.base, s.src)
    refusal = _refusal(node)
    if refusal is not None:
        return p.reshape(refused(p, value, s.shape, s.dtype, refusal), node.shape)
    if node.requires_grad:
        on_self, on_src = _weights(s, value)
        kept = on_self(s.base)
        if not s.include_self:  # what self held there is gone: exact zeros
            kept = select(s.touched(), sp.S.Zero, kept)
        kept = p.assign(kept, s.shape, s.dtype, "kept")
        carried = s.scatter(kept, p.assign(on_src(s.src), p.shape_of(s.src), s.dtype, "sent"), "add")
        value = p.assign(rerouted(p.stop_gradient(value), carried), s.shape, s.dtype, "scatter_reduce")
    return p.reshape(value, node.shape)


def _refusal(node):
    """PyTorch's backward errors: it knows the reductions by their own names only, and a source's
    gradient takes the index's shape, which must be the source's."""
    if not node.requires_grad:
        return None
    _, reduce, _, name = node.attrs
    if reduce in ALIASES:
        return f"Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', 'amin' but got {reduce}."
    index, src = node.inputs[1].shape, node.inputs[2].shape
    if name == SCATTER_REDUCE and src != index and node.inputs[2].requires_grad:
        return (f"Function ScatterReduceBackward0 returned an invalid gradient at index 1 - got {list(index)} but "
                f"expected shape compatible with {list(src)}")
    return None


SCATTERED = register(Op("scatter_reduce", lambda nodes, axis, reduce, include_self, name: name,
                        lambda nodes, *attrs: (nodes[0].shape, nodes[0].dtype), _build_reduce))

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
ALIASES = {"max": "amax", "min": "amin"}  # PyTorch takes these spellings too


@SCATTERED.publish(Names(function=("scatter_reduce",), method=("scatter_reduce",), inplace=("scatter_reduce_",)))
def scatter_reduce(input, dim, index, src, reduce, *, include_self: bool = True):
    """``src`` reduced into ``input`` where ``index`` sends it along ``dim`` (with what input held
    there, unless ``include_self`` is false): sum, prod, mean (an integer mean rounds down), amax, amin."""
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' (position 3) must be Tensor, not {type(src).__name__}")
    if ALIASES.get(reduce, reduce) not in REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if index.dtype not in (dtypes.int32, dtypes.int64):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if reduce == "mean" and input.dtype is dtypes.bool_:
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    axis = _check_along("scatter_reduce", input, dim, index, src)
    return apply(SCATTERED, input, index, src, attrs=(axis, reduce, bool(include_self), SCATTER_REDUCE))


@SCATTERED.publish(Names(function=("index_reduce",), method=("index_reduce",), inplace=("index_reduce_",)))
def index_reduce(input, dim, index, source, reduce, *, include_self: bool = True):
    """Each slice of ``source`` along ``dim`` reduced into the slice of ``input`` that ``index`` names
    (prod, mean, amax, amin; with what input held, unless ``include_self`` is false)."""
    warnings.warn("index_reduce() is in beta and the API may change at any time.", UserWarning, stacklevel=3)
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    axis = dim_index(dim, input.ndim)
    _check_index_along("index_reduce_", input, axis, index, source)
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({dtypes.torch_name(input.dtype)}) and source "
                           f"({dtypes.torch_name(source.dtype)}) must have the same scalar type")
    if input.dtype is dtypes.bool_:
        raise NotImplementedError("\"index_func_\" not implemented for 'Bool'")
    values, size = _values(index), input.shape[axis] if input.ndim else 1
    if values is not None and ((values < 0) | (values >= size)).any():
        raise IndexError("index out of range in self")
    return apply(SCATTERED, input, index, source, attrs=(axis, reduce, bool(include_self), INDEX_REDUCE))


def _check_index_along(name, input, axis, index, source):
    """index_add's and index_reduce's checks: a vector index, one entry per slice of the source, and
    the source's other dims those of the input."""
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{dtypes.torch_name(index.dtype)} and size: {list(index.shape)}")
    count, along = index.numel(), (source.shape[axis] if source.ndim else 1)
    if count != along:
        raise RuntimeError(f"{name}(): Number of indices ({count}) should be equal to source.size(dim): "
                           f"({along}), for dim: {axis}")
    if source.ndim != input.ndim or any(a != b for d, (a, b) in enumerate(zip(source.shape, input.shape))
                                        if d != axis):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")


# --------------------------------------------------------------------------- index_copy


def _build_index_copy(p, node, x, index, source):
    """source's slices written at index's positions along the axis (a repeated position: the last)."""
    (axis,) = node.attrs
    if not node.shape:
        x, source = p.reshape(x, (1,)), p.reshape(source, (1,))
    count = p.shape_of(source)[axis]
    return p.reshape(IX.put(p, x, source, [p.reshape(index, (count,))], (axis,)), node.shape)


INDEX_COPY = register(Op("index_copy", "IndexCopyBackward0", lambda nodes, axis: (nodes[0].shape, nodes[0].dtype),
                         _build_index_copy, saves=False))


@INDEX_COPY.publish(Names(function=("index_copy",), method=("index_copy",), inplace=("index_copy_",)))
def index_copy(input, dim, index, source):
    """``input`` with its slices along ``dim`` at ``index`` replaced by ``source``'s, in order."""
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    axis = dim_index(dim, input.ndim)
    if source.ndim and input.ndim and source.ndim != input.ndim:
        raise IndexError(f"index_copy_(): When source and destination are not scalars, their dimensionality must "
                         f"match. Source dimensionality ({source.ndim}), destination dimensionality ({input.ndim})")
    along = source.shape[axis] if source.ndim else 1
    if index.numel() != along:
        raise IndexError(f"index_copy_(): Number of indices ({index.numel()}) should be equal to source.size(dim) "
                         f"({along})")
    for d, (a, b) in enumerate(zip(input.shape, source.shape)):
        if d != axis and a != b:
            raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes. Destination "
                               f"slice shape: {a} at dimension {d - (d > axis)} and source slice shape: {b} at "
                               f"dimension {d - (d > axis)}.")
    if index.dtype is not dtypes.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{dtypes.torch_name(index.dtype)}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{dtypes.torch_name(input.dtype)} and (source) {dtypes.torch_name(source.dtype)}")
    values, size = _values(index), input.shape[axis] if input.ndim else 1
    bad = None if values is None else values[(values < 0) | (values >= size)]
    if bad is not None and bad.size:
        raise IndexError(f"index_copy_(): index {int(bad.flat[0])} is out of bounds for dimension {axis} with size "
                         f"{size}")
    return apply(INDEX_COPY, input, index, source, attrs=(axis,))


# ------------------------------------------------------------ a view's region replaced


def _build_region(p, node, x, src):
    """x with the region a view would see replaced by src (cast to x's dtype): a basic index's, or a
    diagonal's."""
    kind, where, _ = node.attrs
    src = p.astype(src, node.dtype.name)
    if kind == "diagonal":
        return _diagonal_set(p, x, src, *where)
    return IX.index_set(p, x, p.materialize(src, index_shape(node.shape, where), node.dtype.name), where)


REGION = register(Op("region_scatter", lambda nodes, kind, where, name: name,
                     lambda nodes, kind, where, name: (nodes[0].shape, nodes[0].dtype), _build_region, saves=False))


def _region(input, src, kind, where, name, region_shape):
    if tuple(src.shape) != tuple(region_shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(region_shape)}")
    return apply(REGION, input, src, attrs=(kind, where, name))


def _leading(input, axis: int) -> tuple:
    return tuple((1, 0, n, 1) for n in input.shape[:axis])


@REGION.publish(Names(function=("select_scatter",), method=("select_scatter",)))
def select_scatter(input, src, dim: int, index: int):
    """``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    axis = dim_index(dim, input.ndim)
    size = input.shape[axis]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension "
                         f"{axis}")
    spec = _leading(input, axis) + ((0, index % size),)
    return _region(input, src, "index", spec, "SelectScatterBackward0", index_shape(input.shape, spec))


@REGION.publish(Names(function=("slice_scatter",), method=("slice_scatter",)))
def slice_scatter(input, src, dim: int = 0, start=None, end=None, step: int = 1):
    """``input`` with ``input[..., start:end:step, ...]`` (along ``dim``) replaced by ``src``."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    axis = dim_index(dim, input.ndim)
    first, last, _ = slice(start, end).indices(input.shape[axis])
    spec = _leading(input, axis) + ((1, first, max(first, last), int(step)),)
    return _region(input, src, "index", spec, "SliceScatterBackward0", index_shape(input.shape, spec))


@REGION.publish(Names(function=("diagonal_scatter",), method=("diagonal_scatter",)))
def diagonal_scatter(input, src, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """``input`` with ``input.diagonal(offset, dim1, dim2)`` replaced by ``src``."""
    axis1, axis2 = dim_index(dim1, input.ndim), dim_index(dim2, input.ndim)
    if axis1 == axis2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    shape = input.shape
    length = IX.diagonal_length(shape[axis1], shape[axis2], int(offset))
    region = (*(n for d, n in enumerate(shape) if d not in (axis1, axis2)), length)
    return _region(input, src, "diagonal", (int(offset), axis1, axis2), "DiagonalScatterBackward0", region)
