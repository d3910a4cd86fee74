"""``torch.optim.ASGD``: averaged SGD, PyTorch's single-tensor update op for op.

SGD whose rate ``eta`` decays with the step, plus a running average ``ax`` of the weights that
starts after ``t0`` steps.  ``eta`` and ``mu`` are float32 state tensors PyTorch reads back as
Python numbers each step; they are read here the same way (``Optimizer._advance``), so a value
set by hand or loaded is the one used."""
from __future__ import annotations

import numpy as np

from symgrad import dtypes
from symgrad.optim.lbfgs import check_lr, scalar
from symgrad.optim.optimizer import PerParameter, at_least_zero, zeros_like


class ASGD(PerParameter):
    def __init__(self, params, lr=1e-2, lambd: float = 1e-4, alpha: float = 0.75, t0: float = 1e6,
                 weight_decay: float = 0, foreach=None, maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        check_lr(lr)
        at_least_zero(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _update(self, p, group, grad) -> None:
        lr, lambd, alpha, t0, state = scalar(group["lr"]), group["lambd"], group["alpha"], group["t0"], self.state[p]
        if not state:
            self._start_count(p)
            self._start_count(p, "eta", float(np.asarray(lr, dtypes.get_default_dtype().numpy)))
            self._start_count(p, "mu", 1.0)
            state["ax"] = zeros_like(p)
        step = self._next_step(p)
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        eta = self._advance(p, "eta", float)  # (read)
        p.mul_(1 - lambd * eta)
        p.add_(grad, alpha=-eta)
        mu = self._advance(p, "mu", float)
        if mu != 1:
            state["ax"].add_(p.sub(state["ax"]).mul_(mu))
        else:
            state["ax"].copy_(p)
        self._advance(p, "eta", lambda _: _held(state["eta"], lr / ((1 + lambd * lr * step) ** alpha)))
        self._advance(p, "mu", lambda _: _held(state["mu"], 1 / max(1, step - t0)))


def _held(tensor, value) -> float:
    """``value`` as ``tensor`` holds it: PyTorch reads its float32 state back as a Python float."""
    return float(np.asarray(value, tensor.dtype.numpy))
