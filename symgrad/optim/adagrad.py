"""``torch.optim.Adagrad``: PyTorch's single-tensor update, op for op; its state is made at
construction, as PyTorch makes it."""
from __future__ import annotations

from symgrad import creation
from symgrad.optim.optimizer import PerParameter, at_least_zero


class Adagrad(PerParameter):
    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, fused=None):
        at_least_zero(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
                      initial_accumulator_value=initial_accumulator_value)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))
        for group in self.param_groups:  # PyTorch makes Adagrad's state at construction
            for p in group["params"]:
                self._start(p, group["initial_accumulator_value"])

    def _start(self, p, initial) -> None:
        self._start_count(p)
        self.state[p]["sum"] = creation.full_like(p, initial)

    def _update(self, p, group, grad) -> None:
        state = self.state[p]
        if not state:  # cleared since (``optimizer.state.clear()``): made again, from the defaults as PyTorch
            self._start(p, self.defaults["initial_accumulator_value"])
        step = self._next_step(p)
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        decayed_lr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"].addcmul_(grad, grad, value=1)
        std = state["sum"].sqrt().add_(group["eps"])
        p.addcdiv_(grad, std, value=-decayed_lr)
