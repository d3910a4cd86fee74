"""Symbolic reverse mode over a Program.

One pass in reverse over the SSA assignments that lie between the inputs we differentiate
with respect to and the output.  Each assignment's adjoint is bound to a symbol of its own,
so the gradient program has at most a small constant times as many nodes as the forward:

* an elementwise assignment ``y = f(a, b, ...)`` sends ``g * df/da`` to ``a`` (SymPy's
  ``diff`` of one small expression; occurrences of ``f`` itself are replaced by ``y``, so
  ``exp`` and ``sigmoid`` reuse their forward value), summed back to ``a``'s shape;
* a structural assignment sends what its own ``vjp`` says.
"""
from __future__ import annotations

import sympy as sp

from symgrad.ir.functions import Structural
from symgrad.ir.program import Program


def reverse_mode(program: Program, output, seed, wrt):
    """Append the gradient of ``output`` (weighted by ``seed``) w.r.t. each of ``wrt``.

    Gradients stop only where the program says so (``StopGradient``: values computed under
    no_grad or detached).  Returns one expression per ``wrt`` symbol; a number ``0`` where
    the output does not depend on it.
    """
    wrt = list(wrt)
    needs = _symbols_between(program, wrt)
    adjoints: dict[sp.Symbol, list] = {}
    if isinstance(output, sp.Symbol) and output in needs:
        adjoints[output] = [seed]
    totals = {}
    targets = set(wrt)
    for sym, expr in reversed(program.assignments):
        contributions = adjoints.pop(sym, None)
        if contributions is None:
            continue
        g = _total(program, contributions, sym, f"g_{sym.name}")
        if sym in targets:  # a computed target (a retained non-leaf): keep it and go on
            totals[sym] = g
        for arg, contribution in _vjp(program, sym, expr, g, needs):
            if contribution != 0:
                adjoints.setdefault(arg, []).append(contribution)
    for w in wrt:  # the inputs among the targets
        if w not in totals and adjoints.get(w):
            totals[w] = _total(program, adjoints[w], w, f"grad_{w.name}")
    return [totals.get(w, sp.S.Zero) for w in wrt]


def _total(program, contributions, sym, hint):
    """The sum of the cotangents reaching ``sym``, as a number or an array of sym's full shape."""
    total = sp.Add(*contributions)
    shape, dtype = program.shapes[sym], program.dtypes[sym]
    if total.is_Number or program.shape_of(total) == ():  # scalars broadcast where they are used
        return program.assign(total, (), dtype, hint)
    if program.shape_of(total) != shape:
        return program.materialize(total, shape, dtype)
    return program.assign(total, shape, dtype, hint)


def _vjp(program, sym, expr, g, needs):
    if isinstance(expr, Structural):
        return [(arg, c) for arg, c in expr.vjp(program, g, sym) if arg in needs]
    out_shape = program.shapes[sym]
    result = []
    for arg in sorted(expr.free_symbols & needs, key=lambda s: s.name):
        derivative = _derivative(expr, arg)
        if derivative == 0:
            continue
        derivative = derivative.xreplace({expr: sym})
        contribution = g * derivative
        if program.shapes[arg] != out_shape:  # arg was broadcast: sum the cotangent back
            contribution = program.materialize(contribution, out_shape, program.dtypes[sym])
            contribution = program.sum_to(contribution, program.shapes[arg])
        result.append((arg, contribution))
    return result


def _derivative(expr, x):
    """d expr / d x for an elementwise expression: the chain, sum and product rules here, each
    head's own derivative from SymPy (``fdiff``).  Much cheaper than ``sympy.diff``, which
    builds and evaluates ``Derivative`` objects; the expressions are one op's form, so small."""
    if expr == x:
        return sp.S.One
    if x not in expr.free_symbols:
        return sp.S.Zero
    args = expr.args
    if expr.is_Add:
        return sp.Add(*[_derivative(a, x) for a in args])
    if expr.is_Mul:
        terms = []
        for i, a in enumerate(args):
            da = _derivative(a, x)
            if da != 0:
                terms.append(sp.Mul(*args[:i], da, *args[i + 1:]))
        return sp.Add(*terms)
    if expr.is_Pow:
        base, exponent = args
        result = sp.S.Zero
        db, de = _derivative(base, x), _derivative(exponent, x)
        if db != 0:
            result += exponent * base ** (exponent - 1) * db
        if de != 0:
            result += expr * sp.log(base) * de
        return result
    if getattr(type(expr), "fdiff", sp.Function.fdiff) is not sp.Function.fdiff:  # heads with their own rule
        terms = []
        for i, a in enumerate(args, 1):
            da = _derivative(a, x)
            if da != 0:
                terms.append(expr.fdiff(i) * da)
        return sp.Add(*terms)
    return expr.diff(x)


def _symbols_between(program, wrt):
    """Symbols that depend on some of ``wrt``: the only ones worth sending cotangents to."""
    reach = set(wrt)
    for sym, expr in program.assignments:
        if sym not in reach and expr.free_symbols & reach:
            reach.add(sym)
    return reach
