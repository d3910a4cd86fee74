"""``torch.distributions.Uniform``: flat on ``[low, high)``."""
from __future__ import annotations

import math

from symgrad.creation import rand
from symgrad.dtypes import Size

from symgrad.distributions import constraints
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.utils import NUMBER, broadcast_all

__all__ = ["Uniform"]


class Uniform(Distribution):
    """Flat between ``low`` and ``high``; a batch of them when either is a tensor."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        numbers = isinstance(low, NUMBER) and isinstance(high, NUMBER)
        super().__init__(() if numbers else self.low.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Uniform, batch_shape, _instance=_instance)
        new.low, new.high = self.low.expand(Size(batch_shape)), self.high.expand(Size(batch_shape))
        return new

    @property
    def arg_constraints(self):
        """Each bound constrained by the other."""
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return math.nan * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        u = rand(size=tuple(self._extended_shape(sample_shape)), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        """``-log(high - low)`` inside, ``-inf`` outside (the log of an indicator)."""
        if self._validate_args:
            self._validate_sample(value)
        inside = self.low.le(value).type_as(self.low).mul(self.high.gt(value).type_as(self.low))
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()
