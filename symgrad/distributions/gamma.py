"""``torch.distributions.Gamma``: shape ``concentration``, inverse scale ``rate``.  Draws are
PyTorch's ``_standard_gamma`` draws (symgrad.distributions.host_kernels) divided by the rate;
``rsample`` differentiates them through the concentration by PyTorch's approximation of the
implicit reparameterization gradient (gamma_grad)."""
from __future__ import annotations

import numpy as np

from symgrad.creation import tensor
from symgrad.dtypes import Size

from symgrad.distributions import constraints
from symgrad.distributions.exp_family import ExponentialFamily
from symgrad.distributions.gamma_grad import standard_gamma_grad
from symgrad.distributions.host_kernels import standard_gamma
from symgrad.distributions.utils import NUMBER, broadcast_all, finfo

__all__ = ["Gamma", "sample_standard_gamma"]


def sample_standard_gamma(alpha):
    """``torch._standard_gamma(alpha)``: PyTorch's draws, a function of ``alpha`` whose derivative
    is ``standard_gamma_grad``: the constant draws plus ``(alpha - alpha) * grad``, the first alpha
    recorded and the second detached (exactly the draws in value).  The factor is computed once,
    forward only, and enters as a constant, as PyTorch's kernel value enters its backward (inlined,
    its formula would be compiled again into every backward program)."""
    drawn = tensor(standard_gamma(np.asarray(alpha.detach())), dtype=alpha.dtype)
    if not alpha.requires_grad:
        return drawn
    factor = tensor(np.asarray(standard_gamma_grad(alpha.detach(), drawn)), dtype=alpha.dtype)
    return drawn + (alpha - alpha.detach()) * factor


class Gamma(ExponentialFamily):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        numbers = isinstance(concentration, NUMBER) and isinstance(rate, NUMBER)
        super().__init__(() if numbers else self.concentration.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Gamma, batch_shape, _instance=_instance)
        new.concentration = self.concentration.expand(Size(batch_shape))
        new.rate = self.rate.expand(Size(batch_shape))
        return new

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        value = sample_standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        value.detach().clamp_(min=float(finfo(value.dtype).tiny))  # not recorded: the gradient stays the quotient's
        return value

    def log_prob(self, value):
        if not hasattr(value, "dim"):
            value = tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration.xlogy(self.rate) + (self.concentration - 1).xlogy(value)
                - self.rate * value - self.concentration.lgamma())

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + c.lgamma() + (1.0 - c) * c.digamma()

    @property
    def _natural_params(self):
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y):
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()
