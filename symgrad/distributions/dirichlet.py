"""``torch.distributions.Dirichlet``: a point of the simplex, weighted by ``concentration`` (the
last dim); ``rsample`` differentiates PyTorch's own draws through the concentration by the
implicit reparameterization gradient (dirichlet_grad)."""
from __future__ import annotations

import numpy as np

from symgrad.creation import tensor
from symgrad.dtypes import Size
from symgrad.nn.functional import one_hot

from symgrad.distributions import constraints
from symgrad.distributions.dirichlet_grad import dirichlet_grad
from symgrad.distributions.exp_family import ExponentialFamily
from symgrad.distributions.host_kernels import dirichlet

__all__ = ["Dirichlet", "sample_dirichlet"]


def sample_dirichlet(concentration):
    """``torch._sample_dirichlet`` with the gradient of PyTorch's ``_Dirichlet``: the draws ``x``
    plus ``G s - x sum(G s)``, where ``s = c - c`` (recorded minus detached: zero in value) and
    ``G = dirichlet_grad(x, c, total)``; so the draws in value, and for an upstream gradient ``g``
    the concentration's ``G (g - sum(x g))``.  ``G`` is computed once, forward only, and enters as
    a constant (as in sample_standard_gamma)."""
    drawn = tensor(dirichlet(np.asarray(concentration.detach())), dtype=concentration.dtype)
    if not concentration.requires_grad:
        return drawn
    fixed = concentration.detach()
    factor = np.asarray(dirichlet_grad(drawn, fixed, fixed.sum(-1, True).expand_as(fixed)))
    scaled = tensor(factor, dtype=concentration.dtype) * (concentration - fixed)
    return drawn + scaled - drawn * scaled.sum(-1, True)


class Dirichlet(ExponentialFamily):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Dirichlet, batch_shape, _instance=_instance)
        new.concentration = self.concentration.expand(Size(tuple(batch_shape) + tuple(self._event_shape)))
        return new

    def rsample(self, sample_shape=()):
        return sample_dirichlet(self.concentration.expand(tuple(self._extended_shape(sample_shape))))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (c - 1.0).xlogy(value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        """The interior mode; where every concentration is below 1, the vertex of the largest."""
        above = (self.concentration - 1).clamp(min=0.0)
        mode = above / above.sum(-1, True)
        corner = (self.concentration < 1).all(dim=-1)
        mode[corner] = one_hot(mode[corner].argmax(dim=-1), above.shape[-1]).to(mode.dtype)
        return mode

    @property
    def variance(self):
        c = self.concentration
        total = c.sum(-1, True)
        return c * (total - c) / (total.pow(2) * (total + 1))

    def entropy(self):
        c = self.concentration
        k, total = c.size(-1), c.sum(-1)
        return c.lgamma().sum(-1) - total.lgamma() - (k - total) * total.digamma() - ((c - 1.0) * c.digamma()).sum(-1)

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()
