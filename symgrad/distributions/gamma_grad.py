"""``_standard_gamma_grad``: the derivative of a Gamma(alpha, 1) draw ``x`` with respect to
``alpha`` at fixed cdf (``-d/dalpha cdf(x; alpha) / pdf(x; alpha)``, the implicit
reparameterization), by PyTorch's approximation: a Taylor series for ``x < 0.8``, Rice's saddle
point expansion for ``alpha > 8``, a bivariate rational fit elsewhere; in float64 as PyTorch
computes it, then rounded to the draws' dtype.  Written with symgrad ops, so it is a symbolic
expression of ``alpha`` and ``x`` like any other."""
from __future__ import annotations

import numpy as np

from symgrad import dtypes
from symgrad.ops.elementwise import where

__all__ = ["standard_gamma_grad"]

_RATIONAL = (  # rows: the coefficients' constant, linear and quadratic terms in log(x / alpha)
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
    (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
    (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
     -1.5247877e-07),
)
_F32 = {c: float(np.float32(c)) for c in (0.8, 0.9, 1.1)}  # the kernel's float constants


def standard_gamma_grad(alpha, x):
    """``d x / d alpha`` for draws ``x`` of Gamma(``alpha``, 1) (tensors of one shape)."""
    a, v = alpha.to(dtypes.float64), x.to(dtypes.float64)
    result = where(v < _F32[0.8], _small_x(a, v),
                   where(a > 8.0, _large_alpha(a, v), _rational(a, v)))
    return result.to(x.dtype)


def _small_x(a, x):
    numer, denom = 1.0, a
    series1, series2 = numer / denom, numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    pow_x_alpha = x.pow(a)
    pdf = x.pow(a - 1) * (-x).exp()
    cdf_alpha = (x.log() - a.digamma()) * (pow_x_alpha * series1) - pow_x_alpha * series2
    result = -cdf_alpha / pdf
    return where(result.isnan(), 0.0, result)


def _large_alpha(a, x):
    near = (_F32[0.9] * a <= x) & (x <= _F32[1.1] * a)
    numer_1 = 1 + 24 * a * (1 + 12 * a)
    numer_2 = 1440 * (a * a) + 6 * x * (53 - 120 * x) - 65 * x * x / a + a * (107 + 3600 * x)
    saddle = numer_1 * numer_2 / (1244160 * (a * a) * (a * a))
    denom = (8 * a).sqrt()
    term2 = denom / (a - x)
    term3 = (x - a - a * (x / a).log()).pow(-1.5)
    term23 = where(x < a, term2 - term3, term2 + term3)
    term1 = (x / a).log() * term23 - (2 / a).sqrt() * (a + x) / ((a - x) * (a - x))
    stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
    return where(near, saddle, -stirling * (x * term1) / denom)


def _rational(a, x):
    u, v = (x / a).log(), a.log()
    coef = [c0 + u * (c1 + u * c2) for c0, c1, c2 in zip(*_RATIONAL)]
    p = coef[0] + v * (coef[1] + v * (coef[2] + v * coef[3]))
    q = coef[4] + v * (coef[5] + v * (coef[6] + v * coef[7]))
    return (p / q).exp()

