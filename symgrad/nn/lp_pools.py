"""Power-average pooling: ``F.lp_pool1d/2d/3d`` and ``nn.LPPool1d/2d/3d``.

PyTorch composes it in Python, so it is composed here the same way and its grad_fn and gradients
are PyTorch's: ``(sign(s) * relu(|s|) * k) ** (1/p)`` with ``s`` the average pool of ``x ** p``
over windows of ``k`` entries (so a window of zeros gets the gradient PyTorch's ops give it); an
infinite ``p`` is the max pool of ``|x|``, or minus that of ``-|x|``.
"""
from __future__ import annotations

import math

from symgrad.nn.module import Module
from symgrad.nn.pools import avg_pool1d, max_pool1d
from symgrad.ops.convolution import AVG_POOL, avg_pool2d, avg_pool3d, max_pool2d, max_pool3d
from symgrad.ops.registry import Names


def _sizes(value, n: int) -> tuple:
    """PyTorch's ``_pair``/``_triple``: a sequence as it is, a number repeated."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, count, avg_pool, max_pool):
    """``count`` entries per window; the pools are called with PyTorch's arguments."""
    if isinstance(norm_type, (int, float)) and math.isinf(norm_type):
        largest = max_pool(input.abs() if norm_type > 0 else -input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return largest if norm_type > 0 else -largest
    if stride is not None:
        out = avg_pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return (out.sign() * out.abs().relu()).mul(count).pow(1.0 / norm_type)


@AVG_POOL.publish(Names(functional=("lp_pool1d",)))
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, kernel_size, avg_pool1d, max_pool1d)


@AVG_POOL.publish(Names(functional=("lp_pool2d",)))
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kw, kh = _sizes(kernel_size, 2)
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, kw * kh, avg_pool2d, max_pool2d)


@AVG_POOL.publish(Names(functional=("lp_pool3d",)))
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kd, kw, kh = _sizes(kernel_size, 3)
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, kd * kw * kh, avg_pool3d, max_pool3d)


class _LPPoolNd(Module):
    function = None  # the functional form

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return type(self).function(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    function = lp_pool1d


class LPPool2d(_LPPoolNd):
    function = lp_pool2d


class LPPool3d(_LPPoolNd):
    function = lp_pool3d
