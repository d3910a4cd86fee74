"""``torch.optim``: SGD, whose step records one fused update per parameter.

The update ``p - lr * g`` is one elementwise op, computed (like any in-place update under
``no_grad``) inside the next step's compiled program; ``zero_grad()`` sets gradients to None, as
PyTorch does by default, so the next backward writes them instead of adding.
"""
from __future__ import annotations

from symgrad.grad_mode import enable_grad, no_grad
from symgrad.ops.elementwise import elementwise
from symgrad.ops.registry import Example
from symgrad.inplace import write_values
from symgrad.tensor import Tensor, apply

SGD_UPDATE = elementwise("sgd_update", "SubBackward0", lambda p, g, lr: p - lr * g,
                         reference=lambda p, g, lr: p - lr * g, torch_fn=lambda t, p, g, lr: p - lr * g,
                         examples=(Example(((3, 4), (3, 4), ()), scalars={2: 0.1}),))


class Optimizer:
    """Parameter groups, ``zero_grad`` and ``state``, as ``torch.optim.Optimizer``."""

    def __init__(self, params, defaults: dict):
        params = list(params)
        groups = params if params and isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = [{**defaults, **group, "params": list(group["params"])} for group in groups]
        for group in self.param_groups:
            for p in group["params"]:
                if not isinstance(p, Tensor) or not p.is_leaf or not p.requires_grad:
                    raise ValueError("optimizer can only optimize leaf Tensors that require grad")
        self.state: dict = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p._grad = None
                elif p._grad is not None:
                    p._grad.zero_()


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay (PyTorch's formulas)."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"Invalid SGD hyperparameters: lr={lr}, momentum={momentum}, weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize))

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
                    buffer = self.state.get(id(p))
                    if buffer is None:
                        buffer = self.state[id(p)] = g.detach()
                    else:
                        write_values(buffer, (buffer * momentum + (1 - dampening) * g)._node)
                    g = g + momentum * buffer if group["nesterov"] else buffer
                write_values(p, apply(SGD_UPDATE, p, g, lr)._node)
        return loss
