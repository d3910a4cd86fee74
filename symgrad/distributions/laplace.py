"""``torch.distributions.Laplace``: the double exponential around ``loc``."""
from __future__ import annotations

from symgrad.creation import empty
from symgrad.distributions.location_scale import LocationScale
from symgrad.distributions.utils import finfo

__all__ = ["Laplace"]


class Laplace(LocationScale):
    """Density ``exp(-|x - loc| / scale) / (2 scale)``."""

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=()):
        """The inverse cdf of a uniform on ``(eps - 1, 1)``: never -1, whose log1p would be -inf."""
        shape = tuple(self._extended_shape(sample_shape))
        u = empty(shape, dtype=self.loc.dtype).uniform_(float(finfo(self.loc.dtype).eps) - 1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        centred = value - self.loc
        return 0.5 - 0.5 * centred.sign() * (-centred.abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()
