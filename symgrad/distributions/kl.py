"""``torch.distributions.kl``: ``kl_divergence(p, q)`` in closed form, looked up by the pair of
types in a registry that ``register_kl`` extends; the most specific registered pair wins."""
from __future__ import annotations

import math
import warnings

from symgrad.linalg import solve_triangular
from symgrad.nn.functional import softplus
from symgrad.ops.broadcasting import broadcast_shapes

from symgrad.distributions.bernoulli import Bernoulli
from symgrad.distributions.beta import Beta
from symgrad.distributions.binomial import Binomial
from symgrad.distributions.categorical import Categorical, OneHotCategorical
from symgrad.distributions.cauchy import Cauchy
from symgrad.distributions.dirichlet import Dirichlet
from symgrad.distributions.exp_family import ExponentialFamily
from symgrad.distributions.exponential import Exponential
from symgrad.distributions.gamma import Gamma
from symgrad.distributions.geometric import Geometric
from symgrad.distributions.gumbel import EULER, Gumbel
from symgrad.distributions.half_normal import HalfNormal
from symgrad.distributions.independent import Independent
from symgrad.distributions.laplace import Laplace
from symgrad.distributions.multivariate_normal import MultivariateNormal, batch_mahalanobis, half_log_det
from symgrad.distributions.normal import Normal
from symgrad.distributions.poisson import Poisson
from symgrad.distributions.transformed_distribution import TransformedDistribution
from symgrad.distributions.uniform import Uniform
from symgrad.distributions.utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_REGISTRY: dict = {}  # (type_p, type_q) -> function, as registered
_RESOLVED: dict = {}  # (type(p), type(q)) -> function (or NotImplemented), as looked up


def register_kl(type_p, type_q):
    """A decorator registering ``fn(p, q)`` for distributions of these types (or subclasses)."""
    def register(fn):
        _REGISTRY[type_p, type_q] = fn
        _RESOLVED.clear()  # a new pair may be more specific than one resolved before
        return fn
    return register


def _resolve(type_p, type_q):
    """The registered pair nearest to ``(type_p, type_q)`` in their method resolution orders, ``p``'s
    distance first; a warning when ranking ``q``'s first would pick another function."""
    ranked = [(type_p.__mro__.index(p), type_q.__mro__.index(q), (p, q)) for p, q in _REGISTRY
              if issubclass(type_p, p) and issubclass(type_q, q)]
    if not ranked:
        return NotImplemented
    left = min(ranked, key=lambda r: (r[0], r[1]))[2]
    right = min(ranked, key=lambda r: (r[1], r[0]))[2]
    if _REGISTRY[left] is not _REGISTRY[right]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please "
                      f"register_kl({left[0].__name__}, {right[1].__name__})", RuntimeWarning, stacklevel=3)
    return _REGISTRY[left]


def kl_divergence(p, q):
    """``KL(p || q)``, one value per batch entry."""
    key = (type(p), type(q))
    if key not in _RESOLVED:
        _RESOLVED[key] = _resolve(*key)
    fn = _RESOLVED[key]
    if fn is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fn(p, q)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    """Each outcome's term through softplus of the logits; infinite where q cannot produce an
    outcome p can, zero where p cannot."""
    heads = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    heads[q.probs == 0] = math.inf
    heads[p.probs == 0] = 0
    tails = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    tails[q.probs == 1] = math.inf
    tails[p.probs == 1] = 0
    return heads + tails


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    terms = p.probs * (p.logits - q.logits)
    terms[(q.probs == 0).expand_as(terms)] = math.inf
    terms[(p.probs == 0).expand_as(terms)] = 0
    return terms.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return -ratio.log() + ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    distance = (p.loc - q.loc).abs()
    return -scale_ratio.log() + distance / q.scale + scale_ratio * (-distance / p.scale).exp() - 1


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    shift = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + shift - 1 - var_ratio.log())


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    """``log`` of the width ratio; infinite where p reaches outside q."""
    result = ((q.high - q.low) / (p.high - p.low)).log()
    result[(q.low > p.low) | (q.high < p.high)] = math.inf
    return result


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    """Half of: the log-determinant ratio, ``tr(Sq^-1 Sp)`` (the squared entries of ``Lq^-1 Lp``),
    the Mahalanobis distance of the means, less the dimension."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with                          "
                         "different event shapes cannot be computed")
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    n = p.event_shape[0]
    shape = tuple(broadcast_shapes(Lq.shape[:-2], Lp.shape[:-2])) + (n, n)
    ratio = solve_triangular(Lq.expand(shape), Lp.expand(shape), upper=False)
    trace = ratio.reshape(-1, n * n).pow(2).sum(-1).reshape(shape[:-2])
    distance = batch_mahalanobis(Lq, q.loc - p.loc)
    return half_log_det(Lq) - half_log_det(Lp) + 0.5 * (trace + distance - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """Two members of one family: the Bregman divergence of its log normalizer."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot "
                                  "                            be computed using Bregman divergences")
    return p._bregman_kl(q)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    scale_ratio, q_loc, p_loc = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    t1 = -scale_ratio.log() - q_loc + p_loc
    t3 = (q_loc + (1 + scale_ratio).lgamma() - p_loc).exp()
    return t1 + scale_ratio * EULER + t3 - (1 + EULER)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    return t1 - (4 * p.scale * q.scale).log()


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    """Equal transforms of two bases: the KL of the bases (an invertible map keeps it)."""
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    total_p = p.concentration1 + p.concentration0
    total_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + total_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + total_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    return t1 - t2 + t3 + t4 + (total_q - total_p) * total_p.digamma()


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    total_p, total_q = p.concentration.sum(-1), q.concentration.sum(-1)
    t1 = total_p.lgamma() - total_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t4 = p.concentration.digamma() - total_p.digamma().unsqueeze(-1)
    return t1 - t2 + ((p.concentration - q.concentration) * t4).sum(-1)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    """Only where p's count is at most q's: infinite where it is above (and q's above p's is refused)."""
    if (p.total_count < q.total_count).any():
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    kl[p.total_count > q.total_count] = math.inf
    return kl


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)
