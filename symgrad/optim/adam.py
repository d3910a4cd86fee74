"""``torch.optim.Adam`` and ``AdamW``: PyTorch's single-tensor update, op for op (``lerp_``,
``mul_`` then ``addcmul_``, the bias corrections as Python floats, ``sqrt``, ``/``, ``add_(eps)``,
``addcdiv_``), so the weights after N steps are PyTorch's to rounding.

Recorded as three elementwise ops per parameter (the first moment's ``lerp_``, the second
moment, the parameter), computed inside the next step's compiled program like any update under
``no_grad``.  The bias corrections change every step: they are 0-d tensor inputs
(``optimizer.per_step``), so every step records the same kinds and ``backward`` replays one program.
"""
from __future__ import annotations

import sympy as sp

from symgrad.ops.elementwise import elementwise
from symgrad.ops.functions import LERP
from symgrad.ops.registry import Example
from symgrad.optim.optimizer import PerParameter, at_least_zero, per_step, update, zeros_like

SECOND_MOMENT = elementwise(
    "adam_exp_avg_sq", "AddcmulBackward0", lambda v, g, beta2, weight: v * beta2 + weight * g * g,
    reference=lambda v, g, beta2, weight: v * beta2 + weight * g * g,
    torch_fn=lambda t, v, g, beta2, weight: (v * beta2).addcmul(g, g, value=weight),
    examples=(Example(((3, 4), (3, 4), (), ()), scalars={2: 0.999, 3: 0.001}),))

UPDATE = elementwise(
    "adam_update", "AddcdivBackward0",
    lambda p, m, v, step, root, eps: p + step * m / (sp.sqrt(v) / root + eps),
    reference=lambda p, m, v, step, root, eps: p + step * m / (v ** 0.5 / root + eps),
    torch_fn=lambda t, p, m, v, step, root, eps: p.addcdiv(m, v.sqrt() / root + eps, value=step),
    domain=("real", "real", "positive", "real", "positive", "positive"),
    examples=(Example(((3, 4), (3, 4), (3, 4), (), (), ()), scalars={3: -0.01, 4: 0.3, 5: 1e-8}),))


class Adam(PerParameter):
    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 amsgrad: bool = False, *, foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None, decoupled_weight_decay: bool = False):
        at_least_zero(lr=lr, eps=eps, weight_decay=weight_decay)
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _update(self, p, group, grad) -> None:
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        state = self.state[p]
        if not state:
            self._start_count(p)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(p)
        if weight_decay:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        update(exp_avg, LERP, exp_avg, grad, 1 - beta1)
        update(exp_avg_sq, SECOND_MOMENT, exp_avg_sq, grad, beta2, 1 - beta2)
        step = self._next_step(p)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"]
            second.copy_(second.maximum(exp_avg_sq))
        dtype = p.dtype  # not p._node: a replayed step's parameter is carried, its node a read
        update(p, UPDATE, p, exp_avg, second, per_step(-(lr / bias_correction1), dtype),
               per_step(bias_correction2_sqrt, dtype), eps)


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` first), default 1e-2."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 amsgrad: bool = False, *, maximize: bool = False, foreach=None, capturable: bool = False,
                 differentiable: bool = False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
