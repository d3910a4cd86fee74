"""``torch.nn.functional``: losses, softmax, embeddings, padding and the functions PyTorch composes
(normalize, bilinear, dropout), each built from IR primitives or, where PyTorch composes a function
from other ops, composed the same way (so its grad_fn is PyTorch's).

The losses are numerically stable by construction: they are written through ``softplus``
and ``logsumexp``, which lower to stable JAX forms and whose derivatives (``sigmoid``,
``softmax``) are defined everywhere, including at a logit of exactly 0.  The exception is
``soft_margin_loss``, whose form is PyTorch's kernel's and overflows where PyTorch's does.
"""
from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp
from sympy.codegen.cfunctions import log1p

from symgrad import dtypes, engine, ir, random, replaying, selection
from symgrad.creation import draws_like, ones, ones_like, zeros, zeros_like
from symgrad.grad_mode import is_grad_enabled, no_grad
from symgrad.ir import ieee
from symgrad.ir.indexing import flip, take
from symgrad.ir.linalg import Pad, emit
from symgrad.nn.dropout import alpha_dropout, dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout  # noqa: F401
from symgrad.ops.convolution import avg_pool2d, avg_pool3d, batch_norm
from symgrad.ops.dims import dim_index
from symgrad.ops.elementwise import LOGSIGMOID, MINIMUM, elementwise, refuse_kernel, where
from symgrad.ops.linalg import bmm, einsum, linear
from symgrad.ops.shape import cat
from symgrad.ops.reductions import VECTOR_NORM, vector_norm
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
    count = int(np.prod(full_shape))  # the mean of no elements is NaN, as PyTorch's
    return p.assign(total / count if count else sp.nan, (), node.dtype.name, hint + "_mean")


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

def _infer_weighted(nodes, reduction, *flags):
    shape, dtype = _infer_pair(nodes[:2], reduction)
    if reduction == "none":
        shape = ir.broadcast_shapes(*(n.shape for n in nodes))
    return shape, dtype


def _logits_loss(x, t, *weights, flags):
    """(1 - t) x + l softplus(-x), l = (pos_weight - 1) t + 1, times weight: PyTorch's form."""
    has_weight, has_pos_weight = flags
    weights = list(weights)
    weight = weights.pop(0) if has_weight else None
    if has_pos_weight:
        log_weight = ieee.unevaluated(lambda pw, t: (pw - 1) * t + 1, weights.pop(0), t)
        loss = ieee.unevaluated(lambda x, t, lw: (1 - t) * x + lw * ir.softplus(-x), x, t, log_weight)
    else:
        loss = ir.binary_cross_entropy_with_logits(x, t)
    return loss if weight is None else ieee.unevaluated(lambda a, w: a * w, loss, weight)


# With a weight (or pos_weight) that PyTorch refuses to differentiate: no generic examples, whose
# inputs all require grad; tests/test_nn_functional.py checks them against PyTorch.
BCE_WITH_LOGITS_WEIGHTED = register(Op(
    "binary_cross_entropy_with_logits_weighted", "BinaryCrossEntropyWithLogitsBackward0", _infer_weighted,
    lambda p, node, x, t, *weights: _reduce(p, node, _logits_loss(x, t, *weights, flags=node.attrs[1:]), "bce")))

BCE_WEIGHTED = register(Op(
    "binary_cross_entropy_weighted", "BinaryCrossEntropyBackward0", _infer_weighted,
    lambda p, node, q, t, w: _reduce(p, node, ieee.unevaluated(lambda a, w: a * w, ir.binary_cross_entropy(q, t), w),
                                     "bce")))

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
    """``scaled(|d| - bound/2)`` where d is below -bound or above bound, ``inside`` elsewhere.  PyTorch's
    backward takes the inside's slope at +-bound and at NaN, its double backward none there (it keeps
    |d| < bound): there the gradient's carrier is linear, the outside's at +-bound, and at NaN d times
    a NaN slope that is not differentiated."""
    right, left = scaled(d - bound / 2), scaled(-d - bound / 2)
    value = ir.select(ir.less(d, -bound), left, ir.select(ir.greater(d, bound), right, inside))
    linear_at_nan = ir.select(ir.isnan(d), ieee.mul(ir.rerouted(d, sp.S.Zero), d), inside)
    carrier = ir.select(ir.less_equal(d, -bound), left, ir.select(ir.greater_equal(d, bound), right, linear_at_nan))
    return ir.rerouted(value, carrier)


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
    """PyTorch's checks that raise RuntimeError (nll_loss's public function makes its ValueError ones)."""
    logp, target = nodes
    if target.dtype is not dtypes.int64:
        raise ValueError(f"expected target dtype to be Long or Byte, but got {dtypes.torch_name(target.dtype)}")
    if not logp.shape:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    axis = _class_axis(logp.shape)
    expected = logp.shape[:axis] + logp.shape[axis + 1:]
    if len(logp.shape) <= 2 and len(target.shape) > 1:
        raise ValueError("0D or 1D target tensor expected, multi-target not supported")
    if target.shape != expected:
        raise ValueError(f"Expected target size {list(expected)}, got {list(target.shape)}")
    return (target.shape if reduction == "none" else ()), logp.dtype


def _nll(p, node, logp, target, *weight):
    """-w[target] log p[target] per item (w = 1 without a weight), zero where target ==
    ignore_index; the mean divides by the kept items' weights."""
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
    share = kept
    if weight:
        chosen = p.reduce_sum(p.assign(ir.select(picked, weight[0], 0), full, dtype, "class_weight"),
                              (len(full) - 1,), False)
        per_item = p.assign(per_item * chosen, target_shape, dtype, "weighted")
        share = p.assign(ir.select(kept, chosen, 0), target_shape, dtype, "kept_weight")
    per_item = p.assign(ir.select(kept, per_item, 0), target_shape, dtype, "nll_kept")
    if reduction == "none":
        return per_item
    everything = tuple(range(len(target_shape)))
    total = p.reduce_sum(per_item, everything, False, shape=target_shape)
    if reduction == "sum":
        return total
    return p.assign(total / p.reduce_sum(share, everything, False, shape=target_shape), (), dtype, "nll_mean")


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


NLL_WEIGHTED = register(Op(
    "nll_loss_weighted", NLL.grad_fn, lambda nodes, *attrs: _infer_nll(nodes[:2], *attrs), _nll))


def legacy_reduction(size_average, reduce, reduction: str, stacklevel: int = 3) -> str:
    """PyTorch's deprecated ``size_average`` and ``reduce``: given, they decide the reduction (with
    PyTorch's warning, at the loss's caller by default)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduction = "none" if reduce is not None and not reduce else "mean" if size_average else "sum"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
                  UserWarning, stacklevel=stacklevel)
    return reduction


def _reduction(reduction, size_average=None, reduce=None):
    """A loss's reduction, checked as PyTorch does before anything else; given, the deprecated
    ``size_average`` and ``reduce`` decide it instead (``legacy_reduction``)."""
    if size_average is not None or reduce is not None:
        return legacy_reduction(size_average, reduce, reduction, stacklevel=4)
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _unsupported(name, **options):
    given = [k for k, v in options.items() if v is not None]
    raise NotImplementedError(f"{name}: the argument(s) {', '.join(given)} are not supported by symgrad")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    reduction = _reduction(reduction, size_average, reduce)
    if target.shape != input.shape:  # public shapes: a replayed step's tensors have no node
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    if weight is None and pos_weight is None:
        return apply(BCE_WITH_LOGITS, input, target, attrs=(reduction,))
    _not_differentiable("binary_cross_entropy_with_logits", weight=weight, pos_weight=pos_weight)
    weights = [w for w in (weight, pos_weight) if w is not None]
    return apply(BCE_WITH_LOGITS_WEIGHTED, input, target, *weights,
                 attrs=(reduction, weight is not None, pos_weight is not None))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = legacy_reduction(size_average, reduce, reduction)
    if target.shape != input.shape:  # public shapes: a replayed step's tensors have no node
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) "
                         "is deprecated. Please ensure they have the same size.")
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {dtypes.torch_name(target.dtype)} but expected {dtypes.torch_name(input.dtype)}")
    for tensor, role in ((input, "input"), (target, "target")):
        values = _known_values(tensor)
        if values is not None and not np.all((values >= 0) & (values <= 1)):
            raise RuntimeError(f"all elements of {role} should be between 0 and 1")
    if weight is None:
        return apply(BCE, input, target, attrs=(_reduction(reduction),))
    _not_differentiable("binary_cross_entropy", weight=weight)
    ir.broadcast_shapes(tuple(weight.shape), tuple(input.shape))
    return apply(BCE_WEIGHTED, input, target, weight, attrs=(_reduction(reduction),))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = legacy_reduction(size_average, reduce, reduction)
    _same_shape_warning(input, target)
    if weight is not None:
        return _weighted((input - target) ** 2, weight, input, reduction, by_weights=True)
    return apply(MSE, input, target, attrs=(_reduction(reduction),))


def _weighted(errors, weight, input, reduction, by_weights):
    """PyTorch's weighted regression losses: each error times its weight (one per input element);
    their mean divides by the weights' sum (``by_weights``: l1, mse) or by their number (huber)."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    weighted = errors * weight
    if reduction == "mean" and by_weights:
        return weighted.sum() / weight.sum()
    if reduction not in REDUCTIONS:
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    return _reduced(weighted, reduction)


def _same_shape_warning(input, target):
    if target.shape != input.shape:  # public shapes: a replayed step's tensors have no node
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", UserWarning, stacklevel=3)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target| reduced, composed as PyTorch composes it (MeanBackward0, SumBackward0)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _same_shape_warning(input, target)
    errors = (input - target).abs()
    if weight is not None:
        return _weighted(errors, weight, input, reduction, by_weights=True)
    return _reduced(errors, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:  # PyTorch's too: the L1 loss
        return l1_loss(input, target, reduction=reduction)
    _same_shape_warning(input, target)
    return apply(SMOOTH_L1, input, target, attrs=(_reduction(reduction), float(beta)))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _same_shape_warning(input, target)
    if weight is not None:
        return _weighted(apply(HUBER, input, target, attrs=("none", float(delta))), weight, input, reduction,
                         by_weights=False)
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
    reduction = legacy_reduction(size_average, reduce, reduction)
    target = _nll_target(input, target)
    classes = input.shape[_class_axis(input.shape)] if input.ndim else 0
    _check_labels(target, classes, ignore_index)
    attrs = (_reduction(reduction), int(ignore_index))
    if weight is None:
        return apply(NLL, input, target, attrs=attrs)
    _not_differentiable("nll_loss_forward", weight=weight)
    if tuple(weight.shape) != (classes,):
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but "
                           f"got weight tensor of shape: {list(weight.shape)}")
    return apply(NLL_WEIGHTED, input, target, weight, attrs=attrs)


def _nll_target(input, target):
    """PyTorch's checks of nll_loss's shapes that raise ValueError, in its order; a 1-D input's
    target of one item is that item."""
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    batch = target.shape[0] if target.ndim else 0
    if input.ndim != 1 and input.shape[0] != batch:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({batch}).")
    if input.ndim == 1 and target.ndim == 1:
        if target.shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {target.shape[0]}")
        return target.reshape(())
    return target


def _not_differentiable(function, **inputs):
    """PyTorch refuses, when the call is made, a weight that requires grad."""
    from_grad_mode = is_grad_enabled()
    for name, tensor in inputs.items():
        if tensor is not None and tensor.requires_grad and from_grad_mode:
            raise RuntimeError(f"The function '{function}' is not differentiable with respect to argument '{name}'. "
                               "This input cannot have requires_grad True.")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax then nll_loss; class probabilities and label smoothing composed as PyTorch
    composes them (their grad_fns are the last op's)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    axis = _class_axis(input.shape)
    logp = log_softmax(input, axis)
    if tuple(target.shape) == tuple(input.shape):  # class probabilities
        if not target.dtype.is_floating_point:
            raise RuntimeError("Expected floating point type for target with class probabilities, got "
                               f"{dtypes.torch_name(target.dtype)}")
        return _cross_entropy_probabilities(logp, target, weight, _reduction(reduction), label_smoothing, axis)
    loss = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if not label_smoothing:
        return loss
    classes = input.shape[axis]
    layout = (classes,) + (1,) * (input.ndim - axis - 1)
    smooth = -(logp if weight is None else logp * weight.reshape(layout)).sum(axis)
    ignored = target == ignore_index
    smooth = where(ignored, 0.0, smooth)
    if reduction == "sum":
        smooth = smooth.sum()
    elif reduction == "mean":
        if weight is None:
            smooth = smooth.sum() / (~ignored).sum()
        else:
            picked = one_hot(where(ignored, 0, target), classes) * weight
            smooth = smooth.sum() / where(ignored, 0.0, picked.sum(-1)).sum()
    return (1 - label_smoothing) * loss + smooth * (label_smoothing / classes)


def _cross_entropy_probabilities(logp, target, weight, reduction, label_smoothing, axis):
    classes = logp.shape[axis]
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    product = logp * target
    if weight is not None:
        product = product * weight.reshape((classes,) + (1,) * (logp.ndim - axis - 1))
    if reduction == "none":
        return -product.sum(axis)
    if reduction == "sum":
        return -product.sum()
    return apply(DIV_SCALAR, -product.sum(), logp.numel() / classes)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """``cross_entropy(linear(input, W, b), target)``, PyTorch's reference path, with its checks in
    its order. ``options`` (PyTorch's chunked path) is checked and warned about as PyTorch does;
    the numbers are the reference path's (see ``LinearCrossEntropyOptions``)."""
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    batches, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions (in_features), "
                           f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(classes, *out_features)}, got {tuple(linear_bias.shape)}")
    if out_features and not batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires"
                           f" batched input, (N, {in_features}), got unbatched input with shape {tuple(input.shape)}")
    logits_shape = (*batches, classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    if options is not None:
        _chunking_options(options, input, target, linear_bias, classes, out_features, reduction, label_smoothing)
    flat = math.prod(out_features, start=classes)
    if out_features:
        linear_weight = linear_weight.reshape((flat, in_features))
        linear_bias = None if linear_bias is None else linear_bias.reshape(flat)
    logits = linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index, label_smoothing=label_smoothing)


def _chunking_options(options, input, target, linear_bias, classes, out_features, reduction, label_smoothing):
    """PyTorch's warning where its chunked path does not apply; where it does, its chunk-size
    conflict, and a refusal of an accumulation dtype other than the input's (symgrad computes the
    reference path, in the input's dtype)."""
    if out_features or reduction not in {"mean", "sum", "none"} or label_smoothing != 0.0 \
            or target.dtype != dtypes.int64:
        warnings.warn(
            "linear_cross_entropy: ``options`` ignored; chunked path needs reduction in {'mean','sum','none'}, "
            "label_smoothing == 0, target.dtype == int64, out_features == (). Got "
            f"reduction={reduction!r}, label_smoothing={label_smoothing}, target.dtype={target.dtype}, "
            f"out_features={tuple(out_features)}, tracing=False, linear_bias.shape="
            f"{tuple(linear_bias.shape) if linear_bias is not None else None}.", stacklevel=3)
        return
    batches = input.shape[0] if input.dim() == 2 else 1
    method = options.chunking_method
    if method not in (None, "auto") and options.batch_chunk_size is not None:
        factor = int(method.split(":", 1)[1]) if ":" in method else 1
        target_size = -(-batches // -(-classes // input.shape[-1]))
        chunk = max(1, min((1 << (target_size - 1).bit_length()) // factor, batches))
        if chunk != options.batch_chunk_size:
            raise ValueError(f"batch_chunk_size (={options.batch_chunk_size}) and chunking_method ('{method}') give "
                             f"different chunk sizes ({options.batch_chunk_size} vs {chunk}); pass only one.")
    accumulate = options.acc_dtype
    if accumulate is None and options.acc_policy == "auto" and input.dtype == dtypes.float16:
        accumulate = dtypes.float32
    if accumulate is not None and accumulate != input.dtype:
        raise NotImplementedError(f"linear_cross_entropy: symgrad computes in the input's dtype ({input.dtype}); "
                                  f"accumulating in {accumulate} (LinearCrossEntropyOptions.acc_dtype) is not "
                                  "supported")


def _known_values(tensor):
    """The tensor's values if they are already computed (a leaf's), else None: checks that
    PyTorch makes eagerly are made here whenever they cost no computation."""
    if not replaying.has_node(tensor):
        return None
    value = engine.known_array(tensor._node)
    return None if value is None else np.asarray(value)


def _check_labels(target, classes, ignore_index):
    """Out-of-range labels raise here, as PyTorch's IndexError; labels that are the result of an op
    are computed for it (a compiled program has no way to raise), except inside a JAX trace, unless
    they are drawn from labels that are all in range (symgrad.selection)."""
    if selection.all_within(target, 0, classes, ignore_index):
        return
    values = engine.concrete_array(target._node)
    bad = None if values is None else selection.outside(values, 0, classes, ignore_index)
    if bad is not None and bad.size:
        raise IndexError(f"Target {int(bad[0])} is out of bounds.")


# ------------------------------------------------------------ margin losses PyTorch writes as kernels


def _infer_soft_margin(nodes, reduction):
    """The loss takes the input's shape and dtype; a target may broadcast to the input, not beyond."""
    x, t = nodes
    shape = ir.broadcast_shapes(x.shape, t.shape)
    if shape != x.shape:
        raise ValueError(f"output with shape {list(x.shape)} doesn't match the broadcast shape {list(shape)}")
    return (x.shape if reduction == "none" else ()), x.dtype


SOFT_MARGIN = register(Op(
    "soft_margin_loss", "SoftMarginLossBackward0", _infer_soft_margin,
    # log1p(exp(-x t)) as PyTorch's kernel writes it: inf (and a NaN gradient) once exp overflows
    lambda p, node, x, t: _reduce(p, node, ieee.unevaluated(lambda x, t: log1p(sp.exp(-x * t)), x, t),
                                  "soft_margin")))


def _frames(shape) -> tuple:
    """(frames, classes) of a multi-class margin loss's input: (N, C); a (C,) or 0-d input is one frame."""
    return tuple(shape) if len(shape) == 2 else (1, shape[0] if shape else 1)


def _check_frames(shape):
    if not (len(shape) == 2 and shape[1] or len(shape) == 1 and shape[0] or not shape):
        raise ValueError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(shape)}")


def _check_long(target):
    if target.dtype is not dtypes.int64:
        raise ValueError(f"expected scalar type Long but found {dtypes.torch_name(target.dtype)}")


def _reduce_frames(p, node, per_frame, frames):
    """A margin loss's reduction of its per-frame losses (``none`` in the target's layout)."""
    reduction, dtype = node.attrs[0], node.dtype.name
    if reduction == "none":
        return p.reshape(per_frame, node.shape)
    total = p.reduce_sum(per_frame, (0,), False)
    if reduction == "sum":
        return total
    return p.assign(total / max(frames, 1), (), dtype, "margin_mean")


def _infer_multi_margin(nodes, reduction, power, margin):
    x, target, *weight = nodes
    _check_frames(x.shape)
    refuse_kernel("multi_margin_loss_cpu_kernel", dtypes.BOOLEAN, dtypes.INTEGER)(nodes)
    frames, classes = _frames(x.shape)
    _check_long(target)
    if len(target.shape) > 1 or int(np.prod(target.shape)) != frames:
        raise ValueError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                         f"samples (batch size). Expected target size [{frames}], but got {list(target.shape)}. "
                         f"Input has shape {list(x.shape)}.")
    if weight and int(np.prod(weight[0].shape)) != classes:
        raise ValueError(f"inconsistent weight size, expected {classes} but got {list(weight[0].shape)}")
    if weight and weight[0].dtype is not x.dtype:
        raise ValueError(f"expected scalar type {dtypes.torch_name(x.dtype)} but found "
                         f"{dtypes.torch_name(weight[0].dtype)}")
    return (target.shape if reduction == "none" else ()), x.dtype


def _multi_margin(p, node, x, target, *weight):
    """Per frame, the sum over the other classes i of max(0, margin - x[y] + x[i])**p (times
    weight[y]) over C.  A NaN never passes ``> 0``: PyTorch's kernel leaves it out of the loss."""
    reduction, power, margin = node.attrs
    frames, classes = _frames(node.inputs[0].shape)
    shape, dtype = (frames, classes), node.dtype.name
    x = p.reshape(x, shape)
    picked = p.one_hot(p.reshape(target, (frames,)), classes, dtype)
    chosen = p.reduce_sum(p.assign(ir.select(picked, x, 0), shape, dtype, "target_score"), (1,), True)
    z = p.assign(ieee.unevaluated(lambda c, x: margin - c + x, chosen, x), shape, dtype, "margin")
    hinge = z if power == 1 else ieee.unevaluated(lambda z: z * z, z)
    if weight:
        scale = p.reduce_sum(p.assign(ir.select(picked, weight[0], 0), shape, dtype, "class_weight"), (1,), True)
        hinge = ieee.unevaluated(lambda h, w: h * w, hinge, scale)
    counted = p.assign(ir.select(ir.greater(z, 0) * ir.equal(picked, 0), hinge, 0), shape, dtype, "hinge")
    per_frame = p.assign(p.reduce_sum(counted, (1,), False) / classes, (frames,), dtype, "per_frame")
    return _reduce_frames(p, node, per_frame, frames)


def _reference_multi_margin(x, t, reduction, power, margin):
    frames, classes = _frames(x.shape)
    x, t = x.reshape(frames, classes), t.reshape(frames, 1)
    z = margin - jnp.take_along_axis(x, t, 1) + x
    per_frame = jnp.where((z > 0) & (jnp.arange(classes) != t), z ** power, 0).sum(1) / classes
    return {"none": per_frame, "sum": per_frame.sum(), "mean": per_frame.mean()}[reduction]


MULTI_MARGIN = register(Op(
    "multi_margin_loss", "MultiMarginLossBackward0", _infer_multi_margin, _multi_margin,
    reference=_reference_multi_margin,
    torch_fn=lambda torch, x, t, reduction, power, margin: torch.nn.functional.multi_margin_loss(
        x, t, p=power, margin=margin, reduction=reduction),
    examples=(Example(((4, 5), (4,)), ("mean", 1, 1.0)), Example(((4, 5), (4,)), ("sum", 2, 0.5)),
              Example(((3, 5), (3,)), ("none", 1, 1.5))),
    domain=("real", "label")))


def _infer_multilabel_margin(nodes, reduction):
    x, target = nodes
    _check_frames(x.shape)
    refuse_kernel("multilabel_margin_loss_forward_out_frame", dtypes.BOOLEAN, dtypes.INTEGER)(nodes)
    _check_long(target)
    if target.shape != x.shape:
        raise ValueError(f"inconsistent target size: {list(target.shape)} for input of size: {list(x.shape)}")
    return (x.shape[:1] if reduction == "none" and len(x.shape) == 2 else ()), x.dtype


def _multilabel_margin(p, node, x, target):
    """Per frame, the sum over each listed target j (the labels before the first -1, a repeated one
    counted again) and each class i not listed of max(0, 1 - x[j] + x[i]), over C: every pair of
    classes is laid out, C**2 values a frame (the kernel's time, not its memory)."""
    frames, classes = _frames(node.inputs[0].shape)
    shape, dtype = (frames, classes), node.dtype.name
    x, target = p.reshape(x, shape), p.reshape(target, shape)
    ended = p.cumulative(p.assign(ir.less(target, 0), shape, dtype, "terminator"), 1)
    listed = p.reshape(p.assign(ir.equal(ended, 0), shape, dtype, "listed"), (*shape, 1))
    labels = p.one_hot(target, classes, dtype)  # (frame, position, class); a -1 has no class
    counts = p.reduce_sum(p.assign(labels * listed, (*shape, classes), dtype, "listed_label"), (1,), False)
    pair = (frames, classes, classes)  # (frame, target j, other i)
    times = p.reshape(counts, (frames, classes, 1))
    z = p.assign(ieee.unevaluated(lambda a, b: 1 - a + b, p.reshape(x, (frames, classes, 1)),
                                  p.reshape(x, (frames, 1, classes))), pair, dtype, "margin")
    others = p.reshape(counts, (frames, 1, classes))
    counted = ir.select(ir.greater(times, 0) * ir.equal(others, 0) * ir.greater(z, 0),
                        ieee.unevaluated(lambda z, n: z * n, z, times), 0)
    per_frame = p.reduce_sum(p.assign(counted, pair, dtype, "hinge"), (1, 2), False)
    return _reduce_frames(p, node, p.assign(per_frame / classes, (frames,), dtype, "per_frame"), frames)


def _reference_multilabel_margin(x, t, reduction):
    frames, classes = _frames(x.shape)
    x, t = x.reshape(frames, classes), t.reshape(frames, classes)
    listed = jnp.cumsum(t < 0, axis=1) == 0
    counts = (jax.nn.one_hot(t, classes) * listed[..., None]).sum(1)
    z = 1 - x[:, :, None] + x[:, None, :]
    counted = (counts[:, :, None] > 0) & (counts[:, None, :] == 0) & (z > 0)
    per_frame = jnp.where(counted, z * counts[:, :, None], 0).sum((1, 2)) / classes
    return {"none": per_frame, "sum": per_frame.sum(), "mean": per_frame.mean()}[reduction]


MULTILABEL_MARGIN = register(Op(
    "multilabel_margin_loss", "MultilabelMarginLossBackward0", _infer_multilabel_margin,
    _multilabel_margin, reference=_reference_multilabel_margin,
    torch_fn=lambda torch, x, t, reduction: torch.nn.functional.multilabel_margin_loss(x, t, reduction=reduction),
    examples=(Example(((3, 5), (3, 5)), ("mean",)), Example(((2, 5), (2, 5)), ("none",)),
              Example(((5,), (5,)), ("sum",))),
    domain=("real", "label")))


def _check_targets(target, low, high, message):
    """Targets outside [low, high) raise PyTorch's RuntimeError; computed now when they are an op's
    result (not inside a JAX trace, where a compiled program has no way to raise)."""
    values = engine.concrete_array(target._node)
    values = None if values is None else np.asarray(values)
    if values is not None and values.size and ((values < low) | (values >= high)).any():
        raise RuntimeError(message)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(legacy_reduction(size_average, reduce, reduction))
    _not_differentiable("soft_margin_loss", target=target)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{dtypes.torch_name(input.dtype)}")
    return apply(SOFT_MARGIN, input, target if target.dtype is input.dtype else target.to(input.dtype),
                 attrs=(reduction,))


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    reduction = _reduction(legacy_reduction(size_average, reduce, reduction))
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    _not_differentiable("multi_margin_loss", weight=weight)
    loss = apply(MULTI_MARGIN, input, target, *(() if weight is None else (weight,)),
                 attrs=(reduction, int(p), float(margin)))
    _check_targets(target, 0, _frames(input.shape)[1], "target out of range")
    return loss


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(legacy_reduction(size_average, reduce, reduction))
    loss = apply(MULTILABEL_MARGIN, input, target, attrs=(reduction,))
    _check_targets(target, -1, _frames(input.shape)[1], "argument #2 'target' is out of range")
    return loss


# ------------------------------------------------------------------------ embeddings, padding


def _infer_embedding(nodes, padding_idx):
    indices, weight = nodes
    if indices.dtype not in (dtypes.int64, dtypes.int32):
        raise ValueError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                         f"Long, Int; but got torch.{dtypes.torch_name(indices.dtype).capitalize()}Tensor instead "
                         "(while checking arguments for embedding)")
    if len(weight.shape) != 2:
        raise ValueError("'weight' must be 2-D")
    return (*indices.shape, weight.shape[1]), weight.dtype


def _build_embedding(p, node, indices, weight):
    """weight's rows at the indices; rows taken for ``padding_idx`` send no gradient back (their
    value selected from a copy that stops it)."""
    (padding_idx,) = node.attrs
    rows = take(p, weight, [indices], (0,))
    if padding_idx is None:
        return rows
    column = p.reshape(indices, (*node.inputs[0].shape, 1))
    padding = p.assign(ir.equal(column, padding_idx), p.shape_of(column), node.dtype.name, "is_padding")
    return p.assign(ir.select(padding, p.stop_gradient(rows), rows), node.shape, node.dtype.name, "embedded")


EMBEDDING = register(Op(
    "embedding", "EmbeddingBackward0", _infer_embedding, _build_embedding,
    reference=lambda indices, weight, padding_idx: weight[indices],  # padding_idx: tests/test_nn_functional.py
    torch_fn=lambda t, indices, weight, padding_idx: t.nn.functional.embedding(indices, weight, padding_idx),
    examples=(Example(((4,), (6, 3)), (None,)), Example(((2, 3), (5, 2)), (None,)), Example(((), (5, 4)), (None,))),
    domain=("label", "real")))


@EMBEDDING.publish(Names(functional=("embedding",)))
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        _unsupported("embedding", max_norm=max_norm, scale_grad_by_freq=scale_grad_by_freq or None,
                     sparse=sparse or None)
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = int(padding_idx) % rows
    values = engine.concrete_array(input._node)
    if values is not None and input.dtype.is_integer and np.asarray(values).size and \
            (np.min(values) < 0 or np.max(values) >= rows):
        raise IndexError("index out of range in self")
    return apply(EMBEDDING, input, weight, attrs=(padding_idx,))


def _infer_one_hot(nodes, classes):
    (x,) = nodes
    if x.dtype is not dtypes.int64:
        raise ValueError("one_hot is only applicable to index tensor of type LongTensor.")
    return (*x.shape, classes), dtypes.int64


ONE_HOT = register(Op(
    "one_hot", None, _infer_one_hot, lambda p, node, x: p.one_hot(x, node.attrs[0], "int64"), saves=False,
    reference=lambda x, classes: jax.nn.one_hot(x, classes, dtype=jnp.int64),
    torch_fn=lambda t, x, classes: t.nn.functional.one_hot(x, classes),
    examples=(Example(((4,),), (5,)), Example(((2, 3),), (6,))), domain=("label",)))


@ONE_HOT.publish(Names(functional=("one_hot",)))
def one_hot(tensor, num_classes=-1):
    """The classes from the values when ``num_classes`` is -1 (computed now, as PyTorch does)."""
    if tensor.dtype is not dtypes.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    values = engine.concrete_array(tensor._node)
    values = None if values is None else np.asarray(values)
    if values is not None and values.size:
        if values.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes != -1 and values.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    if num_classes == -1:
        if values is None:
            raise RuntimeError("one_hot with num_classes=-1 needs the values, which a JAX trace does not have")
        if not values.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(values.max()) + 1
    return apply(ONE_HOT, tensor, attrs=(int(num_classes),))


def _pads(pad, ndim):
    """F.pad's flat (lo, hi) pairs from the last axis back, as (lo, hi) per axis of the input."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {ndim}")
    pairs = [(0, 0)] * ndim
    for k in range(len(pad) // 2):
        pairs[ndim - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    return tuple(pairs)


def _pad_grad_fn(nodes, mode, pads, value):
    if mode == "constant":
        return "ConstantPadNdBackward0"
    if mode == "circular":
        return "CopySlices"
    padded = len(pads) - next(i for i, pair in enumerate(pads) if pair != (0, 0)) if any(
        pair != (0, 0) for pair in pads) else 1
    return f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{padded}DBackward0"


def _infer_pad(nodes, mode, pads, value):
    (x,) = nodes
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads))
    negative = [n for n in shape if n < 0]
    if negative:  # PyTorch 2.13's words differ by mode (where its kernel notices)
        raise ValueError({"constant": "narrow(): length must be non-negative.",
                          "circular": "Negative padding value is resulting in an empty dimension"}.get(
            mode, f"Trying to create tensor with negative dimension {negative[0]}: {list(shape)}"))
    return shape, x.dtype


def _build_pad(p, node, x):
    mode, pads, value = node.attrs
    if mode == "constant":
        return emit(p, Pad, x, ieee.constant(value), sp.Tuple(*(sp.Tuple(*q) for q in pads)), hint="padded")
    shape, dtype = list(node.inputs[0].shape), node.dtype.name
    for axis, (lo, hi) in enumerate(pads):
        if lo == hi == 0:
            continue
        if mode == "circular":
            x = _wrapped(p, x, shape, axis, lo, hi, dtype)
            continue
        n, grow_lo, grow_hi = shape[axis], max(lo, 0), max(hi, 0)
        if mode == "reflect":
            parts = [_flipped(p, x, shape, axis, 1, grow_lo + 1), x,
                     _flipped(p, x, shape, axis, n - grow_hi - 1, n - 1)]
        else:
            parts = [_edge(p, x, shape, axis, 0, grow_lo), x, _edge(p, x, shape, axis, n - 1, grow_hi)]
        parts = [part for part in parts if part is not None]
        shape[axis] = n + grow_lo + grow_hi
        if len(parts) > 1:
            x = p.concatenate(parts, axis, tuple(shape), dtype)
        if min(lo, hi) < 0:  # PyTorch's border comes from the whole input: pad, then crop
            x = _slab(p, x, shape, axis, grow_lo - lo, shape[axis] - grow_hi + hi)
            shape[axis] = n + lo + hi
    return x


def _wrapped(p, x, shape, axis, lo, hi, dtype):
    """Circular padding along ``axis`` (``shape`` updated in place): a negative pad crops first,
    then each side takes its entries from the other end of what is left."""
    if lo < 0 or hi < 0:
        start, stop = max(-lo, 0), shape[axis] - max(-hi, 0)
        x = _slab(p, x, shape, axis, start, stop)
        shape[axis], lo, hi = stop - start, max(lo, 0), max(hi, 0)
    n = shape[axis]
    parts = [_slab(p, x, shape, axis, n - lo, n) if lo else None, x, _slab(p, x, shape, axis, 0, hi) if hi else None]
    shape[axis] = n + lo + hi
    return p.concatenate([part for part in parts if part is not None], axis, tuple(shape), dtype)


def _slab(p, x, shape, axis, start, stop):
    spec = [(1, 0, n, 1) for n in shape]
    spec[axis] = (1, start, stop, 1)
    return p.index(x, spec)


def _flipped(p, x, shape, axis, start, stop):
    """x[start:stop] along ``axis``, reversed: a reflection's border."""
    if stop <= start:
        return None
    return flip(p, _slab(p, x, shape, axis, start, stop), (axis,))


def _edge(p, x, shape, axis, at, width):
    """The entry at ``at`` along ``axis``, repeated ``width`` times: a replication's border."""
    if not width:
        return None
    wide = list(shape)
    wide[axis] = width
    return p.broadcast_to(_slab(p, x, shape, axis, at, at + 1), tuple(wide))


def _reference_pad(x, mode, pads, value):
    if mode == "constant":
        return jax.lax.pad(x, jnp.asarray(value, x.dtype), [(lo, hi, 0) for lo, hi in pads])
    if mode == "circular":  # a negative pad crops first, as PyTorch's
        x = x[tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(x.shape, pads))]
        pads = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    return jnp.pad(x, pads, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])


PAD = register(Op(
    "pad", _pad_grad_fn, _infer_pad, _build_pad, reference=_reference_pad,
    torch_fn=lambda t, x, mode, pads, value: t.nn.functional.pad(
        x, tuple(v for lo_hi in reversed(pads[next((i for i, q in enumerate(pads) if q != (0, 0)), 0):])
                 for v in lo_hi), mode=mode, value=value if mode == "constant" else None),
    examples=(Example(((2, 3),), ("constant", ((0, 0), (1, 2)), 0.0)),
              Example(((2, 3, 4),), ("constant", ((1, 0), (0, 0), (2, -1)), 1.5)),
              Example(((2, 5),), ("reflect", ((0, 0), (2, 3)), 0.0)),
              Example(((1, 2, 4, 3),), ("reflect", ((0, 0), (0, 0), (1, 3), (2, 0)), 0.0)),
              Example(((2, 4),), ("replicate", ((0, 0), (3, 1)), 0.0)),
              Example(((1, 3, 2, 2),), ("replicate", ((0, 0), (0, 0), (2, 1), (0, 3)), 0.0)),
              Example(((1, 2, 3),), ("circular", ((0, 0), (0, 0), (2, 1)), 0.0)),
              Example(((1, 1, 3, 4),), ("circular", ((0, 0), (0, 0), (2, -1), (1, 2)), 0.0)))))


@PAD.publish(Names(functional=("pad",)))
def pad(input, pad, mode="constant", value=None):
    pads = _pads(pad, input.ndim)
    if mode == "constant":
        return apply(PAD, input, attrs=("constant", pads, 0.0 if value is None else value))
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    padded = len(pad) // 2
    if input.ndim not in (padded + 1, padded + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\nSupported combinations for "
            "non-constant padding:\n  - 2D or 3D input: padding size = 2 (pads last dimension)\n  - 3D or 4D input: "
            "padding size = 4 (pads last 2 dimensions)\n  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    for axis, (lo, hi) in enumerate(pads):
        if mode == "reflect" and (lo, hi) != (0, 0) and (lo >= input.shape[axis] or hi >= input.shape[axis]):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({lo}, {hi}) at dimension {axis} of input {list(input.shape)}")
        if mode == "circular" and max(lo, hi) > input.shape[axis] - max(-lo, 0) - max(-hi, 0):  # after a crop
            raise RuntimeError("Padding value causes wrapping around more than once.")
    if mode != "circular" and padded == 1 and input.shape[-1] + pad[0] + pad[1] <= 0:
        raise RuntimeError(f"input (W: {input.shape[-1]}) is too small. Calculated output W: "
                           f"{input.shape[-1] + pad[0] + pad[1]}")
    return apply(PAD, input, attrs=(mode, pads, 0.0))


# ---------------------------------------------------------------------------- compositions


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(norm, eps), composed as PyTorch composes it (DivBackward0)."""
    if out is not None:
        _unsupported("normalize", out=out)
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def bilinear(input1, input2, weight, bias=None):
    """x1 W x2 (+ b): an einsum over the last axes (ViewBackward0), the bias added (AddBackward0)."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if weight.ndim != 3 or weight.shape[1] != input1.shape[-1] or weight.shape[2] != input2.shape[-1]:
        raise RuntimeError(f"bilinear(): weight size does not match the input sizes: got weight {list(weight.shape)}, "
                           f"input1 {list(input1.shape)} and input2 {list(input2.shape)}")
    product = einsum("...i,oij,...j->...o", input1, weight, input2)
    return product if bias is None else product + bias


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) with Gumbel noise ``g = -log(exponential_())`` drawn as PyTorch
    draws it (seeded, its numbers); ``hard``: the one-hot of the argmax, with the soft sample's
    gradient (``y_hard - y_soft.detach() + y_soft``, PyTorch's straight-through composition)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -draws_like(logits, random.exponential).log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    y_hard = zeros_like(logits).scatter(dim, y_soft.max(dim, keepdim=True)[1], 1.0)
    return y_hard - y_soft.detach() + y_soft


# ------------------------------------------------------------- normalizations PyTorch composes


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """batch_norm of the input viewed as one sample of batch x channels (ViewBackward0 of
    NativeBatchNormBackward0), the parameters and statistics repeated per sample; each running
    statistic then becomes the samples' mean of its moved copies, as PyTorch's."""
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    if input.dim() < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(input.dim(), 1)}, "
                         f"{max(input.dim(), 1) - 1}], but got 1)")
    b, c = input.shape[:2]
    stats_and_params = [None if t is None else t.repeat(b) for t in (running_mean, running_var, weight, bias)]
    out = input.view(1, b * c, *input.shape[2:])
    if input.numel():  # (batch_norm's kernel does nothing to an empty input)
        out = batch_norm(out, *stats_and_params, use_input_stats, momentum, eps)
    with no_grad():
        for stats, copies in zip((running_mean, running_var), stats_and_params):
            if stats is not None:
                stats.copy_(copies.view(b, c).mean(0))
    return out.view(input.shape)


ADD_SCALAR = elementwise(  # PyTorch's C++ addition of a number (Python's x + 2 records AddBackward0)
    "add_scalar", "AddBackward1", lambda a, b: a + b, saves=False, reference=jnp.add,
    torch_fn=lambda t, a, b: t.ops.aten.add.Scalar(a, b), examples=(Example(((3, 4), ()), scalars={1: 0.5}),))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """input * rsqrt(mean of its squares over the last axes + eps) (* weight), composed as PyTorch's;
    a half input is normalized in float32 and cast back.  ``eps=None`` is the machine epsilon of
    the type it is computed in."""
    if not isinstance(normalized_shape, (tuple, list)):  # (torch.Size is a tuple)
        raise TypeError(f"rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not "
                        f"{type(normalized_shape).__name__}")
    shape = tuple(normalized_shape)
    _check_normalized_shape(input, shape, weight)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"rms_norm" not implemented for \'{dtypes.torch_name(input.dtype).capitalize()}\'')
    computing = dtypes.float32 if input.dtype is dtypes.float16 else input.dtype
    if weight is not None and weight.dtype is not input.dtype:  # (PyTorch warns once a process)
        warnings.warn(f"Mismatch dtype between input and weight: input dtype = {_cpp_name(input.dtype)}, weight dtype "
                      f"= {_cpp_name(weight.dtype)}, Cannot dispatch to fused implementation.", stacklevel=2)
    x = input.to(computing)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    eps = float(np.finfo(computing.numpy).eps) if eps is None else eps
    y = x * apply(ADD_SCALAR, x.pow(2).mean(axes, keepdim=True), eps).rsqrt()
    return (y if weight is None else y * weight).to(input.dtype)


def _check_normalized_shape(input, shape, weight):
    if len(shape) > input.dim():
        raise ValueError(f"Input tensor must have at least {len(shape)} dimensions, but got {input.dim()}")
    if not shape:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           "element, but got normalized_shape = []")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(shape)}")
    if tuple(input.shape[input.dim() - len(shape):]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * the mean square over ``size`` neighbouring channels) ** beta: the mean an
    average pool over the zero-padded channel axis, composed as PyTorch composes it."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {input.dim()} "
                         "dimensions)")
    if input.numel() == 0:
        return input
    squares, shape = input.mul(input), input.shape
    if input.dim() == 3:
        squares = pad(squares.unsqueeze(1), (0, 0, size // 2, (size - 1) // 2))
        mean = avg_pool2d(squares, (size, 1), stride=1).squeeze(1)
    else:
        squares = pad(squares.view(shape[0], 1, shape[1], shape[2], -1), (0, 0, 0, 0, size // 2, (size - 1) // 2))
        mean = avg_pool3d(squares, (size, 1, 1), stride=1).squeeze(1).view(shape)
    return input / mean.mul(alpha).add(k).pow(beta)


# ------------------------------------------------------------------ losses PyTorch composes

CLAMP_MIN = elementwise(
    "clamp_min", lambda nodes: "ClampMinBackward0" if not nodes[1].shape and nodes[1].op.name == "const"
    else "ClampMinBackward1", lambda x, low: ir.clamp(x, low, sp.oo),
    reference=lambda x, low: jnp.maximum(x, low), torch_fn=lambda t, x, low: t.clamp_min(x, low),
    examples=(Example(((3, 4), ()), scalars={1: 0.25}), Example(((5,), ()), scalars={1: -1.0}),
              Example(((2, 3), (3,)))),
    domain=("kinked", "real"), names=Names(function=("clamp_min",), method=("clamp_min",)))


CLAMP_MAX = elementwise(
    "clamp_max", lambda nodes: "ClampMaxBackward0" if not nodes[1].shape and nodes[1].op.name == "const"
    else "ClampMaxBackward1", lambda x, high: ir.clamp(x, -sp.oo, high),
    reference=lambda x, high: jnp.minimum(x, high), torch_fn=lambda t, x, high: t.clamp_max(x, high),
    examples=(Example(((3, 4), ()), scalars={1: 0.25}), Example(((5,), ()), scalars={1: -1.0}),
              Example(((2, 3), (3,)))),
    domain=("kinked", "real"), names=Names(function=("clamp_max",), method=("clamp_max",)))


DIV_SCALAR = elementwise(  # PyTorch's C++ division by a number (Python's x / 2 records DivBackward0)
    "div_scalar", "DivBackward1", lambda a, b: a / b, float_result=True, reference=jnp.true_divide,
    torch_fn=lambda t, a, b: t.ops.aten.div.Scalar(a, b), examples=(Example(((3, 4), ()), scalars={1: 2.5}),))


def _reduced(loss, reduction):
    return {"mean": loss.mean, "sum": loss.sum, "none": lambda: loss}[_reduction(reduction)]()


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target (log target - input), pointwise, as PyTorch writes it (xlogy: 0 where target is 0)."""
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = where(target == 0, 0.0, target * target.log()) - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduced(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    reduction = legacy_reduction(size_average, reduce, reduction)
    _reduction(reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:  # Stirling's term, where target > 1
        stirling = target * target.log() - target + 0.5 * (2 * np.pi * target).log()
        loss = loss + where(target <= 1, 0.0, stirling)
    return _reduced(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    return _reduced(_clamp_min(-target * (input1 - input2) + margin, 0), reduction)


def _clamp_min(input, min):
    return apply(CLAMP_MIN, input, min)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos where target is 1, max(cos - margin, 0) where it is -1, cos with PyTorch's 1e-12
    added to each squared magnitude."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if input1.shape != input2.shape:
        raise RuntimeError(f"cosine_embedding_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    dim = input1.ndim - 1
    products = (input1 * input2).sum(dim)
    magnitude1 = (input1 * input1).sum(dim) + 1e-12
    magnitude2 = (input2 * input2).sum(dim) + 1e-12
    cos = products / (magnitude1 * magnitude2).sqrt()
    zeros = zeros_like(cos)
    loss = where(target == 1, 1 - cos, zeros) + where(target == -1, _clamp_min(cos - margin, 0), zeros)
    return _reduced(loss, reduction)


# at::norm over dims, which pairwise_distance calls (Tensor.norm is linalg.vector_norm): the same
# values and gradients under PyTorch's other grad_fn name
DIM_NORM = register(Op("norm_dim", "NormBackward1", VECTOR_NORM.infer, VECTOR_NORM.build))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps over the last axis."""
    difference = x1 - x2 + eps
    return apply(DIM_NORM, difference, attrs=(int(p) if float(p).is_integer() else float(p),
                                              (difference.ndim - 1,) if difference.ndim else (), bool(keepdim)))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    reduction = legacy_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    positive_distance = pairwise_distance(anchor, positive, p, eps)
    negative_distance = pairwise_distance(anchor, negative, p, eps)
    if swap:
        negative_distance = apply(MINIMUM, negative_distance, pairwise_distance(positive, negative, p, eps))
    return _reduced(_clamp_min(margin + positive_distance - negative_distance, 0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(margin + d(a, p) - d(a, n), 0) for any distance d (``pairwise_distance`` by default)."""
    _reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    positive_distance, negative_distance = distance(anchor, positive), distance(anchor, negative)
    if swap:
        negative_distance = apply(MINIMUM, negative_distance, distance(positive, negative))
    return _reduced(_clamp_min(margin + positive_distance - negative_distance, 0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """max(margin - x, 0) where target is not 1, plus x where it is not -1, as PyTorch composes it
    (a target that is neither takes both)."""
    reduction = _reduction(legacy_reduction(size_average, reduce, reduction))
    zeros = zeros_like(input)
    loss = where(target != 1, _clamp_min(margin - input, 0), zeros) + where(target != -1, input, zeros)
    return _reduced(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The mean over classes of -(t log sigmoid(x) + (1 - t) log sigmoid(-x)), as PyTorch composes it
    (it checks the reduction only at the end)."""
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce, reduction)
    if not input.ndim:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    loss = -(target * apply(LOGSIGMOID, input) + (1 - target) * apply(LOGSIGMOID, -input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    return _reduced(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (input - target)**2 / var), composed as PyTorch composes it: var is clamped
    to eps in place under no_grad, so its gradient is taken at the clamped value, never masked."""
    var = _gaussian_variance(input, var)
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss += 0.5 * math.log(2 * math.pi)
    return _reduced(loss, reduction)


def _gaussian_variance(input, var):
    """PyTorch's checks of var (no negative entry; one per input entry, or one per row, or broadcast
    along a single axis), var laid out to broadcast."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        return var * ones_like(input)
    if not isinstance(var, Tensor):
        raise TypeError(f"any() received an invalid combination of arguments - got ({type(var < 0).__name__})")
    values = engine.concrete_array(var._node)
    if values is not None and (np.asarray(values) < 0).any():
        raise ValueError("var has negative entry/entries")
    if var.shape == input.shape:
        return var
    if input.shape[:-1] == var.shape:
        return var.unsqueeze(-1)
    if input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1:
        return var
    raise ValueError("var is of incorrect size")


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """<x1 / max(|x1|, eps), x2 / max(|x2|, eps)> along ``dim``, as PyTorch 2 composes it: each norm
    is clamped on its own, in place under no_grad, so the gradient flows as if it were not."""
    common = dtypes.promote([(x1.dtype, 2), (x2.dtype, 2)])
    if not common.is_floating_point:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{dtypes.torch_name(common)}")
    x1, x2 = (x if x.dtype.is_floating_point else x.to(common) for x in (x1, x2))
    try:
        shape = ir.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError as error:
        raise RuntimeError(str(error)) from None
    x1, x2 = (x if tuple(x.shape) == shape else x.expand(shape) for x in (x1, x2))
    norms = [vector_norm(x, 2, dim, True).clone() for x in (x1, x2)]
    with no_grad():
        for norm in norms:
            norm.clamp_(min=eps)
    return ((x1 / norms[0]) * (x2 / norms[1])).sum(dim)


# ------------------------------------------------------------------------------- attention


def _cpp_name(dtype) -> str:  # how SDPA's messages name dtypes (C++ type names)
    return dtypes.type_id(dtype)


def _check_attention(query, key, value, attn_mask, is_causal):
    """PyTorch's checks of SDPA's inputs (sdp_utils' validate_sdpa_input), in its words."""
    if not query.dtype == key.dtype == value.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{_cpp_name(query.dtype)} key.dtype: {_cpp_name(key.dtype)} and value.dtype: "
                           f"{_cpp_name(value.dtype)} instead.")
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                           f"{query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Float but found {dtypes.torch_name(query.dtype)}")
    if attn_mask is not None and attn_mask.dtype is not dtypes.bool_ and attn_mask.dtype is not query.dtype:
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                           f"attn_mask.dtype: {_cpp_name(attn_mask.dtype)} and  query.dtype: {_cpp_name(query.dtype)} "
                           "instead.")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")


def _grouped(key, value, heads):
    """GQA: each key/value head repeated (repeat_interleave on dim -3) to the query's head count."""
    if key.ndim < 3 or heads % key.shape[-3] or heads % value.shape[-3]:
        raise RuntimeError("Number of heads in key and value must divide the number of heads in query")

    def repeated(t):
        times = heads // t.shape[-3]
        lead, h, rest = t.shape[:-3], t.shape[-3], t.shape[-2:]
        return t.unsqueeze(-3).expand(*lead, h, times, *rest).reshape(*lead, h * times, *rest)
    return repeated(key), repeated(value)


def _safe_softmax(scores):
    """PyTorch's ``_safe_softmax``: softmax over the last axis, 0 (value and gradient) on rows that are
    all -inf. The softmax is taken of 0 on those rows, so no NaN reaches its derivative."""
    empty = (scores == float("-inf")).all(-1, keepdim=True)
    return where(empty, 0.0, softmax(where(empty, 0.0, scores), -1))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v as PyTorch's math path composes it: q and k each scaled by
    sqrt(scale), a boolean mask turned into 0 / -inf and added, rows masked whole giving 0, and the
    weights dropped out by ``dropout`` (PyTorch's seeded mask)."""
    _check_attention(query, key, value, attn_mask, is_causal)
    factor = math.sqrt(abs(scale) if scale is not None else 1 / math.sqrt(query.shape[-1]))
    q = query * (-factor if scale is not None and scale < 0 else factor)
    if is_causal:
        attn_mask = ones(query.shape[-2], key.shape[-2], dtype=dtypes.bool_).tril()
    if enable_gqa:
        key, value = _grouped(key, value, query.shape[-3])
    scores = q.matmul(key.transpose(-2, -1) * factor)
    if attn_mask is not None:
        if attn_mask.dtype is dtypes.bool_:
            attn_mask = where(attn_mask, 0.0, float("-inf")).to(query.dtype)
        scores = scores + attn_mask
    weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return weights.matmul(value)


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads) -> bool:
    """PyTorch's checks of MultiheadAttention's ranks; True for batched (3-D) input."""
    if query.dim() not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.dim()}-D query "
                             "tensor")
    batched = query.dim() == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.dim() != query.dim() or value.dim() != query.dim():
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {query.dim()}-D but found "
                             f"{key.dim()}-D and {value.dim()}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.dim() != query.dim() - 1:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` or {query.dim() - 1}-D "
                             f"but found {key_padding_mask.dim()}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.dim() not in (2, 3):
            raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                 f"{attn_mask.dim()}-D tensor instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return batched


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A boolean mask as a float one (-inf where True), as PyTorch's ``_canonical_mask``."""
    if mask is None:
        return None
    if mask.dtype is not dtypes.bool_ and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype is not other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both "
                      "instead.", stacklevel=3)
    if not mask.dtype.is_floating_point:
        mask = zeros_like(mask, dtype=target_type).masked_fill(mask, float("-inf"))
    return mask


def _in_projection(query, key, value, weights, biases):
    """q, k, v projected by their own weights (PyTorch's ``_in_projection``, with its checks)."""
    e = query.size(-1)
    for name, x, w in zip(("query", "key", "value"), (query, key, value), weights):
        if tuple(w.shape) != (e, x.size(-1)):
            raise AssertionError(f"expecting {name} weights shape of {(e, x.size(-1))}, but got {w.shape}")
    return [linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases)]


def _mha_masks(attn_mask, key_padding_mask, is_causal, need_weights, query):
    """PyTorch's mask preparation: both made float; a causal hint kept only where SDPA can use it."""
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        return None, key_padding_mask, True
    attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
    return attn_mask, key_padding_mask, is_causal and key_padding_mask is None


def _mha_attn_mask_3d(attn_mask, heads, tgt_len, src_len):
    if attn_mask.dim() == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                               f"{(tgt_len, src_len)}.")
        return attn_mask.unsqueeze(0)
    if attn_mask.dim() == 3:
        if tuple(attn_mask.shape) != (heads, tgt_len, src_len):
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                               f"{(heads, tgt_len, src_len)}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")


def _mha_project(query, key, value, in_proj_weight, in_proj_bias, separate):
    """The in-projection, packed (PyTorch's ``_in_projection_packed``: one weight's thirds) or separate."""
    if not separate:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        weights = in_proj_weight.chunk(3)
    else:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                                 f"{value.shape[:2]}")
        for name, w in zip("qkv", in_proj_weight):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        weights = in_proj_weight
    biases = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
    if separate:
        return _in_projection(query, key, value, weights, biases)
    return [linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases)]


def _mha_extend(k, v, attn_mask, key_padding_mask, bias_k, bias_v, add_zero_attn, bsz, heads, head_dim):
    """bias_k/bias_v appended along the sequence (k, v still (S, N, E)), then, after the heads are
    split, a zero key and value; each masked in as 0 (attended)."""
    if (bias_k is None) != (bias_v is None):
        raise AssertionError(f"bias_{'k' if bias_v is None else 'v'} is set but bias_{'v' if bias_v is None else 'k'}"
                             " is None")
    if bias_k is not None:
        k, v = cat([k, bias_k.repeat(1, bsz, 1)]), cat([v, bias_v.repeat(1, bsz, 1)])
    k = k.reshape(k.shape[0], bsz * heads, head_dim).transpose(0, 1)
    v = v.reshape(v.shape[0], bsz * heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        k = cat([k, zeros(bsz * heads, 1, head_dim, dtype=k.dtype)], 1)
        v = cat([v, zeros(bsz * heads, 1, head_dim, dtype=v.dtype)], 1)
    grown = (bias_k is not None) + bool(add_zero_attn)
    if grown:
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, grown))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, grown))
    return k, v, attn_mask, key_padding_mask


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's composition, step for step: (L, N, E) inputs (or unbatched (L, E)); returns the
    output and the attention weights (averaged over heads, or per head), or None for them."""
    if static_k is not None or static_v is not None:
        _unsupported("multi_head_attention_forward", static_k=static_k, static_v=static_v)
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    attn_mask, key_padding_mask, is_causal = _mha_masks(attn_mask, key_padding_mask, is_causal, need_weights, query)
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    weights = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight else in_proj_weight
    q, k, v = _mha_project(query, key, value, weights, in_proj_bias, use_separate_proj_weight)
    if attn_mask is not None:
        attn_mask = _mha_attn_mask_3d(attn_mask, bsz * num_heads, tgt_len, key.shape[0])
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k, v, attn_mask, key_padding_mask = _mha_extend(k, v, attn_mask, key_padding_mask, bias_k, bias_v, add_zero_attn,
                                                    bsz, num_heads, head_dim)
    src_len = k.size(1)
    if key_padding_mask is not None:
        attn_mask = _merge_key_padding(attn_mask, key_padding_mask, bsz, num_heads, src_len)
    dropout_p = dropout_p if training else 0.0
    attend = _mha_weighted if need_weights else _mha_sdpa
    output, weights = attend(q, k, v, attn_mask, dropout_p, is_causal, bsz, num_heads, tgt_len, src_len)
    output = linear(output, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    if weights is not None and average_attn_weights:
        weights = weights.mean(dim=1)
    if not batched:
        output = output.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return output, weights


def _merge_key_padding(attn_mask, key_padding_mask, bsz, heads, src_len):
    """The key padding mask (N, S), checked, repeated per head and added to the attention mask."""
    for axis, size in enumerate((bsz, src_len)):
        if key_padding_mask.shape[axis] != size:
            raise AssertionError(f"Expected key_padded_mask.shape[{axis}] to be {size}, but got "
                                 f"{key_padding_mask.shape[axis]}")
    key_padding_mask = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, heads, 1, src_len).reshape(
        bsz * heads, 1, src_len)
    return key_padding_mask if attn_mask is None else attn_mask + key_padding_mask


def _mha_weighted(q, k, v, attn_mask, dropout_p, is_causal, bsz, heads, tgt_len, src_len):
    """The weights made explicitly (softmax of the scaled scores plus the mask; a row masked whole is NaN)."""
    if is_causal and attn_mask is None:
        raise AssertionError("FIXME: is_causal not implemented for need_weights")
    scores = bmm(q * math.sqrt(1.0 / float(q.shape[-1])), k.transpose(-2, -1))
    weights = softmax(scores if attn_mask is None else attn_mask + scores, dim=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, p=dropout_p)
    output = bmm(weights, v).transpose(0, 1).reshape(tgt_len * bsz, heads * q.shape[-1])
    return output, weights.reshape(bsz, heads, tgt_len, src_len)


def _mha_sdpa(q, k, v, attn_mask, dropout_p, is_causal, bsz, heads, tgt_len, src_len):
    if attn_mask is not None:
        attn_mask = (attn_mask.unsqueeze(0) if attn_mask.size(0) == 1 and attn_mask.dim() == 3
                     else attn_mask.reshape(bsz, heads, -1, src_len))
    q, k, v = (x.reshape(bsz, heads, x.shape[1], x.shape[2]) for x in (q, k, v))
    output = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    return output.permute(2, 0, 1, 3).reshape(bsz * tgt_len, heads * q.shape[-1]), None
