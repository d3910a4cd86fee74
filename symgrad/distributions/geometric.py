"""``torch.distributions.Geometric``: the number of failures before the first success of a coin
with ``probs`` (or ``logits``) of success."""
from __future__ import annotations

from symgrad.creation import empty, zeros_like
from symgrad.dtypes import Size
from symgrad.grad_mode import no_grad
from symgrad.nn.functional import binary_cross_entropy_with_logits

from symgrad.distributions import constraints
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.utils import (NUMBER, broadcast_all, finfo, lazy_property, logits_to_probs, one_parameter,
                                        probs_to_logits)

__all__ = ["Geometric"]


class Geometric(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        name, given = one_parameter(probs, logits)
        (param,) = broadcast_all(given)
        setattr(self, name, param)
        super().__init__(() if isinstance(given, NUMBER) else param.size(), validate_args=validate_args)
        if self._validate_args and name == "probs" and not (param > 0).all():
            invalid = param.detach()[~(param > 0)]
            raise ValueError(f"Expected parameter probs ({type(param).__name__} of shape {tuple(param.shape)}) of "
                             f"distribution {self!r} to be positive but found invalid values:\n{invalid}")

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Geometric, batch_shape, _instance=_instance)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(Size(batch_shape)))
        return new

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape=()):
        """``floor(log u / log(1 - p))`` of a uniform on ``[tiny, 1)`` (never 0, whose log is -inf)."""
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            u = empty(shape, dtype=self.probs.dtype).uniform_(float(finfo(self.probs.dtype).tiny), 1)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        """A certain success (``p = 1``) gives probability 1 to 0 failures, not ``0 * -inf``."""
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = probs.clone()
        probs[(probs == 1) & (value == 0)] = 0
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
