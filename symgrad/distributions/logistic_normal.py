"""``torch.distributions.LogisticNormal``: a Gaussian vector of K-1 entries broken onto the
K-simplex (StickBreakingTransform), a distribution over proportions."""
from __future__ import annotations

from symgrad.distributions import constraints
from symgrad.distributions.normal import Normal
from symgrad.distributions.transformed_distribution import TransformedDistribution
from symgrad.distributions.transforms import StickBreakingTransform

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """The stick-breaking image of independent Normal(``loc``, ``scale``) entries (the last dim)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._expanded(LogisticNormal, batch_shape, _instance=_instance))

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale
