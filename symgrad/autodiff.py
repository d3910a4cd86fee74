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


def reverse_mode(program: Program, output, seed, wrt, blocked=frozenset()):
    """Append the gradient of ``output`` (weighted by ``seed``) w.r.t. each of ``wrt``.

    ``blocked`` are symbols through which no gradient flows (values computed under no_grad
    or detached).  Returns one expression per ``wrt`` symbol; a number ``0`` where the
    output does not depend on it.
    """
    wrt = list(wrt)
    needs = _symbols_between(program, wrt, output, blocked)
    adjoints: dict[sp.Symbol, list] = {}
    if isinstance(output, sp.Symbol) and output in needs:
        adjoints[output] = [seed]
    for sym, expr in reversed(program.assignments):
        contributions = adjoints.pop(sym, None)
        if contributions is None:
            continue
        if sym in wrt:  # a target: keep its adjoint for the caller
            adjoints[sym] = contributions
            continue
        g = _total(program, contributions, sym, f"g_{sym.name}")
        for arg, contribution in _vjp(program, sym, expr, g, needs):
            if contribution != 0:
                adjoints.setdefault(arg, []).append(contribution)
    grads = []
    for w in wrt:
        contributions = adjoints.get(w)
        if not contributions:
            grads.append(sp.S.Zero)
            continue
        grads.append(_total(program, contributions, w, f"grad_{w.name}"))
    return grads


def _total(program, contributions, sym, hint):
    """The sum of the cotangents reaching ``sym``, as a number or an array of sym's full shape."""
    total = sp.Add(*contributions)
    if total.is_Number:
        return total
    shape, dtype = program.shapes[sym], program.dtypes[sym]
    if program.shape_of(total) != shape:
        return program.materialize(total, shape, dtype)
    return program.assign(total, shape, dtype, hint)


def _vjp(program, sym, expr, g, needs):
    if isinstance(expr, Structural):
        return [(arg, c) for arg, c in expr.vjp(program, g, sym) if arg in needs]
    out_shape = program.shapes[sym]
    result = []
    for arg in sorted(expr.free_symbols & needs, key=lambda s: s.name):
        derivative = expr.diff(arg)
        if derivative == 0:
            continue
        derivative = derivative.xreplace({expr: sym})
        contribution = g * derivative
        if program.shapes[arg] != out_shape:  # arg was broadcast: sum the cotangent back
            contribution = program.materialize(contribution, out_shape, program.dtypes[sym])
            contribution = program.sum_to(contribution, program.shapes[arg])
        result.append((arg, contribution))
    return result


def _symbols_between(program, wrt, output, blocked):
    """Symbols that depend on some of ``wrt`` through unblocked assignments."""
    reach = set(wrt)
    for sym, expr in program.assignments:
        if sym not in blocked and sym not in reach and expr.free_symbols & reach:
            reach.add(sym)
    return reach
