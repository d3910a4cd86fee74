"""``torch.distributions.Categorical`` and ``OneHotCategorical``: one of K categories (an index, or
its one-hot vector), the policy of a REINFORCE agent.  ``probs`` are normalized to sum to 1 and
``logits`` to log-sum-exp to 0; the other parameter is derived on first use, as PyTorch does."""
from __future__ import annotations

import math

from symgrad.creation import arange, eye, full, multinomial
from symgrad.dtypes import Size, int64
from symgrad.nn.functional import one_hot
from symgrad.ops.broadcasting import broadcast_tensors

from symgrad.distributions import constraints
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.utils import finfo, lazy_property, logits_to_probs, one_parameter, probs_to_logits

__all__ = ["Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough"]


class Categorical(Distribution):
    """An index in ``range(K)``, K the last dim of ``probs`` or ``logits``; the dims before it batch."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        name, given = one_parameter(probs, logits)
        if given.dim() < 1:
            raise ValueError(f"`{name}` parameter must be at least one-dimensional.")
        if name == "probs":
            self.probs = self._param = given / given.sum(-1, keepdim=True)
        else:
            self.logits = self._param = given - given.logsumexp(dim=-1, keepdim=True)
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Categorical, batch_shape, _instance=_instance)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                new._param = self.__dict__[name].expand(Size(tuple(batch_shape) + (self._num_events,)))
                setattr(new, name, new._param)
        new._num_events = self._num_events
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def mean(self):
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype)

    def sample(self, sample_shape=()):
        """All samples of each row in one ``multinomial`` call with replacement, row after row:
        PyTorch's draws in PyTorch's order."""
        shape = Size(sample_shape)
        drawn = multinomial(self.probs.reshape(-1, self._num_events), shape.numel(), True)
        return drawn.T.reshape(tuple(self._extended_shape(shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        index, log_pmf = broadcast_tensors(value.long().unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, index[..., :1]).squeeze(-1)

    def entropy(self):
        """``-sum p log p``, the logits clamped to the dtype's lowest number so that a category of
        probability 0 adds 0, not ``0 * -inf``."""
        logits = self.logits.clamp(min=float(finfo(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True):
        values = arange(self._num_events, dtype=int64).view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class OneHotCategorical(Distribution):
    """A Categorical's draw as a one-hot vector of K entries (the event)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(OneHotCategorical, batch_shape, _instance=_instance)
        new._categorical = self._categorical.expand(batch_shape)
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return one_hot(probs.argmax(dim=-1), num_classes=probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape=()):
        indices = self._categorical.sample(Size(sample_shape))
        return one_hot(indices, self._categorical._num_events).to(self._categorical.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True):
        n = self._event_shape[0]
        values = eye(n, dtype=self._param.dtype).view((n,) + (1,) * len(self._batch_shape) + (n,))
        return values.expand((n,) + tuple(self._batch_shape) + (n,)) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """One-hot draws whose gradient is the probabilities' (the straight-through estimator)."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
