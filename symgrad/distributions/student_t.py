"""``torch.distributions.StudentT``: a Normal whose precision is itself drawn (a Chi2 over its
degrees of freedom): heavier tails, for robust likelihoods."""
from __future__ import annotations

import math

from symgrad.dtypes import Size

from symgrad.distributions import constraints
from symgrad.distributions.chi2 import Chi2
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.utils import broadcast_all, standard_normal

__all__ = ["StudentT"]


class StudentT(Distribution):
    """``df`` degrees of freedom, location ``loc``, scale ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(StudentT, batch_shape, _instance=_instance)
        shape = Size(batch_shape)
        new.df, new.loc, new.scale = self.df.expand(shape), self.loc.expand(shape), self.scale.expand(shape)
        new._chi2 = self._chi2.expand(shape)
        return new

    @property
    def mean(self):
        """``loc``, undefined (NaN) for ``df <= 1``."""
        m = self.loc.clone()
        m[self.df <= 1] = math.nan
        return m

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """``scale^2 df / (df - 2)``; infinite for ``1 < df <= 2``, NaN below."""
        m = self.df.clone()
        above = self.df > 2
        m[above] = self.scale[above].pow(2) * self.df[above] / (self.df[above] - 2)
        m[(self.df <= 2) & (self.df > 1)] = math.inf
        m[self.df <= 1] = math.nan
        return m

    def rsample(self, sample_shape=()):
        """A standard normal over the root of a Chi2 draw per degree of freedom (normals first, as
        PyTorch draws them)."""
        x = standard_normal(self._extended_shape(sample_shape), self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * (z / self.df).rsqrt())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + (0.5 * self.df).lgamma()
             - (0.5 * (self.df + 1.0)).lgamma())
        return -0.5 * (self.df + 1.0) * (y ** 2.0 / self.df).log1p() - z

    def entropy(self):
        lbeta = (0.5 * self.df).lgamma() + math.lgamma(0.5) - (0.5 * (self.df + 1)).lgamma()
        return (self.scale.log() + 0.5 * (self.df + 1) * ((0.5 * (self.df + 1)).digamma() - (0.5 * self.df).digamma())
                + 0.5 * self.df.log() + lbeta)
