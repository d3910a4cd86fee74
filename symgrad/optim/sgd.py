"""``torch.optim.SGD``, whose step records one fused update per parameter.

The update ``p - lr * g`` is one elementwise op, computed (like any in-place update under
``no_grad``) inside the next step's compiled program; ``zero_grad()`` sets gradients to None, as
PyTorch does by default, so the next backward writes them instead of adding.
"""
from __future__ import annotations

from symgrad.grad_mode import enable_grad, no_grad
from symgrad.inplace import write_result
from symgrad.ops.elementwise import elementwise
from symgrad.ops.registry import Example
from symgrad.optim.optimizer import Optimizer, at_least_zero, update
from symgrad.nodes import lazy_leaf
from symgrad.tensor import Tensor

SGD_UPDATE = elementwise("sgd_update", "SubBackward0", lambda p, g, lr: p - lr * g,
                         reference=lambda p, g, lr: p - lr * g, torch_fn=lambda t, p, g, lr: p - lr * g,
                         examples=(Example(((3, 4), (3, 4), ()), scalars={2: 0.1}),))


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay (PyTorch's formulas)."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False, foreach=None,
                 differentiable: bool = False, fused=None):
        at_least_zero(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():  # the closure recomputes the loss with history, as in PyTorch
                loss = closure()
        for group in self.param_groups:
            lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
            for p in group["params"]:
                if p._grad is None:
                    continue
                g = p._grad
                if group["maximize"]:
                    g = -g
                if group["weight_decay"]:
                    g = g + group["weight_decay"] * p
                if momentum:  # the buffer is a leaf updated in place, so it is computed with p and never chains
                    buffer = self.state[p].get("momentum_buffer")
                    if buffer is None:
                        # a leaf of its own (PyTorch clones the gradient): not a view of .grad
                        buffer = self.state[p]["momentum_buffer"] = Tensor(lazy_leaf(g._node))
                    else:
                        write_result(buffer, buffer * momentum + (1 - dampening) * g)
                    g = g + momentum * buffer if group["nesterov"] else buffer
                update(p, SGD_UPDATE, p, g, lr)
        return loss
