"""Sorting and order statistics: sort, argsort, topk, median, nanmedian, unique, cumulative sums
and products.

Sorting is stable, with NaN taken as the largest value, as PyTorch sorts.  ``sort`` and ``topk``
return two tensors, values and indices: two ops, recorded side by side, whose attributes are
``(axis, descending, k, grad_fn)`` (k None: every entry; ``sort(stable=...)``, PyTorch's
other overload, is ``SortBackward1``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes, engine, ir
from symgrad.ir import indexing as IX
from symgrad.ir.functions import floor_divide
from symgrad.ir.refused import Underivable
from symgrad.nodes import leaf
from symgrad.ops.dims import dim_index
from symgrad.ops.reductions import return_type
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply
from symgrad.uploads import from_host

SortReturn, TopkReturn = return_type("sort"), return_type("topk")
MedianReturn, NanmedianReturn = return_type("median"), return_type("nanmedian")


def _infer_order(dtype):
    def infer(nodes, axis, descending, k, grad_fn):
        (x,) = nodes
        shape = x.shape if k is None or not x.shape else (*x.shape[:axis], k, *x.shape[axis + 1:])
        return shape, dtype or x.dtype
    return infer


def _order(p, node, x):
    """The sorting permutation of x along the op's axis, its first k entries (a 0-d x as one)."""
    axis, descending, k, _ = node.attrs
    if not node.inputs[0].shape:
        x = p.reshape(x, (1,))
    indices = p.argsort(x, axis, descending)
    if k is not None and k != p.shape_of(x)[axis]:
        spec = [(1, 0, n, 1) for n in p.shape_of(x)]
        spec[axis] = (1, 0, k, 1)
        indices = p.index(indices, spec)
    return x, indices


def _build_values(p, node, x):
    x, indices = _order(p, node, x)
    return p.reshape(p.take_along(x, indices, node.attrs[0]), node.shape)


def _build_indices(p, node, x):
    return p.reshape(_order(p, node, x)[1], node.shape)


def _reference(x, axis, descending, k, grad_fn):
    indices = jnp.argsort(x, axis=axis, stable=True, descending=descending)
    if k is not None:
        indices = jax.lax.slice_in_dim(indices, 0, k, axis=axis)
    return indices


def _torch_order(t, x, axis, descending, k, grad_fn):
    if k is not None:
        return x.topk(k, axis, largest=descending)
    if grad_fn == "SortBackward1":
        return x.sort(dim=axis, descending=descending, stable=True)
    return x.sort(axis, descending)


EXAMPLES = (Example(((3, 4),), (1, False, None, "SortBackward0")), Example(((3, 4),), (0, True, None, "SortBackward1")),
            Example(((2, 3, 4),), (2, True, 2, "TopkBackward0")), Example(((5,),), (0, False, 3, "TopkBackward0")))
SORTED = register(Op("sort", lambda nodes, axis, descending, k, grad_fn: grad_fn,
                     _infer_order(None), _build_values,
                     reference=lambda x, *attrs: jnp.take_along_axis(x, _reference(x, *attrs), axis=attrs[0]),
                     torch_fn=lambda t, x, *attrs: _torch_order(t, x, *attrs)[0], examples=EXAMPLES))
ORDER = register(Op("argsort", None, _infer_order(dtypes.int64), _build_indices, saves=False,
                    reference=_reference, torch_fn=lambda t, x, *attrs: _torch_order(t, x, *attrs)[1],
                    examples=EXAMPLES))


@SORTED.publish(Names(function=("sort",), method=("sort",)))
def sort(input, dim: int = -1, descending: bool = False, stable=None):
    attrs = (dim_index(dim, input.ndim), bool(descending), None, "SortBackward0" if stable is None else "SortBackward1")
    return SortReturn(apply(SORTED, input, attrs=attrs), apply(ORDER, input, attrs=attrs))


@ORDER.publish(Names(function=("argsort",), method=("argsort",)))
def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    return apply(ORDER, input, attrs=(dim_index(dim, input.ndim), bool(descending), None, "SortBackward0"))


@SORTED.publish(Names(function=("topk",), method=("topk",)))
def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The k largest (smallest) entries in order; among equal values the first come first, where
    PyTorch's order is its kernel's."""
    axis = dim_index(dim, input.ndim)
    if not 0 <= k <= (input.shape[axis] if input.ndim else 1):
        raise RuntimeError("selected index k out of range")
    attrs = (axis, bool(largest), int(k), "TopkBackward0")
    return TopkReturn(apply(SORTED, input, attrs=attrs), apply(ORDER, input, attrs=attrs))


# ------------------------------------------------------------------------------ median


def _infer_median(dtype):
    def infer(nodes, axis, keepdim, skip_nan, grad_fn):
        shape = nodes[0].shape
        if axis is None:
            shape = ()
        elif shape:
            shape = (*shape[:axis], *((1,) if keepdim else ()), *shape[axis + 1:])
        return shape, dtype or nodes[0].dtype
    return infer


def _median_index(p, node, x):
    """The position along the axis of the lower middle value in sorted order; of the first NaN
    where one is (median), or among the others only (nanmedian), as PyTorch's."""
    axis, _, skip_nan, _ = node.attrs
    shape = node.inputs[0].shape
    if axis is None or not shape:
        x, axis = p.reshape(x, (int(np.prod(shape)),)), 0
    have = p.shape_of(x)
    n, kept = have[axis], (*have[:axis], 1, *have[axis + 1:])
    numbers = p.assign(ir.logical_not(ir.isnan(x)), have, "bool", "numbers")
    count = p.reduce_sum(p.astype(numbers, "int64"), (axis,), True, shape=kept)
    if skip_nan:
        k = ir.maximum(floor_divide(count - 1, 2), sp.S.Zero)
    else:
        k = ir.select(ir.less(count, n), count, sp.Integer((n - 1) // 2))
    k = p.materialize(p.assign(k, kept, "int64", "middle"), kept, "int64")
    return x, p.take_along(p.argsort(x, axis, False), k, axis), axis


def _build_median(p, node, x):
    if not int(np.prod(node.inputs[0].shape)):  # nothing in the middle of an empty tensor
        return p.materialize(sp.nan, node.shape, node.dtype.name)
    x, index, axis = _median_index(p, node, x)
    value = p.reshape(p.take_along(x, index, axis), node.shape)
    if node.attrs[0] is not None or not node.dtype.is_floating_point:
        return value
    return p.assign(ir.rerouted(value, _evenly(p, x, value, node.dtype.name)), (), node.dtype.name, "median")


def _evenly(p, x, value, dtype):
    """A sum of x whose derivative is PyTorch's for a median of the whole tensor: shared evenly by
    the elements equal to it (the NaNs, when it is NaN)."""
    n = p.shape_of(x)
    same = p.assign(ir.select(ir.isnan(value), ir.isnan(x), ir.equal(x, value)), n, "bool", "same")
    count = p.reduce_sum(p.astype(same, dtype), (0,), False, shape=())
    share = p.stop_gradient(p.assign(ir.select(same, 1 / count, sp.S.Zero), n, dtype, "share"))
    return p.reduce_sum(p.assign(x * share, n, dtype, "shared"), (0,), False, shape=())


def _reference_median(x, axis, keepdim, skip_nan, grad_fn):
    """The median's value in jax.numpy, in the op's shape."""
    x = jnp.asarray(x)
    whole = axis is None or not x.shape
    flat, at = (x.reshape(-1), 0) if whole else (x, axis)
    numbers = jnp.sum(~jnp.isnan(flat), axis=at, keepdims=True)
    n = flat.shape[at]
    k = jnp.maximum((numbers - 1) // 2, 0) if skip_nan else jnp.where(numbers < n, numbers, (n - 1) // 2)
    value = jnp.take_along_axis(flat, jnp.take_along_axis(jnp.argsort(flat, axis=at, stable=True), k, axis=at), at)
    return value.reshape(()) if whole else value if keepdim else jnp.squeeze(value, at)


def _torch_median(t, x, axis, keepdim, skip_nan, grad_fn):
    f = x.nanmedian if skip_nan else x.median
    return f() if axis is None else f(axis, keepdim)


def _median_op(name, examples):
    """The median of the whole tensor, or along an axis (whose backward keeps only the indices)."""
    return register(Op(name, lambda nodes, axis, keepdim, skip_nan, grad_fn: grad_fn, _infer_median(None),
                       _build_median, selects=True, reference=_reference_median,
                       torch_fn=lambda t, x, *attrs: _torch_median(t, x, *attrs) if attrs[0] is None
                       else _torch_median(t, x, *attrs)[0], examples=examples))


MEDIAN = _median_op("median", (Example(((3, 5),), (None, False, False, "MedianBackward0")),
                               Example(((4, 3),), (None, False, True, "NanmedianBackward0"))))
MEDIAN_DIM = _median_op("median_dim", (Example(((3, 4),), (1, False, False, "MedianBackward1")),
                                       Example(((5, 2),), (0, True, False, "MedianBackward1")),
                                       Example(((2, 5, 3),), (1, False, True, "NanmedianBackward1"))))
MEDIAN_INDEX = register(Op("median_index", None, _infer_median(dtypes.int64),
                           lambda p, node, x: p.reshape(_median_index(p, node, x)[1], node.shape), saves=False))


def _median(input, dim, keepdim, skip_nan, name, pair):
    if dim is None:
        return apply(MEDIAN, input, attrs=(None, False, skip_nan, f"{name}Backward0"))
    axis = dim_index(dim, input.ndim)
    if input.ndim and not input.shape[axis]:
        raise IndexError(f"{name.lower()}(): Expected reduction dim {axis} to have non-zero size.")
    attrs = (axis, bool(keepdim), skip_nan, f"{name}Backward1")
    return pair(apply(MEDIAN_DIM, input, attrs=attrs), apply(MEDIAN_INDEX, input, attrs=attrs))


@MEDIAN.publish(Names(function=("median",), method=("median",)))
def median(input, dim=None, keepdim: bool = False):
    """The lower of the two middle values (NaN where there is one); with ``dim``, values and
    their indices (among equal values, PyTorch's index is its kernel's choice; here the first in
    a stable sort's order)."""
    return _median(input, dim, keepdim, False, "Median", MedianReturn)


@MEDIAN.publish(Names(function=("nanmedian",), method=("nanmedian",)))
def nanmedian(input, dim=None, keepdim: bool = False):
    """median of the values that are not NaN (NaN where there are none)."""
    return _median(input, dim, keepdim, True, "Nanmedian", NanmedianReturn)


# ------------------------------------------------------------------------------ unique


class Unimplemented(Underivable):
    """A value whose derivative PyTorch does not implement, refused as its autograd refuses it
    (NotImplementedError, naming the op), when a backward reaches it."""

    def vjp(self, p, g, out):
        raise NotImplementedError(f"the derivative for '{self.args[1]}' is not implemented.")


_UNDERIVED = {"unique": "_unique2", "unique_consecutive": "unique_consecutive"}  # the names PyTorch's refusal gives


def _build_unique(p, node, x, first):
    flat = p.reshape(x, (int(np.prod(node.inputs[0].shape)),))
    taken = IX.take(p, flat, [first], (0,))
    return p.assign(Unimplemented(taken, sp.Symbol(_UNDERIVED[node.op.name])), node.shape, node.dtype.name,
                    node.op.name)


UNIQUE = register(Op("unique", "Unique2Backward0", lambda nodes: (nodes[1].shape, nodes[0].dtype), _build_unique,
                     saves=False, selects=True))


def _int64(values) -> Tensor:
    return Tensor(leaf(from_host(np.asarray(values, np.int64)), dtypes.int64))


@UNIQUE.publish(Names(function=("unique",), method=("unique",)))
def unique(input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """The distinct values in ascending order (each NaN distinct, last), read when the call is made
    as their count depends on them; ``inverse``: where each element went, ``counts``: how often.
    PyTorch's CPU kernels sort for ``sorted=False`` too; so does symgrad."""
    if dim is not None:
        raise NotImplementedError("symgrad: unique(dim=...) is not supported; flatten or use dim=None")
    values = engine.concrete_array(input._node)
    if values is None:
        raise NotImplementedError("symgrad: unique inside a traced function (its result's shape depends on the "
                                  "values)")
    _, first, inverse, counts = np.unique(np.asarray(values).reshape(-1), return_index=True, return_inverse=True,
                                          return_counts=True, equal_nan=False)
    found = [apply(UNIQUE, input, _int64(first))]
    if return_inverse:
        found.append(_int64(inverse.reshape(input.shape)))
    if return_counts:
        found.append(_int64(counts))
    return found[0] if len(found) == 1 else tuple(found)


UNIQUE_CONSECUTIVE = register(Op("unique_consecutive", "UniqueConsecutiveBackward0",
                                 lambda nodes: (nodes[1].shape, nodes[0].dtype), _build_unique, saves=False,
                                 selects=True))


@UNIQUE_CONSECUTIVE.publish(Names(function=("unique_consecutive",), method=("unique_consecutive",)))
def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """The first of each run of equal values, in order (NaN equals nothing, so each starts a run),
    read when the call is made; ``inverse``: each element's run, ``counts``: the runs' lengths."""
    if dim is not None:
        raise NotImplementedError("symgrad: unique_consecutive(dim=...) is not supported; flatten or use dim=None")
    values = engine.concrete_array(input._node)
    if values is None:
        raise NotImplementedError("symgrad: unique_consecutive inside a traced function (its result's shape "
                                  "depends on the values)")
    flat = np.asarray(values).reshape(-1)
    starts = np.ones(flat.size, dtype=bool)
    starts[1:] = flat[1:] != flat[:-1]
    first = np.flatnonzero(starts)
    found = [apply(UNIQUE_CONSECUTIVE, input, _int64(first))]
    if return_inverse:
        found.append(_int64((np.cumsum(starts) - 1).reshape(input.shape)))
    if return_counts:
        found.append(_int64(np.diff(np.append(first, flat.size))))
    return found[0] if len(found) == 1 else tuple(found)


# ------------------------------------------------------------------------- cumulative


def _infer_cumulative(nodes, axis, dtype):
    (x,) = nodes
    return x.shape, dtype or (x.dtype if x.dtype.is_floating_point else dtypes.int64)


def _cumulative(name, grad_fn, running, reference):
    def build(p, node, x):
        dtype = node.dtype.name
        x = p.astype(x, dtype)
        if not node.inputs[0].shape:  # a 0-d tensor is its own running sum (product)
            return x
        wide = "float64" if node.dtype.is_floating_point else dtype  # PyTorch runs float32 totals in double
        return p.astype(running(p)(p.astype(x, wide), node.attrs[0]), dtype)

    op = register(Op(name, grad_fn, _infer_cumulative, build,
                     reference=lambda x, axis, dtype: reference(jnp.atleast_1d(x), axis=axis).reshape(jnp.shape(x)),
                     torch_fn=lambda t, x, axis, dtype: getattr(x, name)(axis),
                     examples=(Example(((3, 4),), (1, None)), Example(((3, 4),), (0, None)),
                               Example(((2, 3, 4),), (2, None)), Example(((),), (0, None)))))

    @op.publish(Names(function=(name,), method=(name,), inplace=(f"{name}_",)))
    def cumulative(input, dim, *, dtype=None):
        return apply(op, input, attrs=(dim_index(dim, input.ndim), dtype))
    cumulative.__name__ = cumulative.__qualname__ = name
    return op, cumulative


CUMSUM, cumsum = _cumulative("cumsum", "CumsumBackward0", lambda p: p.cumulative, jnp.cumsum)
CUMPROD, cumprod = _cumulative("cumprod", "CumprodBackward0", lambda p: p.cumprod, jnp.cumprod)
