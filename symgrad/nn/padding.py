"""The padding modules: each is ``F.pad`` with its mode and a stored padding, the padding given as
one int (the same on every side) or as a sequence kept as it is, as PyTorch keeps it (a short one
pads fewer axes; a wrong length is F.pad's error at the call).  Only the circular ones check the
input's rank themselves; the others leave it to F.pad, whose errors are PyTorch's."""
from __future__ import annotations

from symgrad.nn import functional as F
from symgrad.nn.module import Module


class _PadNd(Module):
    """``F.pad(input, padding, mode)``; subclasses name the mode and the padded axes ``n``."""

    mode = ""
    n = 0

    def __init__(self, padding):
        super().__init__()
        self.padding = tuple(padding) if hasattr(padding, "__iter__") else (padding,) * (2 * self.n)

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    mode = "constant"

    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _Zeros:
    """Put before a ConstantPad: its value is 0.0 and its repr the padding alone (a ZeroPad is-a ConstantPad)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _CircularPadNd(_PadNd):
    mode = "circular"

    def forward(self, input):
        if input.dim() not in (self.n + 1, self.n + 2):
            raise ValueError(f"expected {self.n + 1}D or {self.n + 2}D input (got {input.dim()}D input)")
        return super().forward(input)


class _ReflectionPadNd(_PadNd):
    mode = "reflect"


class _ReplicationPadNd(_PadNd):
    mode = "replicate"


class ConstantPad1d(_ConstantPadNd):
    n = 1


class ConstantPad2d(_ConstantPadNd):
    n = 2


class ConstantPad3d(_ConstantPadNd):
    n = 3


class ZeroPad1d(_Zeros, ConstantPad1d):
    pass


class ZeroPad2d(_Zeros, ConstantPad2d):
    pass


class ZeroPad3d(_Zeros, ConstantPad3d):
    pass


class ReflectionPad1d(_ReflectionPadNd):
    n = 1


class ReflectionPad2d(_ReflectionPadNd):
    n = 2


class ReflectionPad3d(_ReflectionPadNd):
    n = 3


class ReplicationPad1d(_ReplicationPadNd):
    n = 1


class ReplicationPad2d(_ReplicationPadNd):
    n = 2


class ReplicationPad3d(_ReplicationPadNd):
    n = 3


class CircularPad1d(_CircularPadNd):
    n = 1


class CircularPad2d(_CircularPadNd):
    n = 2


class CircularPad3d(_CircularPadNd):
    n = 3
