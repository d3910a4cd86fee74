"""``torch.distributions.kl``: ``kl_divergence(p, q)`` in closed form, looked up by the pair of
types in a registry that ``register_kl`` extends; the most specific registered pair wins."""
from __future__ import annotations

import math
import warnings

from symgrad.linalg import solve_triangular
from symgrad.nn.functional import softplus
from symgrad.ops.broadcasting import broadcast_shapes

from symgrad.distributions.bernoulli import Bernoulli
from symgrad.distributions.categorical import Categorical, OneHotCategorical
from symgrad.distributions.exponential import Exponential
from symgrad.distributions.independent import Independent
from symgrad.distributions.laplace import Laplace
from symgrad.distributions.multivariate_normal import MultivariateNormal, batch_mahalanobis, half_log_det
from symgrad.distributions.normal import Normal
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
