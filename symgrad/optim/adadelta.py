"""``torch.optim.Adadelta``: PyTorch's single-tensor update, op for op: the step is the ratio of
two running RMS (of past updates, of gradients), so ``lr`` is only a scale (1.0 by default)."""
from __future__ import annotations

from symgrad.optim.optimizer import PerParameter, at_least_zero, zeros_like


class Adadelta(PerParameter):
    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach=None, *, capturable: bool = False, maximize: bool = False, differentiable: bool = False):
        at_least_zero(lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        at_least_zero(eps=eps, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    def _update(self, p, group, grad) -> None:
        rho, eps, state = group["rho"], group["eps"], self.state[p]
        if not state:
            self._start_count(p)
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        self._next_step(p)
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-group["lr"])
