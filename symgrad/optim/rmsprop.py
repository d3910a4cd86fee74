"""``torch.optim.RMSprop``: PyTorch's single-tensor update, op for op (centered, momentum)."""
from __future__ import annotations

from symgrad import creation
from symgrad.optim.optimizer import PerParameter, at_least_zero


class RMSprop(PerParameter):
    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0,
                 momentum: float = 0, centered: bool = False, capturable: bool = False, foreach=None,
                 maximize: bool = False, differentiable: bool = False):
        at_least_zero(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _update(self, p, group, grad) -> None:
        state = self.state[p]
        if not state:
            self._start_count(p)
            state["square_avg"] = creation.zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = creation.zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = creation.zeros_like(p)
        self._next_step(p)
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        alpha = group["alpha"]
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(group["eps"])
        if group["momentum"] > 0:
            buffer = state["momentum_buffer"]
            buffer.mul_(group["momentum"]).addcdiv_(grad, avg)
            p.add_(buffer, alpha=-group["lr"])
        else:
            p.addcdiv_(grad, avg, value=-group["lr"])
