"""``torch.distributions.ExponentialFamily``: families whose density is
``exp(<t(x), theta> - F(theta) + k(x))``.  Knowing only the natural parameters ``theta``, the log
normalizer ``F`` and the mean carrier measure ``E[k(x)]``, the entropy and the KL divergence
between two members are Bregman divergences of ``F``, whose gradient (the mean of ``t(x)``) comes
from symgrad's own symbolic reverse mode, kept differentiable (``create_graph``)."""
from __future__ import annotations

from symgrad.autograd import grad

from symgrad.distributions.distribution import Distribution
from symgrad.distributions.utils import sum_rightmost

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """A member of an exponential family: ``_natural_params``, ``_log_normalizer`` and
    ``_mean_carrier_measure`` define it."""

    @property
    def _natural_params(self) -> tuple:
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def _log_normalizer_and_means(self):
        """``theta`` as fresh leaves, ``F(theta)`` and its gradient ``E[t(x)]`` (itself differentiable)."""
        thetas = [theta.detach().requires_grad_() for theta in self._natural_params]
        log_normalizer = self._log_normalizer(*thetas)
        return thetas, log_normalizer, grad(log_normalizer.sum(), thetas, create_graph=True)

    def entropy(self):
        """``F(theta) - <theta, grad F(theta)> - E[k(x)]``."""
        thetas, log_normalizer, means = self._log_normalizer_and_means()
        result = -self._mean_carrier_measure + log_normalizer
        for theta, mean in zip(thetas, means):
            result = result - (theta * mean).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result

    def _bregman_kl(self, q):
        """``KL(self || q) = F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>``."""
        thetas, log_normalizer, means = self._log_normalizer_and_means()
        result = q._log_normalizer(*q._natural_params) - log_normalizer
        for theta_p, theta_q, mean in zip(thetas, q._natural_params, means):
            result = result - sum_rightmost((theta_q - theta_p) * mean, len(q.event_shape))
        return result
