"""``torch.autograd``: ``backward`` and ``grad`` as functions, and ``torch.autograd.functional``."""
from symgrad.autograd import functional
from symgrad.autograd.gradients import backward, grad
from symgrad.grad_mode import enable_grad, no_grad, set_grad_enabled

__all__ = ["backward", "grad", "functional", "enable_grad", "no_grad", "set_grad_enabled"]
