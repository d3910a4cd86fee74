"""``torch.optim.Adafactor``: PyTorch's single-tensor update op for op.

Adam's second moment kept factored for a matrix (a row and a column mean of the squared gradient,
whose outer product estimates it), no first moment, a step relative to the weights' RMS and
clipped by the update's own RMS.  Those RMS are read as Python numbers, as PyTorch reads them."""
from __future__ import annotations

import numpy as np

from symgrad import creation
from symgrad.optim.lbfgs import scalar
from symgrad.optim.optimizer import PerParameter
from symgrad.tensor import Tensor


class Adafactor(PerParameter):
    def __init__(self, params, lr=1e-2, beta2_decay: float = -0.8, eps=(None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach=None, maximize: bool = False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        for fails, message in ((not 0.0 <= lr, f"Learning rate should be >= 0 but is: {lr}"),
                               (not 0.0 >= beta2_decay, f"beta2_decay should be <= 0 but is: {beta2_decay}"),
                               (eps[0] is not None and not 0.0 <= eps[0], f"epsilon1 should be >= 0 but is: {eps[0]}"),
                               (not 0.0 <= eps[1], f"epsilon2 should be >= 0 but is: {eps[1]}"),
                               (not 1.0 <= d, f"Clipping threshold d should be >= 1 but is: {d}"),
                               (not 0.0 <= weight_decay, f"weight_decay should be >= 0 but is: {weight_decay}")):
            if fails:
                raise ValueError(message)
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, group, grad) -> None:
        if p.is_complex():
            raise RuntimeError("Adafactor does not support complex parameters")
        lr, state = scalar(group["lr"]), self.state[p]
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = float(np.finfo(p.dtype.numpy).eps)
        if not state:
            self._start_count(p)
            if grad.dim() > 1:
                state["row_var"] = creation.zeros((*grad.shape[:-1], 1), dtype=grad.dtype)
                state["col_var"] = creation.zeros((*grad.shape[:-2], 1, grad.shape[-1]), dtype=grad.dtype)
            else:
                state["variance"] = creation.zeros_like(grad)
        step = self._next_step(p)
        one_minus_beta2 = step ** group["beta2_decay"]
        rho = min(lr, 1 / step ** 0.5)
        alpha = max(eps2, p.norm(2).item() / p.numel() ** 0.5) * rho
        if group["weight_decay"]:
            p.mul_(1 - lr * group["weight_decay"])
        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_(grad.norm(dim=-1, keepdim=True).square_().div_(grad.size(-1)), one_minus_beta2)
            col_var.lerp_(grad.norm(dim=-2, keepdim=True).square_().div_(grad.size(-2)), one_minus_beta2)
            estimate = (row_var @ col_var).div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
        else:
            state["variance"].lerp_(grad * grad, one_minus_beta2)
            estimate = state["variance"].clone()
        change = estimate.clamp_(min=eps1 * eps1).rsqrt_().mul_(grad)
        clip = max(1.0, change.norm(2).item() / (change.numel() ** 0.5 * group["d"]))
        p.add_(change, alpha=-alpha / clip)
