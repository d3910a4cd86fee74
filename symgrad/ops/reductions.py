"""Reductions: sum, mean, max, logsumexp over all or some dimensions."""
from __future__ import annotations

import builtins
import math

import jax
import jax.numpy as jnp

from symgrad import dtypes
from symgrad.ir import reduced_shape
from symgrad.ops.registry import Example, Op, register
from symgrad.tensor import apply

EXAMPLES = (Example(((3, 4),), (None, False)), Example(((3, 4),), ((1,), False)),
            Example(((2, 3, 4),), ((0, 2), True)), Example(((5,),), ((0,), False)))


def normalize_dims(dim, ndim: int):
    """PyTorch's ``dim`` argument (None, an int or a sequence; negatives allowed) as sorted axes."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    rank = builtins.max(ndim, 1)  # this module defines its own max
    out = []
    for d in dims:
        if not -rank <= d < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {d})")
        out.append(d % rank)
    return tuple(sorted(set(out))) if ndim else ()


def _axes(node):
    """The axes a reduction node reduces over (all of its input's when ``dim`` was None)."""
    dims = node.attrs[0]
    return tuple(range(len(node.inputs[0].shape))) if dims is None else dims


def _infer(kind):
    def infer(nodes, dims, keepdim):
        (x,) = nodes
        axes = tuple(range(len(x.shape))) if dims is None else dims
        dtype = x.dtype
        if kind == "sum" and dtype.kind < 2:
            dtype = dtypes.int64
        if kind in ("mean", "logsumexp") and not dtype.is_floating_point:
            raise ValueError(f"{kind}(): could not infer output dtype. Input dtype must be either a floating "
                             f"point or complex dtype. Got: {dtype.name.capitalize()}")
        if kind == "max" and 0 in x.shape:
            raise ValueError("max(): Expected reduction dim to be specified for input.numel() == 0.")
        return reduced_shape(x.shape, axes, keepdim and dims is not None), dtype
    return infer


def _build_sum(p, node, x):
    (x_node,) = node.inputs
    axes, keepdim = _axes(node), node.attrs[1] and node.attrs[0] is not None
    return p.reduce_sum(p.astype(x, node.dtype.name), axes, keepdim, shape=x_node.shape)


def _build_mean(p, node, x):
    (x_node,) = node.inputs
    axes = _axes(node)
    count = math.prod(x_node.shape[a] for a in axes)
    total = p.reduce_sum(x, axes, node.attrs[1] and node.attrs[0] is not None, shape=x_node.shape)
    return p.assign(total / count, node.shape, node.dtype.name, "mean")


def _build_max(p, node, x):
    (x_node,) = node.inputs
    return p.reduce_max(x, _axes(node), node.attrs[1] and node.attrs[0] is not None)


def _build_logsumexp(p, node, x):
    (x_node,) = node.inputs
    return p.logsumexp(x, _axes(node), node.attrs[1])


def _reference(fn):
    return lambda x, dims, keepdim: fn(x, axis=dims, keepdims=keepdim and dims is not None)


SUM = register(Op("sum", lambda nodes, dims, keepdim: "SumBackward0" if dims is None else "SumBackward1",
                  _infer("sum"), _build_sum, saves=False, reference=_reference(jnp.sum),
                  torch_fn=lambda t, x, dims, keepdim: x.sum() if dims is None else x.sum(dims, keepdim),
                  examples=EXAMPLES))
MEAN = register(Op("mean", lambda nodes, dims, keepdim: "MeanBackward0" if dims is None else "MeanBackward1",
                   _infer("mean"), _build_mean, saves=False, reference=_reference(jnp.mean),
                   torch_fn=lambda t, x, dims, keepdim: x.mean() if dims is None else x.mean(dims, keepdim),
                   examples=EXAMPLES))
MAX = register(Op("max", lambda nodes, dims, keepdim: "MaxBackward1" if dims is None else "AmaxBackward0",
                  _infer("max"), _build_max, reference=_reference(jnp.max),
                  torch_fn=lambda t, x, dims, keepdim: x.max() if dims is None else x.amax(dims, keepdim),
                  examples=EXAMPLES, domain=("ties",)))
LOGSUMEXP = register(Op("logsumexp", "LogsumexpBackward0", _infer("logsumexp"), _build_logsumexp,
                        reference=lambda x, dims, keepdim: jax.nn.logsumexp(x, axis=dims, keepdims=keepdim),
                        torch_fn=lambda t, x, dims, keepdim: t.logsumexp(x, dims, keepdim),
                        examples=EXAMPLES[1:]))


def sum(input, dim=None, keepdim: bool = False, dtype=None):
    result = apply(SUM, input, attrs=(normalize_dims(dim, input.ndim), keepdim))
    return result if dtype is None else result.to(dtype)


def mean(input, dim=None, keepdim: bool = False):
    return apply(MEAN, input, attrs=(normalize_dims(dim, input.ndim), keepdim))


def amax(input, dim=(), keepdim: bool = False):
    return apply(MAX, input, attrs=(normalize_dims(dim if dim != () else None, input.ndim), keepdim))


def max(input, dim=None, keepdim: bool = False):
    if dim is not None:
        raise NotImplementedError("max(input, dim) returns indices, which symgrad does not have; "
                                  "use amax(input, dim) for the values")
    return apply(MAX, input, attrs=(None, False))


def logsumexp(input, dim, keepdim: bool = False):
    return apply(LOGSUMEXP, input, attrs=(normalize_dims(dim, input.ndim), keepdim))
