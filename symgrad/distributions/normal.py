"""``torch.distributions.Normal``: the Gaussian of a VAE's reparameterized latent."""
from __future__ import annotations

import math

from symgrad.creation import normal
from symgrad.grad_mode import no_grad
from symgrad.distributions.exp_family import ExponentialFamily
from symgrad.distributions.location_scale import LocationScale
from symgrad.distributions.utils import standard_normal

__all__ = ["Normal"]


class Normal(LocationScale, ExponentialFamily):
    """Mean ``loc``, standard deviation ``scale``; a batch of them when either is a tensor."""

    _mean_carrier_measure = 0

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def sample(self, sample_shape=()):
        """``normal(loc, scale)`` over the whole sample: PyTorch's draws, scaled then shifted."""
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape=()):
        eps = standard_normal(self._extended_shape(sample_shape), self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.scale ** 2) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def icdf(self, value):
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    @property
    def _natural_params(self):
        return self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal()

    def _log_normalizer(self, x, y):
        return -0.25 * x.pow(2) / y + 0.5 * (-math.pi / y).log()
