"""``torch.nn.functional``: activations and losses, each built from IR primitives.

The losses are numerically stable by construction: they are written through ``softplus``
and ``logsumexp``, which lower to stable JAX forms and whose derivatives (``sigmoid``,
``softmax``) are defined everywhere, including at a logit of exactly 0.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes, ir
from symgrad.ops.elementwise import logsigmoid, relu, sigmoid, softplus, tanh
from symgrad.ops.reductions import dim_index
from symgrad.ops.registry import Example, Op, register
from symgrad.tensor import Tensor, apply

__all__ = ["relu", "sigmoid", "tanh", "softplus", "logsigmoid", "log_softmax", "softmax",
           "binary_cross_entropy_with_logits", "binary_cross_entropy", "mse_loss", "nll_loss",
           "cross_entropy"]

REDUCTIONS = ("mean", "sum", "none")


def _reduce(p, node, elementwise, hint):
    """Apply the loss's reduction (its first attribute) to the per-element loss."""
    reduction = node.attrs[0]
    full_shape = node.inputs[0].shape
    per_element = p.assign(elementwise, full_shape, node.dtype.name, hint)
    if reduction == "none":
        return per_element
    axes = tuple(range(len(full_shape)))
    total = p.reduce_sum(per_element, axes, False, shape=full_shape)
    if reduction == "sum":
        return total
    return p.assign(total / max(int(np.prod(full_shape)), 1), (), node.dtype.name, hint + "_mean")


def _infer_pair(nodes, reduction):
    a, b = nodes
    dtype = a.dtype if a.dtype is b.dtype else dtypes.promote([(a.dtype, 2), (b.dtype, 2)])
    return (a.shape if reduction == "none" else ()), dtype


def _loss_examples(*shapes):
    return tuple(Example((s, s), (r,)) for s in shapes for r in REDUCTIONS)


BCE_WITH_LOGITS = register(Op(
    "binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0", _infer_pair,
    lambda p, node, x, t: _reduce(p, node, ir.softplus(x) - x * t, "bce"),
    reference=lambda x, t, reduction: _reference_reduce(jnp.logaddexp(x, 0.0) - x * t, reduction),
    torch_fn=lambda torch, x, t, reduction: torch.nn.functional.binary_cross_entropy_with_logits(x, t, reduction=reduction),
    examples=_loss_examples((3,), (4, 5)), domain=("real", "unit")))

BCE = register(Op(
    "binary_cross_entropy", "BinaryCrossEntropyBackward0", _infer_pair,
    lambda p, node, q, t: _reduce(p, node, -(t * _clamped_log(q) + (1 - t) * _clamped_log(1 - q)), "bce"),
    reference=lambda q, t, reduction: _reference_reduce(
        -(t * jnp.maximum(jnp.log(q), -100) + (1 - t) * jnp.maximum(jnp.log(1 - q), -100)), reduction),
    torch_fn=lambda torch, q, t, reduction: torch.nn.functional.binary_cross_entropy(q, t, reduction=reduction),
    examples=_loss_examples((3,), (4, 5)), domain=("unit", "unit")))

MSE = register(Op(
    "mse_loss", "MseLossBackward0", _infer_pair,
    lambda p, node, a, b: _reduce(p, node, (a - b) ** 2, "squared_error"),
    reference=lambda a, b, reduction: _reference_reduce((a - b) ** 2, reduction),
    torch_fn=lambda torch, a, b, reduction: torch.nn.functional.mse_loss(a, b, reduction=reduction),
    examples=_loss_examples((3,), (4, 5))))


def _clamped_log(x):
    """PyTorch clamps BCE's logarithms at -100 so that a probability of 0 or 1 stays finite."""
    return sp.Max(sp.log(x), -100)


def _reference_reduce(values, reduction):
    return {"mean": jnp.mean, "sum": jnp.sum, "none": lambda v: v}[reduction](values)


def _infer_softmax(nodes, dim):
    (x,) = nodes
    if not x.dtype.is_floating_point:
        raise ValueError(f"softmax is not implemented for integer dtype {x.dtype}")
    return x.shape, x.dtype


def _log_softmax(p, node, x):
    (dim,) = node.attrs
    if not node.shape:  # one element: its log-probability is 0
        return p.assign(x - x, (), node.dtype.name, "log_softmax")
    lse = p.logsumexp(x, (dim,), True)
    return p.assign(x - lse, node.shape, node.dtype.name, "log_softmax")


LOG_SOFTMAX = register(Op(
    "log_softmax", "LogSoftmaxBackward0", _infer_softmax, _log_softmax,
    reference=lambda x, dim: jax.nn.log_softmax(x, axis=dim),
    torch_fn=lambda torch, x, dim: torch.nn.functional.log_softmax(x, dim),
    examples=(Example(((4, 5),), (1,)), Example(((4, 5),), (0,)), Example(((6,),), (0,)))))

SOFTMAX = register(Op(
    "softmax", "SoftmaxBackward0", _infer_softmax,
    lambda p, node, x: p.assign(sp.exp(x - (p.logsumexp(x, node.attrs, True) if node.shape else x)),
                                node.shape, node.dtype.name, "softmax"),
    reference=lambda x, dim: jax.nn.softmax(x, axis=dim),
    torch_fn=lambda torch, x, dim: torch.nn.functional.softmax(x, dim),
    examples=(Example(((4, 5),), (1,)), Example(((6,),), (0,)))))


def _infer_nll(nodes, reduction):
    logp, target = nodes
    if target.dtype.kind != 1:
        raise ValueError(f"expected scalar type Long but found {target.dtype.name.capitalize()} (nll_loss target)")
    if len(logp.shape) != 2 or target.shape != logp.shape[:1]:
        raise ValueError(f"Expected input batch_size ({logp.shape[0] if logp.shape else 0}) to match target "
                         f"batch_size ({target.shape[0] if target.shape else 0}); nll_loss takes input (N, C) "
                         f"and target (N,)")
    return ((logp.shape[0],) if reduction == "none" else ()), logp.dtype


def _nll(p, node, logp, target):
    reduction = node.attrs[0]
    n, classes = node.inputs[0].shape
    picked = p.one_hot(target, classes, node.dtype.name)
    per_row = p.reduce_sum(p.assign(-picked * logp, (n, classes), node.dtype.name, "nll"), (1,), False)
    if reduction == "none":
        return per_row
    total = p.reduce_sum(per_row, (0,), False, shape=(n,))
    return total if reduction == "sum" else p.assign(total / n, (), node.dtype.name, "nll_mean")


NLL = register(Op(
    "nll_loss", "NllLossBackward0", _infer_nll, _nll,
    reference=lambda logp, t, reduction: _reference_reduce(
        -jnp.take_along_axis(logp, t[:, None], axis=1)[:, 0], reduction),
    torch_fn=lambda torch, logp, t, reduction: torch.nn.functional.nll_loss(logp, t, reduction=reduction),
    examples=(Example(((4, 5), (4,)), ("mean",)), Example(((4, 5), (4,)), ("sum",)),
              Example(((4, 5), (4,)), ("none",))),
    domain=("real", "label")))


def _reduction(reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _same_size(input, target):
    if target._node.shape != input._node.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")


def _unsupported(name, **options):
    given = [k for k, v in options.items() if v is not None]
    raise NotImplementedError(f"{name}: the argument(s) {', '.join(given)} are not supported by symgrad")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    if weight is not None or size_average is not None or reduce is not None or pos_weight is not None:
        _unsupported("binary_cross_entropy_with_logits", weight=weight, size_average=size_average,
                     reduce=reduce, pos_weight=pos_weight)
    _same_size(input, target)
    return apply(BCE_WITH_LOGITS, input, target, attrs=(_reduction(reduction),))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if weight is not None or size_average is not None or reduce is not None:
        _unsupported("binary_cross_entropy", weight=weight, size_average=size_average, reduce=reduce)
    _same_size(input, target)
    return apply(BCE, input, target, attrs=(_reduction(reduction),))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        _unsupported("mse_loss", size_average=size_average, reduce=reduce)
    _same_size(input, target)
    return apply(MSE, input, target, attrs=(_reduction(reduction),))


def log_softmax(input, dim=None, dtype=None):
    if dim is None:
        raise TypeError("log_softmax() missing the dim argument")
    return apply(LOG_SOFTMAX, input if dtype is None else input.to(dtype), attrs=(dim_index(dim, input.ndim),))


def softmax(input, dim=None, dtype=None):
    if dim is None:
        raise TypeError("softmax() missing the dim argument")
    return apply(SOFTMAX, input if dtype is None else input.to(dtype), attrs=(dim_index(dim, input.ndim),))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    if weight is not None or size_average is not None or reduce is not None:
        _unsupported("nll_loss", weight=weight, size_average=size_average, reduce=reduce)
    _check_labels(target, input.shape[-1] if input.ndim else 0)
    return apply(NLL, input, target, attrs=(_reduction(reduction),))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    if isinstance(target, Tensor) and target.dtype.is_floating_point:
        raise NotImplementedError("cross_entropy with class probabilities as target is not supported; "
                                  "pass class indices (int64)")
    if label_smoothing:
        raise NotImplementedError("cross_entropy: label_smoothing is not supported by symgrad")
    return nll_loss(log_softmax(input, 1), target, weight, size_average, ignore_index, reduce, reduction)


def _check_labels(target, classes):
    """Out-of-range labels raise here, as PyTorch's IndexError, when the labels are already known."""
    node = target._node
    if node.value is not None and not isinstance(node.value, jax.core.Tracer) and node.dtype.kind == 1 \
            and np.size(node.value):
        values = np.asarray(node.value)
        bad = values[(values < 0) | (values >= classes)]
        if bad.size:
            raise IndexError(f"Target {int(bad[0])} is out of bounds.")
