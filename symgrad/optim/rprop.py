"""``torch.optim.Rprop``: resilient backpropagation, PyTorch's single-tensor update op for op.

Only the gradient's sign is used: each weight keeps its own step size, grown by ``etas[1]`` while
the gradient keeps its sign and shrunk by ``etas[0]`` when it flips (that step then skips the
weight).  The masked writes PyTorch makes are ``where`` selections here; a NaN product keeps its
NaN factor, as PyTorch's masks leave it."""
from __future__ import annotations

from symgrad import creation
from symgrad.ops.elementwise import where
from symgrad.optim.lbfgs import check_lr, scalar
from symgrad.optim.optimizer import PerParameter


class Rprop(PerParameter):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable: bool = False,
                 foreach=None, maximize: bool = False, differentiable: bool = False):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _update(self, p, group, grad) -> None:
        (eta_minus, eta_plus), (smallest, largest), state = group["etas"], group["step_sizes"], self.state[p]
        if not state:
            self._start_count(p)
            state["prev"] = creation.zeros_like(p)
            state["step_size"] = creation.full_like(grad, scalar(group["lr"]))
        self._next_step(p)
        sign = grad.mul(state["prev"]).sign()
        factor = where(sign.gt(0), eta_plus, where(sign.lt(0), eta_minus, where(sign.eq(0), 1.0, sign)))
        step_size = state["step_size"]
        step_size.mul_(factor).clamp_(smallest, largest)
        grad = where(factor.eq(eta_minus), 0.0, grad)
        p.addcmul_(grad.sign(), step_size, value=-1)
        state["prev"].copy_(grad)
