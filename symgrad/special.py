"""``torch.special``: the special functions under their SciPy names, each the op (and backward node)
of its ``torch`` spelling where PyTorch has one, and PyTorch's ``out=`` on every one."""
from __future__ import annotations

import math

from symgrad.nn.functional import log_softmax, softmax
from symgrad.ops import elementwise as _elementwise, functions as _functions
from symgrad.ops.reductions import logsumexp
from symgrad.ops.special import (digamma, entr, erfc, erfcx, erfinv, i0, i0e, i1, i1e, lgamma, log_ndtr, logit,
                                 mvlgamma, ndtri, polygamma, sinc, xlog1py, zeta)
from symgrad.out_argument import accepting_out
from symgrad.tensor import apply

__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammaln", "i0", "i0e",
           "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
           "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy", "zeta"]

gammaln, psi, multigammaln = lgamma, digamma, mvlgamma


def expit(input):
    return apply(_elementwise.SIGMOID, input)


def erf(input):
    return apply(_functions.ERF, input)


def exp2(input):
    return apply(_functions.EXP2, input)


def expm1(input):
    return apply(_functions.EXPM1, input)


def log1p(input):
    return apply(_functions.LOG1P, input)


def xlogy(input, other):
    return apply(_functions.XLOGY, input, other)


def round(input, *, decimals: int = 0):
    """torch.round with ``decimals`` always given (PyTorch's RoundBackward1, even for 0)."""
    return _functions.round(input, decimals=decimals)


def ndtr(input):
    """The standard normal CDF as PyTorch composes it, (1 + erf(x / sqrt(2))) / 2: 0 below about -8."""
    return (1 + erf(input * math.sqrt(0.5))) * 0.5


for _name in __all__:  # PyTorch's out= on each, named as its error messages name them
    globals()[_name] = accepting_out(globals()[_name], f"special_{_name}")
del _name
