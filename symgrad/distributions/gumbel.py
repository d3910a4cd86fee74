"""``torch.distributions.Gumbel``: the law of maxima, drawn as ``loc - scale log(-log U)`` from a
uniform kept inside ``(0, 1)`` (a chain of transforms, so its draws are PyTorch's)."""
from __future__ import annotations

import math

from symgrad.creation import full_like, ones_like

from symgrad.distributions import constraints
from symgrad.distributions.transformed_distribution import TransformedDistribution
from symgrad.distributions.transforms import AffineTransform, ExpTransform
from symgrad.distributions.uniform import Uniform
from symgrad.distributions.utils import NUMBER, broadcast_all, finfo

__all__ = ["Gumbel"]

EULER = 0.57721566490153286060


class Gumbel(TransformedDistribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        info = finfo(self.loc.dtype)
        low, high = float(info.tiny), 1 - float(info.eps)
        if isinstance(loc, NUMBER) and isinstance(scale, NUMBER):
            base = Uniform(low, high, validate_args=validate_args)
        else:
            base = Uniform(full_like(self.loc, low), full_like(self.loc, high), validate_args=validate_args)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-ones_like(self.scale)), ExpTransform().inv,
                      AffineTransform(loc=loc, scale=-self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Gumbel, batch_shape, _instance=_instance)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * EULER

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + EULER)
