"""``torch.distributions.Cauchy``: the ratio of two standard normals, shifted and scaled; no mean,
infinite variance.  Draws are PyTorch's ``cauchy_`` draws (host_kernels)."""
from __future__ import annotations

import math

from symgrad.creation import full, tensor
from symgrad.dtypes import Size

from symgrad.distributions import constraints
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.host_kernels import cauchy
from symgrad.distributions.utils import NUMBER, broadcast_all

__all__ = ["Cauchy"]


class Cauchy(Distribution):
    """Median ``loc``, half width at half maximum ``scale``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        numbers = isinstance(loc, NUMBER) and isinstance(scale, NUMBER)
        super().__init__(() if numbers else self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Cauchy, batch_shape, _instance=_instance)
        new.loc, new.scale = self.loc.expand(Size(batch_shape)), self.scale.expand(Size(batch_shape))
        return new

    @property
    def mean(self):
        return full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        eps = tensor(cauchy(shape, self.loc.dtype), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
