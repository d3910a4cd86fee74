"""``torch.optim.Adamax``, ``NAdam`` and ``RAdam``: Adam's moments with another step (the
infinity norm; Nesterov momentum with a decaying schedule; a variance rectification), each
PyTorch's single-tensor update op for op, the per-step numbers computed as Python floats as
PyTorch computes them.  Like Adam's, the updates run inside the next step's compiled program."""
from __future__ import annotations

import numpy as np

from symgrad.ops.functions import LERP
from symgrad.optim.adam import SECOND_MOMENT
from symgrad.optim.optimizer import PerParameter, at_least_zero, update, zeros_like


def _check_betas(betas) -> None:
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


def _decay(p, group, grad):
    """Weight decay: into the gradient (L2), or decoupled (the weights shrink first, as AdamW's)."""
    lr, weight_decay = group["lr"], group["weight_decay"]
    if not weight_decay:
        return grad
    if group.get("decoupled_weight_decay"):
        p.mul_(1 - lr * weight_decay)
        return grad
    return grad.add(p, alpha=weight_decay)


class Adamax(PerParameter):
    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 foreach=None, *, maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        at_least_zero(lr=lr, eps=eps)
        _check_betas(betas)
        at_least_zero(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _update(self, p, group, grad) -> None:
        (beta1, beta2), state = group["betas"], self.state[p]
        if not state:
            self._start_count(p)
            state["exp_avg"] = zeros_like(p)
            state["exp_inf"] = zeros_like(p)
        step = self._next_step(p)
        grad = _decay(p, group, grad)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        update(exp_avg, LERP, exp_avg, grad, 1 - beta1)
        exp_inf.copy_(exp_inf.mul(beta2).maximum(grad.abs().add(group["eps"])))
        p.addcdiv_(exp_avg, exp_inf, value=-(group["lr"] / (1 - beta1 ** step)))


class NAdam(PerParameter):
    """Adam with Nesterov momentum whose coefficient ``mu`` warms up with ``momentum_decay``; the
    running product of the ``mu`` is a float32 state tensor, read back as PyTorch reads it."""

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        at_least_zero(lr=lr, eps=eps)
        _check_betas(betas)
        at_least_zero(weight_decay=weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _update(self, p, group, grad) -> None:
        lr, (beta1, beta2), decay, state = group["lr"], group["betas"], group["momentum_decay"], self.state[p]
        if not state:
            self._start_count(p)
            self._start_count(p, "mu_product", 1.0)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        step = self._next_step(p)
        bias_correction2 = 1 - beta2 ** step
        grad = _decay(p, group, grad)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        kind = state["mu_product"].dtype.numpy  # the product is rounded to its tensor's dtype, mu too
        mu_product = self._advance(p, "mu_product",
                                   lambda product: float(np.asarray(product, kind) * np.asarray(mu, kind)))
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        update(exp_avg, LERP, exp_avg, grad, 1 - beta1)
        update(exp_avg_sq, SECOND_MOMENT, exp_avg_sq, grad, beta2, 1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt().add_(group["eps"])
        p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
        p.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - mu_product * mu_next))


class RAdam(PerParameter):
    """Adam whose adaptive step is rectified by the variance of its second moment, and left out
    (plain momentum SGD) while that variance is intractable (``rho_t <= 5``: the first steps)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 decoupled_weight_decay: bool = False, *, foreach=None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False):
        at_least_zero(lr=lr, eps=eps)
        _check_betas(betas)
        at_least_zero(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    def _update(self, p, group, grad) -> None:
        lr, (beta1, beta2), state = group["lr"], group["betas"], self.state[p]
        if not state:
            self._start_count(p)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        step = self._next_step(p)
        grad = _decay(p, group, grad)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        update(exp_avg, LERP, exp_avg, grad, 1 - beta1)
        update(exp_avg_sq, SECOND_MOMENT, exp_avg_sq, grad, beta2, 1 - beta2)
        bias_correction2 = 1 - beta2 ** step
        corrected = exp_avg / (1 - beta1 ** step)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2 ** step / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            # PyTorch's ``number / tensor`` is the tensor's reciprocal times the number
            adaptive = exp_avg_sq.sqrt().add_(group["eps"]).reciprocal_().mul_(bias_correction2 ** 0.5)
            p.add_(corrected * lr * adaptive * rect, alpha=-1.0)
        else:
            p.add_(corrected * lr, alpha=-1.0)
