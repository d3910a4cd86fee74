"""Convolution modules: the functional forms with their arguments stored, weights drawn as
PyTorch's ``reset_parameters`` draws them (so a seeded layer holds PyTorch's weights).  The pooling
modules are symgrad.nn.pools."""
from __future__ import annotations

from symgrad import creation, dtypes
from symgrad.nn import functional as F
from symgrad.nn import init
from symgrad.nn.module import Module, Parameter


def _tuple(value, n: int) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _ConvNd(Module):
    """PyTorch's _ConvNd: the arguments checked and stored as PyTorch stores them; the weight is
    (out, in / groups, *kernel), or (in, out / groups, *kernel) for a transposed convolution."""

    dims = 0
    function = ""  # its name in nn.functional
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None, *,
                 output_padding=0):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        n = self.dims
        self.kernel_size, self.stride, self.dilation = _tuple(kernel_size, n), _tuple(stride, n), _tuple(dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode != "zeros":
            raise NotImplementedError(f"padding_mode={padding_mode!r}: symgrad pads with zeros only")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.output_padding = _tuple(output_padding, n)
        self.padding_mode = padding_mode
        dtype = dtype or dtypes.get_default_dtype()
        channels = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(creation.zeros(*channels, *self.kernel_size, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(creation.zeros(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.affine_default_(self.weight, self.bias)

    def forward(self, input):
        return getattr(F, self.function)(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                                         self.groups)

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self.dims:
            text += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1,) * self.dims:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.dims:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class Conv1d(_ConvNd):
    dims, function = 1, "conv1d"


class Conv2d(_ConvNd):
    dims, function = 2, "conv2d"


class Conv3d(_ConvNd):
    dims, function = 3, "conv3d"
