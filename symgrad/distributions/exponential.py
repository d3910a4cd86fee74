"""``torch.distributions.Exponential``: waiting times at ``rate``."""
from __future__ import annotations

from symgrad.creation import empty, zeros_like
from symgrad.dtypes import Size

from symgrad.distributions import constraints
from symgrad.distributions.exp_family import ExponentialFamily
from symgrad.distributions.utils import NUMBER, broadcast_all

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """Density ``rate * exp(-rate * x)`` for ``x >= 0``."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(() if isinstance(rate, NUMBER) else self.rate.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Exponential, batch_shape, _instance=_instance)
        new.rate = self.rate.expand(Size(batch_shape))
        return new

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        """PyTorch's ``exponential_`` draws of rate 1, divided by the rate."""
        shape = tuple(self._extended_shape(sample_shape))
        return empty(shape, dtype=self.rate.dtype).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -(-x).log()
