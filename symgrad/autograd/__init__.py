"""``torch.autograd``: ``backward`` and ``grad`` as functions, custom ``Function``s, ``functional``, the
checks under PyTorch's names, anomaly detection and the old ``Variable``."""
from symgrad.autograd import forward_ad, function, functional
from symgrad.autograd.anomaly import detect_anomaly, set_detect_anomaly
from symgrad.autograd.function import Function
from symgrad.autograd.gradients import backward, grad
from symgrad.autograd.variable import Variable
from symgrad.check.gradcheck import GradcheckError, gradcheck, gradgradcheck
from symgrad.grad_mode import enable_grad, no_grad, set_grad_enabled

__all__ = ["backward", "grad", "functional", "function", "Function", "gradcheck", "gradgradcheck", "GradcheckError",
           "Variable", "detect_anomaly", "set_detect_anomaly", "enable_grad", "no_grad", "set_grad_enabled"]
