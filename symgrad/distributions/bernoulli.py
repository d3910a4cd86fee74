"""``torch.distributions.Bernoulli``: a coin with ``probs`` or ``logits`` of heads (the other
parameter derived on first use, as PyTorch does)."""
from __future__ import annotations

import math

from symgrad.creation import arange, bernoulli
from symgrad.dtypes import Size
from symgrad.grad_mode import no_grad
from symgrad.nn.functional import binary_cross_entropy_with_logits

from symgrad.distributions import constraints
from symgrad.distributions.exp_family import ExponentialFamily
from symgrad.distributions.utils import (NUMBER, broadcast_all, lazy_property, logits_to_probs, one_parameter,
                                        probs_to_logits)

__all__ = ["Bernoulli"]


class Bernoulli(ExponentialFamily):
    """1 with probability ``probs`` (``sigmoid(logits)``), 0 otherwise."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        name, given = one_parameter(probs, logits)
        (param,) = broadcast_all(given)
        setattr(self, name, param)
        self._param = param
        super().__init__(() if isinstance(given, NUMBER) else param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Bernoulli, batch_shape, _instance=_instance)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                new._param = self.__dict__[name].expand(Size(batch_shape))
                setattr(new, name, new._param)
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        """1 above one half, 0 below, NaN at one half (no single mode)."""
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        mode[self.probs == 0.5] = math.nan
        return mode

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            return bernoulli(self.probs.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True):
        values = arange(2, dtype=self._param.dtype).view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values

    @property
    def _natural_params(self):
        return (self.probs.logit(),)

    def _log_normalizer(self, x):
        return x.exp().log1p()
