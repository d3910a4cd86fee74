"""Building SymPy expressions that mean what IEEE floats compute.

SymPy evaluates as it builds, with the algebra of real numbers: ``x*0`` is ``0``, ``x - x`` is
``0``, ``x/x`` is ``1``, ``x*x**-2`` is ``1/x``.  For a float that is NaN or infinite none of
these hold, and PyTorch shows the NaN or Inf that the algebra hides.  So forms and derivatives are
built with the constructors here, which fold only what is equal for every float input:

* numbers with numbers (a result that is not real, such as ``log(-2)``, becomes NaN, as a float
  computation gives it; ``1/0`` stays SymPy's complex infinity, which codegen prints as inf);
* a factor of exactly 1 and a term of exactly 0 (``0 + x`` is ``x``; only the sign of a zero
  could differ, and that is a zero PyTorch never adds);

and never combine two symbolic factors or terms.
"""
from __future__ import annotations

import math

import numpy as np
import sympy as sp

ONE, ZERO = sp.S.One, sp.S.Zero
# SymPy's numbers have no negative zero; -1 * 0.0, left unevaluated, is one wherever it is computed.
NEGATIVE_ZERO = sp.Mul(sp.S.NegativeOne, sp.Float(0.0), evaluate=False)


def constant(value):
    """A Python number as an IR constant, keeping the sign of a zero."""
    if value.__class__ is float:
        return NEGATIVE_ZERO if value == 0 and math.copysign(1.0, value) < 0 else sp.Float(value)
    return sp.Integer(int(value))


def as_float(expr) -> float:
    """A number of the IR (NEGATIVE_ZERO included) as the Python float it stands for."""
    return -0.0 if expr is NEGATIVE_ZERO else float(expr)


def number(expr):
    """A numeric expression (no symbols) folded as floats would: not-real results are NaN."""
    if expr.is_Number or expr is sp.zoo:
        return expr
    if expr.is_extended_real is False:
        return sp.nan
    return expr


def mul(*factors):
    """The product of ``factors``, folding numbers only."""
    coefficient, rest = ONE, []
    for f in _flat(factors, sp.Mul):
        if f.is_Number:
            coefficient = coefficient * f
        else:
            rest.append(f)
    if not rest:
        return number(coefficient)
    if coefficient != ONE:
        rest.insert(0, coefficient)
    return rest[0] if len(rest) == 1 else sp.Mul(*rest, evaluate=False)


def add(*terms):
    """The sum of ``terms``, folding numbers only."""
    constant, rest = ZERO, []
    for t in _flat(terms, sp.Add):
        if t.is_Number:
            constant = constant + t
        else:
            rest.append(t)
    if not rest:
        return number(constant)
    if constant != ZERO:
        rest.append(constant)
    return rest[0] if len(rest) == 1 else sp.Add(*rest, evaluate=False)


def _flat(args, head):
    """Nested products (sums) as one: regrouping changes only rounding, and overflow in between."""
    for a in args:
        if a.__class__ is head:
            yield from a.args
        else:
            yield a


def unevaluated(build, *args):
    """``build(*args)`` with SymPy's evaluation off, unless every argument is a number (then it is
    folded as floats would be): an op's form keeps each operation it was written with."""
    if all(a.is_Number or a is NEGATIVE_ZERO for a in args):
        try:
            return number(build(*args))
        except ZeroDivisionError:  # mpmath's Float 0.0 / 0.0 raises: fold as floats do (NaN, inf)
            with np.errstate(all="ignore"):
                return constant(float(build(*(np.float64(as_float(a)) for a in args))))
    with sp.evaluate(False):
        if not any(a is sp.nan for a in args):
            return build(*args)
        # SymPy's NaN absorbs whatever it meets (nan - x is nan, evaluate or not), and the
        # derivative with it: build around a stand-in, then put the NaN in unevaluated.
        stand_in = sp.Dummy("nan")
        return build(*(stand_in if a is sp.nan else a for a in args)).xreplace({stand_in: sp.nan})
