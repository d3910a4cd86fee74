"""``torch.distributions.RelaxedBernoulli`` (and its ``LogitRelaxedBernoulli`` base): the
Concrete / Gumbel-softmax relaxation of a coin, a reparameterizable draw in ``(0, 1)`` that
approaches 0 or 1 as the ``temperature`` falls.  The base draws logistic noise around the coin's
logits, divided by the temperature; a sigmoid maps it into ``(0, 1)``."""
from __future__ import annotations

from symgrad.creation import rand
from symgrad.dtypes import Size

from symgrad.distributions import constraints
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.transformed_distribution import TransformedDistribution
from symgrad.distributions.transforms import SigmoidTransform
from symgrad.distributions.utils import (NUMBER, broadcast_all, clamp_probs, lazy_property, logits_to_probs,
                                        one_parameter, probs_to_logits)

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli draw: ``(logit(u) + logits) / temperature``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        name, given = one_parameter(probs, logits)
        (param,) = broadcast_all(given)
        setattr(self, name, param)
        self._param = param
        super().__init__(() if isinstance(given, NUMBER) else param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(LogitRelaxedBernoulli, batch_shape, _instance=_instance)
        new.temperature = self.temperature
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

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(rand(size=shape, dtype=probs.dtype))
        return (uniforms.log() - (-uniforms).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """A draw in ``(0, 1)``: the sigmoid of a LogitRelaxedBernoulli's."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(LogitRelaxedBernoulli(temperature, probs, logits), SigmoidTransform(),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape,
                              _instance=self._expanded(RelaxedBernoulli, batch_shape, _instance=_instance))

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs
