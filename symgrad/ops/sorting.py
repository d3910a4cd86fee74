"""Sorting and order statistics: sort, argsort, topk, cumulative sums and products.

Sorting is stable, with NaN taken as the largest value, as PyTorch sorts.  ``sort`` and ``topk``
return two tensors, values and indices: two ops, recorded side by side, whose attributes are
``(axis, descending, k, grad_fn)`` (k None: every entry; ``sort(stable=...)``, PyTorch's
other overload, is ``SortBackward1``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from symgrad import dtypes
from symgrad.ops.dims import dim_index
from symgrad.ops.reductions import return_type
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import apply

SortReturn, TopkReturn = return_type("sort"), return_type("topk")


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

    @op.publish(Names(function=(name,), method=(name,)))
    def cumulative(input, dim, *, dtype=None):
        return apply(op, input, attrs=(dim_index(dim, input.ndim), dtype))
    cumulative.__name__ = cumulative.__qualname__ = name
    return op, cumulative


CUMSUM, cumsum = _cumulative("cumsum", "CumsumBackward0", lambda p: p.cumulative, jnp.cumsum)
CUMPROD, cumprod = _cumulative("cumprod", "CumprodBackward0", lambda p: p.cumprod, jnp.cumprod)
