"""``torch.distributions``: probability distributions with PyTorch's parameters, shapes, checks and
numbers: seeded draws are PyTorch's draws (symgrad.random), and ``rsample``, ``log_prob``,
``entropy`` and ``kl_divergence`` are differentiable compositions of symgrad's ops."""
from symgrad.distributions import constraints, kl, utils  # noqa: F401
from symgrad.distributions.bernoulli import Bernoulli
from symgrad.distributions.categorical import Categorical, OneHotCategorical, OneHotCategoricalStraightThrough
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.exponential import Exponential
from symgrad.distributions.independent import Independent
from symgrad.distributions.kl import kl_divergence, register_kl
from symgrad.distributions.laplace import Laplace
from symgrad.distributions.multivariate_normal import MultivariateNormal
from symgrad.distributions.normal import Normal
from symgrad.distributions.uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Exponential", "Independent", "Laplace", "MultivariateNormal",
           "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Uniform", "kl_divergence",
           "register_kl"]
