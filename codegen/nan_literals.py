"""Exponentials kept NaN where XLA can see, while compiling, that their argument is NaN.

XLA's CPU code for float32 ``exp`` (and ``exp2``, ``sinh``, ``cosh``, softmax's ``exp``) turns the
argument into an integer power of two on the way; LLVM folds that conversion of a known NaN to
an undefined value, and the whole result becomes whatever the output buffer held: zeros or
garbage, never NaN.  A NaN is known while compiling when a program holds a NaN literal that
meets a runtime value in one fusion, as in ``x += nan; torch.exp(x)``, where PyTorch's result
is NaN; or when an infinite literal multiplies a value XLA knows is 0 (``(x * 0.0) * -inf``, its
constants reassociated into ``x * nan``: ``softplus(x * 0.0, beta=-inf)``).  In a program whose
source holds ``jnp.nan``, or an infinity as a factor, each such call is made through
``nan_kept``, which hands the function 0 where its argument is NaN and puts the NaN back
after; LLVM folds both selections and the NaN survives.  Other programs are left as they are:
a NaN that arrives at run time is not folded, and ``exp`` gives NaN for it.
"""
from __future__ import annotations

import re

NAN_KEPT = '''
def nan_kept(f, x):
    """f(x), NaN where x is NaN (XLA's float32 exp of a NaN it folds while compiling is garbage)."""
    nan = jnp.isnan(x)
    return jnp.where(nan, x, f(jnp.where(nan, 0, x)))
'''

_EXPONENTIAL_CALL = re.compile(r"\bjnp\.(exp|exp2|sinh|cosh)\(")
_INFINITE_FACTOR = re.compile(r"[*/]\s*\(*-?jnp\.inf\b|\bjnp\.inf\)*\s*[*/]")  # inf * x: 0 * inf is a NaN XLA
                                                                                   # may fold ((x * 0.0) * -inf)


def kept(source: str) -> str:
    """``source`` (definitions and a program) with its exponentials made through ``nan_kept`` if it
    holds a NaN literal or an infinite factor, and ``nan_kept``'s definition above them."""
    if not ("jnp.nan" in source or _INFINITE_FACTOR.search(source)) or not _EXPONENTIAL_CALL.search(source):
        return source
    return _through_nan_kept(source)


def helpers(definitions: str, programs: str) -> str:
    """The helper ``definitions`` a module of emitted ``programs`` needs (symgrad.exporting), kept as
    the programs were: with ``nan_kept`` if they call it."""
    return _through_nan_kept(definitions) if "nan_kept(" in programs else definitions


def _through_nan_kept(source: str) -> str:
    return NAN_KEPT.lstrip("\n") + "\n\n" + _EXPONENTIAL_CALL.sub(r"nan_kept(jnp.\1, ", source)
