"""``torch.nn.functional``: activations and losses, each built from IR primitives.

The losses are numerically stable by construction: they are written through ``softplus``
and ``logsumexp``, which lower to stable JAX forms and whose derivatives (``sigmoid``,
``softmax``) are defined everywhere, including at a logit of exactly 0.
"""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from symgrad import dtypes, engine, ir
from symgrad.ir import ieee
from symgrad.ops.dims import dim_index
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply

REDUCTIONS = ("mean", "sum", "none")


def _reduce(p, node, elementwise, hint):
    """Apply the loss's reduction (its first attribute) to the per-element loss."""
    reduction = node.attrs[0]
    full_shape = ir.broadcast_shapes(*(i.shape for i in node.inputs))
    per_element = p.assign(elementwise, full_shape, node.dtype.name, hint)
    if reduction == "none":
        return per_element
    axes = tuple(range(len(full_shape)))
    total = p.reduce_sum(per_element, axes, False, shape=full_shape)
    if reduction == "sum":
        return total
    return p.assign(total / max(int(np.prod(full_shape)), 1), (), node.dtype.name, hint + "_mean")


def _infer_pair(nodes, reduction, *parameters):
    a, b = nodes
    dtype = a.dtype if a.dtype is b.dtype else dtypes.promote([(a.dtype, 2), (b.dtype, 2)])
    return (ir.broadcast_shapes(a.shape, b.shape) if reduction == "none" else ()), dtype


def _loss_examples(*shapes):
    return tuple(Example((s, s), (r,)) for s in shapes for r in REDUCTIONS)


BCE_WITH_LOGITS = register(Op(
    "binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0", _infer_pair,
    lambda p, node, x, t: _reduce(p, node, ir.binary_cross_entropy_with_logits(x, t), "bce"),
    reference=lambda x, t, reduction: _reference_reduce(jnp.logaddexp(x, 0.0) - x * t, reduction),
    torch_fn=lambda torch, x, t, reduction: torch.nn.functional.binary_cross_entropy_with_logits(x, t, reduction=reduction),
    examples=_loss_examples((3,), (4, 5)), domain=("real", "unit")))

BCE = register(Op(
    "binary_cross_entropy", "BinaryCrossEntropyBackward0", _infer_pair,
    lambda p, node, q, t: _reduce(p, node, ir.binary_cross_entropy(q, t), "bce"),
    reference=lambda q, t, reduction: _reference_reduce(
        (t - 1) * jnp.maximum(jnp.log1p(-q), -100) - t * jnp.maximum(jnp.log(q), -100), reduction),
    torch_fn=lambda torch, q, t, reduction: torch.nn.functional.binary_cross_entropy(q, t, reduction=reduction),
    examples=_loss_examples((3,), (4, 5)), domain=("unit", "unit")))

MSE = register(Op(
    "mse_loss", "MseLossBackward0", _infer_pair,
    lambda p, node, a, b: _reduce(p, node, ieee.unevaluated(lambda a, b: (a - b) ** 2, a, b), "squared_error"),
    reference=lambda a, b, reduction: _reference_reduce((a - b) ** 2, reduction),
    torch_fn=lambda torch, a, b, reduction: torch.nn.functional.mse_loss(a, b, reduction=reduction),
    examples=_loss_examples((3,), (4, 5))))


def _smooth_l1(d, beta):
    """|d| - beta/2 beyond beta, else d**2 / (2 beta): PyTorch's branches (NaN takes the quadratic one)."""
    return _outside(d, beta, d ** 2 / (2 * beta), lambda excess: excess)


def _huber(d, delta):
    """delta (|d| - delta/2) beyond delta, else d**2 / 2."""
    return _outside(d, delta, d ** 2 / 2, lambda excess: delta * excess)


def _outside(d, bound, inside, scaled):
    """``scaled(|d| - bound/2)`` where d is below -bound or above bound, ``inside`` elsewhere."""
    above = ir.select(ir.greater(d, bound), scaled(d - bound / 2), inside)
    return ir.select(ir.less(d, -bound), scaled(-d - bound / 2), above)


def _difference_loss(name, grad_fn, form, numpy_form, *default_parameters):
    """A loss of ``input - target`` elementwise, with PyTorch's reductions; its parameters
    (``beta``, ``delta``) are attributes after the reduction."""
    return register(Op(
        name, grad_fn, _infer_pair,
        lambda p, node, a, b: _reduce(p, node, ieee.unevaluated(lambda a, b: form(a - b, *node.attrs[1:]), a, b),
                                      name),
        reference=lambda a, b, reduction, *params: _reference_reduce(numpy_form(a - b, *params), reduction),
        torch_fn=lambda torch, a, b, reduction, *params: getattr(torch.nn.functional, name)(
            a, b, reduction=reduction, **dict(zip(("beta",) if name == "smooth_l1_loss" else ("delta",), params))),
        examples=tuple(Example(e.shapes, (*e.attrs, *default_parameters)) for e in _loss_examples((3,), (4, 5))),
        domain=("kinked", "real")))


SMOOTH_L1 = _difference_loss(
    "smooth_l1_loss", "SmoothL1LossBackward0", _smooth_l1,
    lambda d, beta: jnp.where(jnp.abs(d) < beta, d ** 2 / (2 * beta), jnp.abs(d) - beta / 2), 0.5)
HUBER = _difference_loss(
    "huber_loss", "HuberLossBackward0", _huber,
    lambda d, delta: jnp.where(jnp.abs(d) < delta, d ** 2 / 2, delta * (jnp.abs(d) - delta / 2)), 1.5)


def _reference_reduce(values, reduction):
    return {"mean": jnp.mean, "sum": jnp.sum, "none": lambda v: v}[reduction](values)


def _infer_softmax(nodes, dim):
    (x,) = nodes
    if not x.dtype.is_floating_point:
        raise ValueError(f"softmax is not implemented for integer dtype {x.dtype}")
    return x.shape, x.dtype


LOG_SOFTMAX = register(Op(
    "log_softmax", "LogSoftmaxBackward0", _infer_softmax,
    lambda p, node, x: p.softmax(x, node.attrs[0], log=True),
    reference=lambda x, dim: jax.nn.log_softmax(x, axis=dim),
    torch_fn=lambda torch, x, dim: torch.nn.functional.log_softmax(x, dim),
    examples=(Example(((4, 5),), (1,)), Example(((4, 5),), (0,)), Example(((6,),), (0,)))))

SOFTMAX = register(Op(
    "softmax", "SoftmaxBackward0", _infer_softmax, lambda p, node, x: p.softmax(x, node.attrs[0]),
    reference=lambda x, dim: jax.nn.softmax(x, axis=dim),
    torch_fn=lambda torch, x, dim: torch.nn.functional.softmax(x, dim),
    examples=(Example(((4, 5),), (1,)), Example(((6,),), (0,)))))


def _class_axis(logp_shape) -> int:
    """Classes are axis 1 of (N, C, d1, ...) and axis 0 of an unbatched (C,)."""
    return 1 if len(logp_shape) >= 2 else 0


def _infer_nll(nodes, reduction, ignore_index):
    logp, target = nodes
    if not target.dtype.is_integer:
        raise ValueError(f"expected scalar type Long but found {target.dtype.name.capitalize()} (nll_loss target)")
    if not logp.shape:
        raise ValueError("nll_loss: input must have a class dimension, got a 0-dim tensor")
    axis = _class_axis(logp.shape)
    expected = logp.shape[:axis] + logp.shape[axis + 1:]
    if target.shape != expected:
        raise ValueError(f"Expected target of shape {expected} for input of shape {logp.shape} "
                         f"(input (N, C, d1, ...) takes target (N, d1, ...)), got {target.shape}")
    return (target.shape if reduction == "none" else ()), logp.dtype


def _nll(p, node, logp, target):
    """-log p[target] per item, zero where target == ignore_index; the mean is over the others."""
    reduction, ignore_index = node.attrs
    logp_shape, target_shape = node.inputs[0].shape, node.inputs[1].shape
    axis = _class_axis(logp_shape)
    order = [*(i for i in range(len(logp_shape)) if i != axis), axis]
    moved = p.permute(logp, order)  # classes last: the one-hot's layout
    picked = p.one_hot(target, logp_shape[axis], node.dtype.name)
    full = (*target_shape, logp_shape[axis])
    dtype = node.dtype.name
    kept = p.assign(1 - ir.equal(target, ignore_index), target_shape, dtype, "kept")
    # Selected, not multiplied by masks: another class's inf or NaN, and an ignored item's, stay
    # out of the loss and its gradient, as PyTorch's gather and skip keep them.
    per_item = p.reduce_sum(p.assign(ir.select(picked, -moved, 0), full, dtype, "nll"), (len(full) - 1,), False)
    per_item = p.assign(ir.select(kept, per_item, 0), target_shape, dtype, "nll_kept")
    if reduction == "none":
        return per_item
    everything = tuple(range(len(target_shape)))
    total = p.reduce_sum(per_item, everything, False, shape=target_shape)
    if reduction == "sum":
        return total
    return p.assign(total / p.reduce_sum(kept, everything, False, shape=target_shape), (), dtype, "nll_mean")


def _reference_nll(logp, t, reduction, ignore_index):
    logp = jnp.moveaxis(logp, _class_axis(logp.shape), -1)
    kept = t != ignore_index
    per_item = -jnp.take_along_axis(logp, jnp.where(kept, t, 0)[..., None], axis=-1)[..., 0] * kept
    return {"mean": per_item.sum() / kept.sum(), "sum": per_item.sum(), "none": per_item}[reduction]


NLL = register(Op(
    "nll_loss", lambda nodes, reduction, ignore: "NllLoss2DBackward0" if len(nodes[0].shape) >= 3 else "NllLossBackward0",
    _infer_nll, _nll, reference=_reference_nll,
    torch_fn=lambda torch, logp, t, reduction, ignore: torch.nn.functional.nll_loss(logp, t, reduction=reduction,
                                                                                  ignore_index=ignore),
    examples=(Example(((4, 5), (4,)), ("mean", -100)), Example(((4, 5), (4,)), ("sum", -100)),
              Example(((4, 5), (4,)), ("none", -100)), Example(((4, 5), (4,)), ("mean", 2)),
              Example(((5,), ()), ("mean", -100)), Example(((2, 5, 3), (2, 3)), ("mean", -100))),
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
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {dtypes.torch_name(target.dtype)} but expected {dtypes.torch_name(input.dtype)}")
    values = _known_values(input)
    if values is not None and not np.all((values >= 0) & (values <= 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    return apply(BCE, input, target, attrs=(_reduction(reduction),))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        _unsupported("mse_loss", size_average=size_average, reduce=reduce)
    _same_shape_warning(input, target)
    return apply(MSE, input, target, attrs=(_reduction(reduction),))


def _same_shape_warning(input, target):
    if target._node.shape != input._node.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", UserWarning, stacklevel=3)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """|input - target| reduced, composed as PyTorch composes it (MeanBackward0, SumBackward0)."""
    if size_average is not None or reduce is not None:
        _unsupported("l1_loss", size_average=size_average, reduce=reduce)
    _same_shape_warning(input, target)
    errors = (input - target).abs()
    return {"mean": errors.mean, "sum": errors.sum, "none": lambda: errors}[_reduction(reduction)]()


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    if size_average is not None or reduce is not None:
        _unsupported("smooth_l1_loss", size_average=size_average, reduce=reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:  # PyTorch's too: the L1 loss
        return l1_loss(input, target, reduction=reduction)
    _same_shape_warning(input, target)
    return apply(SMOOTH_L1, input, target, attrs=(_reduction(reduction), float(beta)))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    if weight is not None:
        _unsupported("huber_loss", weight=weight)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _same_shape_warning(input, target)
    return apply(HUBER, input, target, attrs=(_reduction(reduction), float(delta)))


@LOG_SOFTMAX.publish(Names(function=("log_softmax",), method=("log_softmax",)))
def log_softmax(input, dim=None, dtype=None):
    return _softmax(LOG_SOFTMAX, input, dim, dtype)


@SOFTMAX.publish(Names(function=("softmax",), method=("softmax",)))
def softmax(input, dim=None, dtype=None):
    return _softmax(SOFTMAX, input, dim, dtype)


@SOFTMAX.publish(Names(functional=("softmin",)))
def softmin(input, dim=None, dtype=None):
    """softmax(-x), composed as PyTorch composes it (SoftmaxBackward0)."""
    return _softmax(SOFTMAX, -input if dtype is None else -input.to(dtype), dim, None)


def _softmax(op, input, dim, dtype):
    if dim is None:
        raise TypeError(f"{op.name}() missing the dim argument")
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{op.name}_lastdim_kernel_impl" not implemented for '
                                  f"'{dtypes.torch_name(input.dtype)}'")
    return apply(op, input, attrs=(dim_index(dim, input.ndim),))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    if weight is not None or size_average is not None or reduce is not None:
        _unsupported("nll_loss", weight=weight, size_average=size_average, reduce=reduce)
    _check_labels(target, input.shape[_class_axis(input.shape)] if input.ndim else 0, ignore_index)
    return apply(NLL, input, target, attrs=(_reduction(reduction), int(ignore_index)))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    if isinstance(target, Tensor) and target.dtype.is_floating_point:
        raise NotImplementedError("cross_entropy with class probabilities as target is not supported; "
                                  "pass class indices (int64)")
    if label_smoothing:
        raise NotImplementedError("cross_entropy: label_smoothing is not supported by symgrad")
    return nll_loss(log_softmax(input, _class_axis(input.shape)), target, weight, size_average, ignore_index,
                    reduce, reduction)


def _known_values(tensor):
    """The tensor's values if they are already computed (a leaf's), else None: checks that
    PyTorch makes eagerly are made here whenever they cost no computation."""
    value = engine.known_array(tensor._node)
    return None if value is None else np.asarray(value)


def _check_labels(target, classes, ignore_index):
    """Out-of-range labels raise here, as PyTorch's IndexError; labels that are the result of an op
    are computed for it (a compiled program has no way to raise), except inside a JAX trace."""
    values = engine.concrete_array(target._node)
    values = None if values is None else np.asarray(values)
    if values is not None and values.size:
        bad = values[((values < 0) | (values >= classes)) & (values != ignore_index)]
        if bad.size:
            raise IndexError(f"Target {int(bad[0])} is out of bounds.")
