"""Normalization modules: LayerNorm, GroupNorm, BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, RMSNorm
and LocalResponseNorm, with PyTorch's parameters, buffers (running statistics,
``num_batches_tracked``), state_dict keys and reprs."""
from __future__ import annotations

import warnings

from symgrad import creation, dtypes
from symgrad.grad_mode import no_grad
from symgrad.nn import functional as F
from symgrad.nn import init
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


class _NormBase(Module):
    """What BatchNorm and InstanceNorm share: the affine parameters, the running statistics with
    their count, and a state_dict layout (version 2) that has the count."""

    _version = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dtype = dtype or dtypes.get_default_dtype()
        self.weight = Parameter(creation.ones(num_features, dtype=dtype, device=device)) if affine else None
        self.bias = Parameter(creation.zeros(num_features, dtype=dtype, device=device)) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", creation.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dtypes.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _missing_from_older_layout(self, prefix: str, version) -> tuple:
        """Layout 1 had no ``num_batches_tracked``: PyTorch keeps the module's own count."""
        return (prefix + "num_batches_tracked",) if (version is None or version < 2) and self.track_running_stats else ()

    def _check_input_dim(self, input) -> None:
        if input.dim() not in self.expected_dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self.expected_dims)} input "
                             f"(got {input.dim()}D input)")

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    expected_dims = ()

    def forward(self, input):
        self._check_input_dim(input)
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


class BatchNorm1d(_BatchNorm):
    expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    expected_dims = (5,)


class _InstanceNorm(_NormBase):
    """Each sample's channels normalized over their own positions.  The defaults differ from
    BatchNorm's (no affine, no running statistics), an input may lack the batch axis, and the
    running statistics move in training without counting batches (a ``momentum`` of None is 0)."""

    expected_dims = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):
        self._check_input_dim(input)
        unbatched = input.dim() == self.expected_dims[0]
        channels = input.shape[0 if unbatched else 1]
        if channels != self.num_features:
            at = 0 if unbatched else 1
            if self.affine:
                raise ValueError(f"expected input's size at dim={at} to match num_features ({self.num_features}), "
                                 f"but got: {channels}.")
            warnings.warn(f"input's size at dim={at} does not match num_features. You can silence this warning by "
                          "not passing in num_features, which is not used because affine=False", stacklevel=2)
        if unbatched:
            return self._normalized(input.unsqueeze(0)).squeeze(0)
        return self._normalized(input)

    def _normalized(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               0.0 if self.momentum is None else self.momentum, self.eps)


class InstanceNorm1d(_InstanceNorm):
    expected_dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    expected_dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    expected_dims = (4, 5)


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        dtype = dtype or dtypes.get_default_dtype()
        self.weight = Parameter(creation.ones(*shape, dtype=dtype, device=device)) if elementwise_affine else None

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
