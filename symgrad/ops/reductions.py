"""Reductions: sum, mean, max, logsumexp over all or some dimensions.

A reduction's attributes are ``(axes, keepdim, grad_fn)``: the axes are always explicit, and
the name of PyTorch's backward node records how it was called (``x.sum()`` is
``SumBackward0``; ``x.sum(dim)``, even ``dim=()``, is ``SumBackward1``).
"""
from __future__ import annotations

import builtins
import math

import jax
import jax.numpy as jnp

from symgrad import dtypes
from symgrad.ir import reduced_shape
from symgrad.ops.registry import Example, Op, register
from symgrad.tensor import apply


def normalize_dims(dim, ndim: int, *, empty_means_all: bool = False):
    """PyTorch's ``dim`` argument (None, an int or a sequence; negatives allowed) as sorted axes.

    None is None; an empty sequence means every axis where ``empty_means_all`` (reductions).
    """
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims and empty_means_all:
        return tuple(range(ndim))
    rank = builtins.max(ndim, 1)  # this module defines its own max
    out = []
    for d in dims:
        if not -rank <= d < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {d})")
        if d % rank in out:
            raise RuntimeError(f"dim {d % rank} appears multiple times in the list of dims")
        out.append(d % rank)
    return tuple(sorted(out)) if ndim else ()


def dim_index(dim: int, ndim: int) -> int:
    """One ``dim`` argument as an axis; a 0-dim tensor accepts 0 and -1, as in PyTorch."""
    rank = builtins.max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    return dim % rank


def _reduction_attrs(input, dim, keepdim: bool, called_with_dim: str, called_without: str):
    axes = normalize_dims(dim, input.ndim, empty_means_all=True)
    name = called_without if axes is None and not keepdim else called_with_dim
    return (tuple(range(input.ndim)) if axes is None else axes), bool(keepdim), name


def _infer(kind):
    def infer(nodes, axes, keepdim, name):
        (x,) = nodes
        dtype = x.dtype
        if kind == "sum" and dtype.kind < 2:
            dtype = dtypes.int64
        if kind in ("mean", "logsumexp") and not dtype.is_floating_point:
            raise ValueError(f"{kind}(): could not infer output dtype. Input dtype must be either a floating "
                             f"point or complex dtype. Got: {dtype.name.capitalize()}")
        if kind == "max" and 0 in x.shape:
            raise ValueError("max(): Expected reduction dim to be specified for input.numel() == 0.")
        return reduced_shape(x.shape, axes, keepdim), dtype
    return infer


def _build_sum(p, node, x):
    axes, keepdim, _ = node.attrs
    return p.reduce_sum(p.astype(x, node.dtype.name), axes, keepdim, shape=node.inputs[0].shape)


def _build_mean(p, node, x):
    axes, keepdim, _ = node.attrs
    shape = node.inputs[0].shape
    total = p.reduce_sum(x, axes, keepdim, shape=shape)
    return p.assign(total / math.prod(shape[a] for a in axes), node.shape, node.dtype.name, "mean")


def _examples(backward0: str, backward1: str):
    return (Example(((3, 4),), ((0, 1), False, backward0)), Example(((3, 4),), ((1,), False, backward1)),
            Example(((2, 3, 4),), ((0, 2), True, backward1)), Example(((5,),), ((0,), False, backward1)))


def _reference(fn):
    return lambda x, axes, keepdim, name: fn(x, axis=axes, keepdims=keepdim)


def _torch(method):
    def call(t, x, axes, keepdim, name):
        return getattr(x, method)() if name.endswith("0") and method != "amax" else getattr(x, method)(axes, keepdim)
    return call


SUM = register(Op("sum", lambda nodes, axes, keepdim, name: name, _infer("sum"), _build_sum, saves=False,
                  reference=_reference(jnp.sum), torch_fn=_torch("sum"),
                  examples=_examples("SumBackward0", "SumBackward1")))
MEAN = register(Op("mean", lambda nodes, axes, keepdim, name: name, _infer("mean"), _build_mean, saves=False,
                   reference=_reference(jnp.mean), torch_fn=_torch("mean"),
                   examples=_examples("MeanBackward0", "MeanBackward1")))
MAX = register(Op("max", lambda nodes, axes, keepdim, name: name, _infer("max"),
                  lambda p, node, x: p.reduce_max(x, node.attrs[0], node.attrs[1]),
                  reference=_reference(jnp.max),
                  torch_fn=lambda t, x, axes, keepdim, name: x.max() if name == "MaxBackward1" else x.amax(axes, keepdim),
                  examples=_examples("MaxBackward1", "AmaxBackward0"), domain=("ties",)))
LOGSUMEXP = register(Op("logsumexp", lambda nodes, axes, keepdim, name: name, _infer("logsumexp"),
                        lambda p, node, x: p.logsumexp(x, node.attrs[0], node.attrs[1]),
                        reference=lambda x, axes, keepdim, name: jax.nn.logsumexp(x, axis=axes, keepdims=keepdim),
                        torch_fn=lambda t, x, axes, keepdim, name: t.logsumexp(x, axes, keepdim),
                        examples=_examples("LogsumexpBackward0", "LogsumexpBackward0")[1:]))


def sum(input, dim=None, keepdim: bool = False, dtype=None):
    result = apply(SUM, input, attrs=_reduction_attrs(input, dim, keepdim, "SumBackward1", "SumBackward0"))
    return result if dtype is None else result.to(dtype)


def mean(input, dim=None, keepdim: bool = False):
    return apply(MEAN, input, attrs=_reduction_attrs(input, dim, keepdim, "MeanBackward1", "MeanBackward0"))


def amax(input, dim=(), keepdim: bool = False):
    return apply(MAX, input, attrs=_reduction_attrs(input, dim, keepdim, "AmaxBackward0", "AmaxBackward0"))


def max(input, dim=None, keepdim: bool = False):
    from symgrad.tensor import Tensor
    if isinstance(dim, Tensor):  # torch.max(a, b): the elementwise maximum
        from symgrad.ops.elementwise import maximum
        return maximum(input, dim)
    if dim is not None:
        raise NotImplementedError("max(input, dim) returns indices, which symgrad does not have; "
                                  "use amax(input, dim) for the values")
    return apply(MAX, input, attrs=_reduction_attrs(input, None, False, "MaxBackward1", "MaxBackward1"))


def logsumexp(input, dim, keepdim: bool = False):
    return apply(LOGSUMEXP, input,
                 attrs=_reduction_attrs(input, dim, keepdim, "LogsumexpBackward0", "LogsumexpBackward0"))
