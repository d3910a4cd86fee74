"""What Normal and Laplace share: a real location and a positive scale broadcast together, the
location also the mean and the mode."""
from __future__ import annotations

from symgrad.dtypes import Size

from symgrad.distributions import constraints
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.utils import NUMBER, broadcast_all


class LocationScale(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if LocationScale in cls.__bases__:  # the family whose __init__ a subclass must keep to inherit expand
            cls._family = cls

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        numbers = isinstance(loc, NUMBER) and isinstance(scale, NUMBER)
        super().__init__(() if numbers else self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(self._family, batch_shape, _instance=_instance)
        new.loc, new.scale = self.loc.expand(Size(batch_shape)), self.scale.expand(Size(batch_shape))
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc
