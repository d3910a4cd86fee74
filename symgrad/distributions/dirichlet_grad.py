"""``_dirichlet_grad``: how a Dirichlet draw's entry ``x`` moves with its concentration ``alpha``
(the row's total concentration held fixed), read off the Beta(alpha, total - alpha) marginal:
``-d/dalpha cdf(x) / pdf(x) / (1 - x)``, by PyTorch's approximations: Taylor series near 0 and
near 1, Rice's saddle point for two large concentrations, a rational correction to an analytic
approximation elsewhere.  Written with symgrad ops in float64 (PyTorch evaluates the two series
in the draws' dtype), then rounded to the draws' dtype."""
from __future__ import annotations

from symgrad import dtypes
from symgrad.ops.elementwise import where

__all__ = ["dirichlet_grad"]

_RATIONAL = [  # [numerator or denominator][power of log x][power of a][power of b]
    [[[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
     [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
     [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]]],
    [[[1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
     [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
     [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]]]]


def dirichlet_grad(x, alpha, total):
    """``d x / d alpha`` scaled by ``1 / (1 - x)``, for draws ``x`` (tensors of one shape)."""
    x64, a, t = (v.to(dtypes.float64) for v in (x, alpha, total))
    b = t - a
    psi = {"alpha": a.digamma(), "beta": b.digamma(), "total": t.digamma()}  # (each once: digamma is large in XLA)
    boundary = (total * x * (1 - x)).to(dtypes.float64)  # (in the draws' dtype, as PyTorch decides)
    result = where((x64 <= 0.5) & (boundary < 2.5), _alpha_small(x64, a, b, psi["alpha"] - psi["total"]),
                   where((x64 >= 0.5) & (boundary < 0.75), -_beta_small(1 - x64, b, a, psi["total"] - psi["alpha"]),
                         where((a > 6) & (b > 6), _alpha_mid(x64, a, b), _rational(x64, a, t, psi))))
    return result.to(x.dtype)


def _nan_to_zero(value):
    return where(value.isnan(), 0.0, value)


def _alpha_small(x, alpha, beta, psi_difference):
    """Taylor series in ``x`` near 0 (``psi_difference``: ``digamma(alpha) - digamma(alpha + beta)``)."""
    factor = psi_difference - x.log()
    numer = 1.0
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    return _nan_to_zero(x * (1 - x).pow(-beta) * series)


def _beta_small(x, alpha, beta, factor):
    """The derivative in ``beta`` of the series near 0 (used at ``1 - x`` with the roles swapped;
    ``factor``: ``digamma(alpha + beta) - digamma(beta)``)."""
    numer, betas, dbetas, series = 1.0, 1.0, 0.0, factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    return _nan_to_zero(-(1 - x).pow(1 - beta) * series)


def _alpha_mid(x, alpha, beta):
    """Rice's saddle point expansion, with a polynomial where ``x`` is near the mean."""
    total = alpha + beta
    mean = alpha / total
    std = (alpha * beta / (total + 1)).sqrt() / total
    poly = 47 * x * (beta * beta) * (beta * beta) + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta + alpha * (
            3 * (59 + 180 * beta - 90 * x) * (beta * beta) + alpha * (
                (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (8 * (1 - x) * (135 * beta - 11)))))
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    near = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / (2 * alpha * beta / total).sqrt()
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha)) * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    term1 = term1_num / ((2 * alpha / beta).sqrt() * total.pow(1.5) * axbx * axbx)
    term2 = 0.5 * (alpha / (total * x)).log()
    term3 = (8 * alpha * beta / total).sqrt() / (beta * x + alpha * (x - 1))
    term4 = (beta * (beta / (total * (1 - x))).log() + alpha * (alpha / (total * x)).log()).pow(-1.5)
    far = stirling * prefactor * (term1 + term2 * (term3 + where(x < mean, term4, -term4)))
    return where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), near, far)


def _rational(x, alpha, total, psi):
    """A rational function of ``log x``, ``log(alpha / x)`` and ``log total - that``, correcting
    ``x (digamma(total) - digamma(alpha)) / (total - alpha)``."""
    u = x.log()
    a = alpha.log() - u
    b = total.log() - a
    powers_u, powers_a = (1.0, u, u * u), (1.0, a, a * a)
    p = q = 0.0
    for i in range(3):
        for j in range(3):
            ua = powers_u[i] * powers_a[j]
            cp, cq = _RATIONAL[0][i][j], _RATIONAL[1][i][j]
            p = p + ua * (cp[0] + b * (cp[1] + b * (cp[2] + b * cp[3])))
            q = q + ua * (cq[0] + b * (cq[1] + b * (cq[2] + b * cq[3])))
    approx = x * (psi["total"] - psi["alpha"]) / (total - alpha)
    return p / q * approx
