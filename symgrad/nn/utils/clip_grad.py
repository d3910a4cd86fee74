"""``torch.nn.utils``: gradient clipping, with PyTorch's formulas (the total norm over every
gradient, the scale ``max_norm / (total + 1e-6)`` clamped at 1), applied in place to ``.grad``."""
from __future__ import annotations

import math

from symgrad.creation import tensor
from symgrad.grad_mode import no_grad
from symgrad.ops.shape import stack
from symgrad.tensor import Tensor


def _gradients(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _vector_norm(t: Tensor, p: float) -> Tensor:
    return t.abs().amax() if math.isinf(p) else (t.abs() ** p).sum() ** (1.0 / p)


@no_grad()
def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None):
    """Scales every gradient in place so their joint norm is at most ``max_norm``; returns the
    norm before scaling, as a 0-d tensor."""
    grads = _gradients(parameters)
    if not grads:
        return tensor(0.0)
    norm_type = float(norm_type)
    total = _vector_norm(stack([_vector_norm(g, norm_type) for g in grads]), norm_type)  # PyTorch's order
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                           "so it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale)
    return total


@no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    for g in _gradients(parameters):
        g.clamp_(-clip_value, clip_value)
