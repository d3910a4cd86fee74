"""``torch.distributions.Binomial``: successes in ``total_count`` coin flips with ``probs`` (or
``logits``) of success; draws are PyTorch's ``binomial`` (host_kernels)."""
from __future__ import annotations

import numpy as np

from symgrad.creation import arange, tensor
from symgrad.dtypes import Size
from symgrad.grad_mode import no_grad

from symgrad.distributions import constraints
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.host_kernels import binomial
from symgrad.distributions.utils import broadcast_all, lazy_property, logits_to_probs, one_parameter, probs_to_logits

__all__ = ["Binomial"]


def _clamp_by_zero(x):
    """``max(x, 0)`` whose derivative at 0 is 1/2 (PyTorch's, so gradients agree there)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        name, given = one_parameter(probs, logits)
        count, param = broadcast_all(total_count, given)
        self.total_count = count.type_as(param)
        setattr(self, name, param)
        self._param = param
        super().__init__(param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Binomial, batch_shape, _instance=_instance)
        new.total_count = self.total_count.expand(Size(batch_shape))
        for name in ("probs", "logits"):
            if name in self.__dict__:
                new._param = self.__dict__[name].expand(Size(batch_shape))
                setattr(new, name, new._param)
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            count, probs = (np.ascontiguousarray(np.broadcast_to(np.asarray(v.detach()), shape))
                            for v in (self.total_count, self.probs))
            return tensor(binomial(count, probs), dtype=self.probs.dtype)

    def log_prob(self, value):
        """``log C(n, k) + k logits - n log(1 + exp(logits))``, the last written to stay finite for
        large ``|logits|``."""
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        normalize = n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p() - (n + 1).lgamma()
        return value * logits - (value + 1).lgamma() - (n - value + 1).lgamma() - normalize

    def entropy(self):
        """The sum over the support; only for one total count across the batch."""
        total = int(self.total_count.max())
        if not self.total_count.min() == total:
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True):
        total = int(self.total_count.max())
        if not self.total_count.min() == total:
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = arange(1 + total, dtype=self._param.dtype).view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
