"""Operands XLA's algebraic simplifier must not see through, so that a program's results are the
ones IEEE arithmetic gives op by op (PyTorch's).

XLA rewrites some patterns by identities of the real numbers that floats do not keep, each one a
NaN or an infinity lost or made:

- ``log(exp(a))`` to ``a`` (float32 ``log(exp(100))``: PyTorch inf), ``log(pow(a, b))`` to
  ``b * log(abs(a))`` (a negative base: PyTorch NaN), ``log(rsqrt(a))`` to ``-log(a) / 2``;
- ``exp(a) / exp(b)`` to ``exp(a - b)``, ``exp(a) * exp(b)`` to ``exp(a + b)`` and
  ``pow(exp(a), b)`` to ``exp(a * b)`` (where both overflow: PyTorch NaN);
- ``sqrt(a * a)`` to ``abs(a)`` and ``rsqrt(a * a)`` to ``1 / abs(a)`` (where the square overflows:
  PyTorch inf and 0);
- ``(a / b) / c`` to ``a / (b * c)`` and ``a / (b / c)`` to ``(a * c) / b`` (``1e30 / 1e20 / 1e20``:
  PyTorch 1e-10, reassociated 0);
- inside its expansions of ``cosh``, ``sinh``, ``acos`` and ``acosh``, a constant of the argument
  with the expansion's own (``(a - c) - log 2`` to ``a - (c + log 2)``): float32 ``cosh(x - 1e8)`` at
  ``x = 1e8`` was 1.5, ``acosh`` 0 (PyTorch 1 and NaN), ``sinh(8)`` so reached twice its value.

A pattern may span assignments of the program (XLA sees one graph), so each operand's assignment
is looked up, through negations (XLA cancels two).  The inner operand of such a pattern is printed
inside ``jax.lax.optimization_barrier``, which XLA does not look through; it costs the fusion of that
one operand.  SymPy makes none of these (symgrad.ir.ieee).  Left to XLA: rewrites that only round
differently (``a / sqrt(b)`` as ``a * rsqrt(b)``), constants reassociated (``(x * c1) * c2``),
``nonnegative >= 0`` folded to true for a NaN, and the CPU backend's fused multiply-adds.
"""
from __future__ import annotations

import sympy as sp

_LOGS = frozenset({"log", "log2", "log10"})
_EXPS = frozenset({"exp", "exp2"})
_EXPANDED = frozenset({"cosh", "sinh", "acos", "acosh"})  # XLA computes them from their argument and constants
_ROOTS = frozenset({"square_root", "root"})  # sqrt heads: sqrt(a * a) is abs(a) to XLA


class Unrewritten(sp.Function):
    """Its argument, as XLA computed it (``jax.lax.optimization_barrier``)."""

    nargs = 1


def _power(expr) -> bool:
    """A power printed as ``jnp.power`` (integer powers are products, halves square roots)."""
    return isinstance(expr, sp.Pow) and not (expr.exp.is_Integer or expr.exp in (sp.S.Half, -sp.S.Half))


def _exp(expr) -> bool:
    return type(expr).__name__ in _EXPS


def _division(expr) -> bool:
    """A quotient as XLA sees it: any negative power is printed as a division (``a / b**2``)."""
    return isinstance(expr, sp.Mul) and any(_reciprocal(a) for a in expr.args) or _reciprocal(expr)


def _reciprocal(expr) -> bool:
    return isinstance(expr, sp.Pow) and expr.exp.is_Number and expr.exp.is_extended_negative


def _negation(expr) -> bool:
    return isinstance(expr, sp.Mul) and len(expr.args) == 2 and expr.args[0] == -1 and expr.args[1].is_Symbol


def _square(expr) -> bool:
    if isinstance(expr, sp.Pow):
        return expr.exp == 2
    return isinstance(expr, sp.Mul) and len(set(expr.args)) < len(expr.args)


class _Guard:
    def __init__(self, assignments):
        self.definitions = dict(assignments)

    def seen(self, expr):
        """What XLA sees as ``expr``: the assignment a symbol names, else the expression; through a
        negation, which XLA cancels against another (``-(-(a / b)) / c`` is ``(a / b) / c`` to it)."""
        while isinstance(expr, sp.Symbol) and expr in self.definitions:
            expr = self.definitions[expr]
            if not _negation(expr):
                break
            expr = expr.args[1]
        return expr

    def __call__(self, expr):
        """``expr`` with the inner operands of XLA's inexact rewrites kept."""
        if not expr.args or isinstance(expr, Unrewritten):
            return expr
        args = [self(a) for a in expr.args]
        name = type(expr).__name__
        if name in _LOGS:
            inner = self.seen(expr.args[0])
            if _exp(inner) or _power(inner) or (isinstance(inner, sp.Pow) and inner.exp == -sp.S.Half):
                args[0] = Unrewritten(args[0])
        elif name in _EXPANDED:
            inner = self.seen(expr.args[0])
            if isinstance(inner, sp.Add) and any(a.is_Number for a in inner.args):
                args[0] = Unrewritten(args[0])
        elif name in _ROOTS:
            if _square(self.seen(expr.args[0])):
                args[0] = Unrewritten(args[0])
        elif isinstance(expr, sp.Pow):
            base = self.seen(expr.args[0])
            if (expr.exp == -1 and (_exp(base) or _division(base)) or _exp(base) and _power(expr)
                    or expr.exp in (sp.S.Half, -sp.S.Half) and _square(base)):
                args[0] = Unrewritten(args[0])
        elif isinstance(expr, sp.Mul):  # (what XLA sees of each operand is looked up here alone)
            seen = [self.seen(a) for a in expr.args]
            divides = _division(expr)
            exps = sum(1 for s in seen if _exp(s))
            for k, s in enumerate(seen):
                if exps > 1 and _exp(s) or divides and _division(s) and not isinstance(expr.args[k], sp.Pow):
                    args[k] = Unrewritten(args[k])
        if all(a is b for a, b in zip(args, expr.args)):
            return expr
        return expr.func(*args, evaluate=False) if isinstance(expr, (sp.Add, sp.Mul, sp.Pow)) else expr.func(*args)


def guarded(assignments: list) -> list:
    """The program's ``(symbol, expression)`` assignments, each inner operand of a pattern XLA
    rewrites inexactly kept from it."""
    guard = _Guard(assignments)
    return [(sym, guard(expr)) for sym, expr in assignments]
