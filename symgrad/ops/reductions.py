"""Reductions: sum, mean, max, logsumexp over all or some dimensions.

A reduction's attributes are ``(axes, keepdim, grad_fn)``: the axes are always explicit, and
the name of PyTorch's backward node records how it was called (``x.sum()`` is
``SumBackward0``; ``x.sum(dim)``, even ``dim=()``, is ``SumBackward1``).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from symgrad import dtypes
from symgrad.ir import reduced_shape
from symgrad.ops.dims import normalize_dims
from symgrad.ops.elementwise import MAXIMUM
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply


def _reduction_attrs(input, dim, keepdim: bool, called_with_dim: str, called_without: str):
    axes = normalize_dims(dim, input.ndim, empty_means_all=True)
    name = called_without if axes is None and not keepdim else called_with_dim
    return (tuple(range(input.ndim)) if axes is None else axes), bool(keepdim), name


def _infer(kind):
    def infer(nodes, axes, keepdim, name):
        (x,) = nodes
        dtype = x.dtype
        if kind == "sum" and not dtype.is_floating_point:
            dtype = dtypes.int64
        if kind == "logsumexp" and not dtype.is_floating_point:  # PyTorch computes it in floats
            dtype = dtypes.float32
        if kind == "mean" and not dtype.is_floating_point:
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
                  lambda p, node, x: p.reduce_max(x, node.attrs[0], node.attrs[1], node.attrs[2] == "MaxBackward1"),
                  reference=_reference(jnp.max),
                  torch_fn=lambda t, x, axes, keepdim, name: x.max() if name == "MaxBackward1" else x.amax(axes, keepdim),
                  examples=_examples("MaxBackward1", "AmaxBackward0"), domain=("ties",)))
LOGSUMEXP = register(Op("logsumexp", lambda nodes, axes, keepdim, name: name, _infer("logsumexp"),
                        lambda p, node, x: p.logsumexp(p.astype(x, node.dtype.name), node.attrs[0], node.attrs[1]),
                        reference=lambda x, axes, keepdim, name: jax.nn.logsumexp(x, axis=axes, keepdims=keepdim),
                        torch_fn=lambda t, x, axes, keepdim, name: t.logsumexp(x, axes, keepdim),
                        examples=_examples("LogsumexpBackward0", "LogsumexpBackward0")[1:]))


@SUM.publish(Names(function=("sum",), method=("sum",)))
def sum(input, dim=None, keepdim: bool = False, dtype=None):
    result = apply(SUM, input, attrs=_reduction_attrs(input, dim, keepdim, "SumBackward1", "SumBackward0"))
    return result if dtype is None else result.to(dtype)


@MEAN.publish(Names(function=("mean",), method=("mean",)))
def mean(input, dim=None, keepdim: bool = False):
    return apply(MEAN, input, attrs=_reduction_attrs(input, dim, keepdim, "MeanBackward1", "MeanBackward0"))


@MAX.publish(Names(function=("amax",), method=("amax",)))
def amax(input, dim=(), keepdim: bool = False):
    return apply(MAX, input, attrs=_reduction_attrs(input, dim, keepdim, "AmaxBackward0", "AmaxBackward0"))


@MAX.publish(Names(function=("max",), method=("max",)))
def max(input, dim=None, keepdim: bool = False):
    if isinstance(dim, Tensor):  # torch.max(a, b): the elementwise maximum
        return apply(MAXIMUM, input, dim)
    if dim is not None:
        raise NotImplementedError("max(input, dim) returns indices, which symgrad does not have; "
                                  "use amax(input, dim) for the values")
    return apply(MAX, input, attrs=_reduction_attrs(input, None, False, "MaxBackward1", "MaxBackward1"))


@LOGSUMEXP.publish(Names(function=("logsumexp",), method=("logsumexp",)))
def logsumexp(input, dim, keepdim: bool = False):
    return apply(LOGSUMEXP, input,
                 attrs=_reduction_attrs(input, dim, keepdim, "LogsumexpBackward0", "LogsumexpBackward0"))
