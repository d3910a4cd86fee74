"""Activation modules: each is its ``nn.functional`` form with the arguments stored, printed as
PyTorch prints it (``LeakyReLU(negative_slope=0.2)``)."""
from __future__ import annotations

from symgrad import creation
from symgrad.nn import functional as F
from symgrad.nn import init
from symgrad.nn.module import Module, Parameter


class _Elementwise(Module):
    """An activation with no arguments: ``forward`` is ``function(input)``."""

    function = ""  # its name in nn.functional (published there after this module loads)

    def forward(self, input):
        return getattr(F, self.function)(input)


class _InPlaceable(Module):
    """An activation whose only argument is ``inplace``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_InPlaceable):
    def forward(self, input):
        return input.relu_() if self.inplace else F.relu(input)


class ReLU6(_InPlaceable):
    def forward(self, input):
        return F.relu6(input, self.inplace)


class SELU(_InPlaceable):
    def forward(self, input):
        return F.selu(input)


class SiLU(_InPlaceable):
    def forward(self, input):
        return F.silu(input)


class Mish(_InPlaceable):
    def forward(self, input):
        return F.mish(input)


class Hardsigmoid(_InPlaceable):
    def forward(self, input):
        return F.hardsigmoid(input)


class Hardswish(_InPlaceable):
    def forward(self, input):
        return F.hardswish(input)


class Tanh(_Elementwise):
    function = "tanh"


class Sigmoid(_Elementwise):
    function = "sigmoid"


class LogSigmoid(_Elementwise):
    function = "logsigmoid"


class Softsign(_Elementwise):
    function = "softsign"


class Tanhshrink(_Elementwise):
    function = "tanhshrink"


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class _Shrink(Module):
    """Hardshrink, Softshrink: a function of the input and ``lambd``."""

    function = ""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return getattr(F, self.function)(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    function = "hardshrink"


class Softshrink(_Shrink):
    function = "softshrink"


class RReLU(Module):
    """Random slopes in training mode (PyTorch's numbers for a seeded generator), their mean in eval."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """A learned slope below 0: one for all channels, or one per channel (dim 1)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(creation.zeros(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold`` (PyTorch's)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class _Along(Module):
    """Softmax, LogSoftmax, Softmin: a function along ``dim``."""

    function = ""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return getattr(F, self.function)(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_Along):
    function = "softmax"


class LogSoftmax(_Along):
    function = "log_softmax"


class Softmin(_Along):
    function = "softmin"


class Softmax2d(Module):
    """Softmax over the channels of a (C, H, W) or (N, C, H, W) input."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3)
