"""``torch.distributions.Poisson``: counts of events at ``rate``; draws are PyTorch's ``poisson``
(host_kernels)."""
from __future__ import annotations

import numpy as np

from symgrad.creation import tensor
from symgrad.dtypes import Size
from symgrad.grad_mode import no_grad

from symgrad.distributions import constraints
from symgrad.distributions.exp_family import ExponentialFamily
from symgrad.distributions.host_kernels import poisson
from symgrad.distributions.utils import NUMBER, broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(() if isinstance(rate, NUMBER) else self.rate.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Poisson, batch_shape, _instance=_instance)
        new.rate = self.rate.expand(Size(batch_shape))
        return new

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            rates = np.ascontiguousarray(np.broadcast_to(np.asarray(self.rate.detach()), shape))
            return tensor(poisson(rates), dtype=self.rate.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()
