"""PyTorch's CPU sampling kernels that symgrad.random does not hold (``cauchy_``, ``_standard_gamma``,
``_sample_dirichlet``, ``poisson``, ``binomial``), run on the host element after element as PyTorch's
serial kernels run, from the same generator: each element's draws depend on the values before
(rejection sampling), so they cannot be one vectorized transform of a block of uniforms.  Their arithmetic is the C++
kernels' in double (compiled without fused multiply-adds; single precision where their float
operands keep it, with the C library's float functions), and the results enter the graph as
constants."""
from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np

from symgrad import dtypes, random

__all__ = ["binomial", "cauchy", "dirichlet", "poisson", "standard_gamma"]

_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
_LIBM.lgamma.restype, _LIBM.lgamma.argtypes = ctypes.c_double, [ctypes.c_double]  # (Python's lgamma is its own)
_LIBM.log1pf.restype, _LIBM.log1pf.argtypes = ctypes.c_float, [ctypes.c_float]


def _uniform(generator) -> float:
    """One ``uniform_real_distribution<double>(0, 1)`` draw: 53 bits of a 64-bit draw."""
    return float(random._unit(generator, 1, dtypes.float64)[0])


def _normal(generator) -> float:
    """One ``normal_distribution<double>(0, 1)`` draw (Box-Muller, its second value cached)."""
    return float(random._standard_normals(generator, 1)[0])


def cauchy(shape: tuple, dtype, generator=None) -> np.ndarray:
    """``empty(shape).cauchy_()``: ``tan(pi (u - 1/2))`` of a double uniform per element."""
    generator = generator or random.default_generator
    n = int(np.prod(shape, dtype=np.int64))
    values = [math.tan(math.pi * (_uniform(generator) - 0.5)) for _ in range(n)]
    return np.array(values, dtype=np.float64).astype(dtype.numpy).reshape(shape)


def standard_gamma(alpha: np.ndarray, generator=None) -> np.ndarray:
    """``_standard_gamma(alpha)``: one Gamma(alpha, 1) draw per entry in C order, at least the
    dtype's smallest normal number."""
    generator = generator or random.default_generator
    scalar = alpha.dtype.type
    drawn = [_gamma_one(scalar(a), scalar, generator) for a in alpha.ravel().tolist()]
    tiny = np.finfo(alpha.dtype).tiny
    return np.maximum(np.array(drawn, dtype=alpha.dtype), tiny).reshape(alpha.shape)


def _gamma_one(alpha, scalar, generator) -> float:
    """Marsaglia and Tsang's rejection method; alpha below 1 is boosted by one and the draw scaled
    by ``u ** (1 / alpha)``.  ``alpha`` and its boost are in the tensor's dtype, the rest in double,
    the float constants float32 as in the kernel."""
    if math.isnan(alpha):  # (PyTorch's loop never accepts: it does not return)
        return math.nan
    scale = 1.0
    if alpha < 1:
        if alpha == 0:
            return 0.0
        scale *= math.pow(1 - _uniform(generator), float(scalar(1) / alpha))
        alpha = scalar(alpha + scalar(1))
    d = float(scalar(alpha - scalar(_ONE_THIRD_F32)))
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = _normal(generator)
        y = 1.0 + c * x
        while y <= 0:
            x = _normal(generator)
            y = 1.0 + c * x
        v = y * y * y
        u = 1 - _uniform(generator)
        xx = x * x
        if u < 1.0 - _SQUEEZE_F32 * xx * xx:
            return float(scalar(scale * d * v))
        if math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
            return float(scalar(scale * d * v))


_ONE_THIRD_F32 = float(np.float32(1.0) / np.float32(3.0))
_SQUEEZE_F32 = float(np.float32(0.0331))


def dirichlet(alpha: np.ndarray, generator=None) -> np.ndarray:
    """``_sample_dirichlet(alpha)``: a double-precision gamma draw per entry (alpha widened to double),
    each row divided by its sum, rounded to the dtype and kept inside ``(0, 1)``."""
    generator = generator or random.default_generator
    drawn = [_gamma_one(float(a), np.float64, generator) for a in alpha.ravel().tolist()]
    gamma = np.maximum(np.array(drawn, dtype=np.float64), np.finfo(np.float64).tiny).reshape(alpha.shape)
    total = np.add.reduce(gamma, axis=-1, keepdims=True)
    ratio = (gamma / total).astype(alpha.dtype)
    below_one = np.nextafter(alpha.dtype.type(1), alpha.dtype.type(0))
    return np.minimum(below_one, np.maximum(np.finfo(alpha.dtype).tiny, ratio))


def poisson(rate: np.ndarray, generator=None) -> np.ndarray:
    """``poisson(rate)``: counts in the rate's dtype, one entry after another."""
    generator = generator or random.default_generator
    if np.any(rate < 0):  # (NaN passes, as PyTorch's check lets it through)
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return np.array([_poisson_one(float(r), generator) for r in rate.ravel().tolist()],
                    dtype=rate.dtype).reshape(rate.shape)


def _poisson_one(lam: float, generator) -> float:
    """Hoermann's transformed rejection from rate 10 up, a product of uniforms below."""
    if lam >= 10:
        slam, loglam = math.sqrt(lam), math.log(lam)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            u = _uniform(generator) - 0.5
            v = _uniform(generator)
            us = 0.5 - abs(u)
            k = math.floor((2 * a / us + b) * u + lam + 0.43)
            if us >= 0.07 and v <= vr:
                return k
            if k < 0 or (us < 0.013 and v > us):
                continue
            bound = -lam + k * loglam - _LIBM.lgamma(k + 1.0)
            if math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b) <= bound:
                return k
    if lam == 0:
        return 0
    if not lam > 0:  # NaN: the product never falls below exp(-NaN)
        return 0
    count, product, limit = 0, 1.0, math.exp(-lam)
    while True:
        product *= _uniform(generator)
        if product > limit:
            count += 1
        else:
            return count


def binomial(count: np.ndarray, prob: np.ndarray, generator=None) -> np.ndarray:
    """``binomial(count, prob)`` (arrays of one shape and dtype): inversion of geometric gaps for a
    small mean, BTRS rejection (Hoermann's) from a mean of 10 up; probabilities above 1/2 are
    drawn as failures."""
    generator = generator or random.default_generator
    scalar = count.dtype.type
    drawn = [_binomial_one(scalar(n), scalar(p), scalar, generator)
             for n, p in zip(count.ravel().tolist(), prob.ravel().tolist())]
    return np.array(drawn, dtype=count.dtype).reshape(count.shape)


def _binomial_one(n, p, scalar, generator):
    if n <= 0 or p <= 0:
        return scalar(0)
    if p >= 1:
        return n
    if p <= 0.5:
        return _btrs(n, p, scalar, generator) if n * p >= 10 else _inversion(n, p, scalar, generator)
    if p > 0.5:
        q = scalar(1.0 - float(p))
        return scalar(n - (_btrs(n, q, scalar, generator) if n * q >= 10 else _inversion(n, q, scalar, generator)))
    return scalar(math.nan)


def _inversion(n, p, scalar, generator):
    """Geometric gaps between successes (``ceil(log u / log(1 - p))``) until they pass ``n``."""
    log_q = _LIBM.log1pf(float(-p)) if scalar is np.float32 else math.log1p(float(-p))
    gaps, successes = 0.0, scalar(0)
    while True:
        gaps += math.ceil(math.log(_uniform(generator)) / log_q)
        if gaps > n:
            return successes
        successes = scalar(successes + scalar(1))


def _btrs(n, p, scalar, generator):
    """Hoermann's BTRS; ``n`` and ``p`` and their products in the dtype, as the kernel's scalars."""
    one = scalar(1)
    stddev = float(np.sqrt(scalar(n * p * (one - p))))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * float(p)
    c = float(n * p) + 0.5
    v_r = 0.92 - 4.2 / b
    r = float(p / (one - p))
    alpha = (2.83 + 5.1 / b) * stddev
    m = math.floor(float((n + one) * p))
    while True:
        u = _uniform(generator) - 0.5
        v = _uniform(generator)
        us = 0.5 - abs(u)
        k = scalar(math.floor((2 * a / us + b) * u + c))
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = math.log(v * alpha / (a / (us * us) + b))
        n_k = float(n - k + one)
        bound = ((m + 0.5) * math.log((m + 1) / (r * (float(n) - m + 1))) +
                 float(n + one) * math.log((float(n) - m + 1) / n_k) +
                 (float(k) + 0.5) * math.log(r * n_k / float(k + one)) +
                 _stirling_tail(m) + _stirling_tail(float(n) - m)
                 - _stirling_tail(float(k)) - _stirling_tail(float(n - k)))
        if v <= bound:
            return k


_STIRLING_TAILS = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                   0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                   0.00925546218271273, 0.00833056343336287)


def _stirling_tail(k: float) -> float:
    """``log k! - `` Stirling's approximation of it: tabulated to 9, a series above."""
    if k <= 9:
        return _STIRLING_TAILS[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
