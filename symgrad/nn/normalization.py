"""Normalization modules: LayerNorm, GroupNorm, BatchNorm1d/2d, with PyTorch's parameters,
buffers (running statistics, ``num_batches_tracked``) and state_dict keys."""
from __future__ import annotations

from symgrad import creation, dtypes
from symgrad.grad_mode import no_grad
from symgrad.nn import functional as F
from symgrad.nn.module import Module, Parameter


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        dtype = dtype or dtypes.get_default_dtype()
        self.weight = Parameter(creation.ones(*shape, dtype=dtype, device=device)) if elementwise_affine else None
        self.bias = Parameter(creation.zeros(*shape, dtype=dtype, device=device)) if elementwise_affine and bias \
            else None

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        dtype = dtype or dtypes.get_default_dtype()
        self.weight = Parameter(creation.ones(num_channels, dtype=dtype, device=device)) if affine else None
        self.bias = Parameter(creation.zeros(num_channels, dtype=dtype, device=device)) if affine and bias else None

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, bias={self.bias is not None}"


class _BatchNorm(Module):
    expected_dims = ()
    _version = 2  # PyTorch's: its state_dict has num_batches_tracked

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dtype = dtype or dtypes.get_default_dtype()
        self.weight = Parameter(creation.ones(num_features, dtype=dtype, device=device)) if affine else None
        self.bias = Parameter(creation.zeros(num_features, dtype=dtype, device=device)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", creation.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dtypes.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def _missing_from_older_layout(self, prefix: str, version) -> tuple:
        """Layout 1 had no ``num_batches_tracked``: PyTorch keeps the module's own count."""
        return (prefix + "num_batches_tracked",) if (version is None or version < 2) and self.track_running_stats else ()

    def forward(self, input):
        if input.dim() not in self.expected_dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self.expected_dims)} input "
                             f"(got {input.dim()}D input)")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or self.running_mean is None
        return F.batch_norm(input, self.running_mean if not self.training or self.track_running_stats else None,
                            self.running_var if not self.training or self.track_running_stats else None,
                            self.weight, self.bias, use_batch, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    expected_dims = (4,)
