"""``torch.distributions``: probability distributions with PyTorch's parameters, shapes, checks and
numbers: seeded draws are PyTorch's draws (symgrad.random), and ``rsample``, ``log_prob``,
``entropy`` and ``kl_divergence`` are differentiable compositions of symgrad's ops."""
from symgrad.distributions import constraints, kl, kl_across, transforms, utils  # noqa: F401
from symgrad.distributions.bernoulli import Bernoulli
from symgrad.distributions.beta import Beta
from symgrad.distributions.binomial import Binomial
from symgrad.distributions.categorical import Categorical, OneHotCategorical, OneHotCategoricalStraightThrough
from symgrad.distributions.cauchy import Cauchy
from symgrad.distributions.chi2 import Chi2
from symgrad.distributions.constraint_registry import biject_to, transform_to
from symgrad.distributions.dirichlet import Dirichlet
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.exp_family import ExponentialFamily
from symgrad.distributions.exponential import Exponential
from symgrad.distributions.gamma import Gamma
from symgrad.distributions.geometric import Geometric
from symgrad.distributions.gumbel import Gumbel
from symgrad.distributions.half_normal import HalfNormal
from symgrad.distributions.independent import Independent
from symgrad.distributions.kl import kl_divergence, register_kl
from symgrad.distributions.laplace import Laplace
from symgrad.distributions.log_normal import LogNormal
from symgrad.distributions.logistic_normal import LogisticNormal
from symgrad.distributions.multinomial import Multinomial
from symgrad.distributions.multivariate_normal import MultivariateNormal
from symgrad.distributions.normal import Normal
from symgrad.distributions.poisson import Poisson
from symgrad.distributions.relaxed_bernoulli import RelaxedBernoulli
from symgrad.distributions.relaxed_categorical import RelaxedOneHotCategorical
from symgrad.distributions.student_t import StudentT
from symgrad.distributions.transformed_distribution import TransformedDistribution
from symgrad.distributions.transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,
                                              IndependentTransform, PowerTransform, SigmoidTransform,
                                              SoftmaxTransform, StickBreakingTransform, TanhTransform, Transform)
from symgrad.distributions.uniform import Uniform

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
           "ComposeTransform", "Dirichlet", "Distribution", "ExpTransform", "Exponential", "ExponentialFamily", "Gamma",
           "Geometric", "Gumbel", "HalfNormal", "Independent", "IndependentTransform", "Laplace", "LogNormal",
           "LogisticNormal", "Multinomial", "MultivariateNormal", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Poisson", "PowerTransform", "RelaxedBernoulli",
           "RelaxedOneHotCategorical", "SigmoidTransform", "SoftmaxTransform", "StickBreakingTransform", "StudentT",
           "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "biject_to", "kl_divergence",
           "register_kl", "transform_to"]
