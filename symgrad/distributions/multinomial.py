"""``torch.distributions.Multinomial``: counts per category of ``total_count`` Categorical draws
(the event is the vector of counts).  Draws are the Categorical's, counted."""
from __future__ import annotations

from symgrad.creation import ones_like, tensor, zeros
from symgrad.dtypes import Size

from symgrad.distributions import constraints
from symgrad.distributions.binomial import Binomial
from symgrad.distributions.categorical import Categorical
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count: int = 1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Multinomial, batch_shape, _instance=_instance)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(Size(batch_shape))
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        """``total_count`` Categorical draws per sample (drawn first, as PyTorch draws them), counted."""
        shape = Size(sample_shape)
        samples = self._categorical.sample(Size((self.total_count,)) + shape)
        samples = samples.permute(list(range(1, samples.dim())) + [0])
        counts = zeros(tuple(self._extended_shape(shape)), dtype=samples.dtype)
        return counts.scatter_add(-1, samples, ones_like(samples)).type_as(self.probs)

    def entropy(self):
        n = tensor(self.total_count)
        term1 = n * self._categorical.entropy() - (n + 1).lgamma()
        support = self._binomial.enumerate_support(expand=False)[1:]
        weights = (support + 1).lgamma()
        return term1 + (self._binomial.log_prob(support).exp() * weights).sum([0, -1])

    def log_prob(self, value):
        """The multinomial coefficient plus ``sum(value * logits)``, a category of zero count adding
        0 even where its logit is ``-inf``."""
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = logits.clone()
        log_factorial_n = (value.sum(-1) + 1).lgamma()
        log_factorial_xs = (value + 1).lgamma().sum(-1)
        logits[(value == 0) & (logits == -float("inf"))] = 0
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
