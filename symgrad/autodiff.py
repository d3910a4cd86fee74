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

from symgrad.ir import ieee
from symgrad.ir.functions import Structural, equal, greater_equal, masked, rerouted, select
from symgrad.ir.program import Program


def reverse_mode(program: Program, output, seed, wrt):
    """Append the gradient of ``output`` (weighted by ``seed``) w.r.t. each of ``wrt``.

    Gradients stop only where the program says so (``StopGradient``: values computed under
    no_grad or detached).  Returns one expression per ``wrt`` symbol; a number ``0`` where
    the output does not depend on it.
    """
    wrt = list(wrt)
    if not (isinstance(output, sp.Symbol) or output.is_Number):  # a form left unassigned (3*x)
        output = program.assign(output, program.shape_of(output), program.dtype_of(output), "out")
    needs = _symbols_between(program, wrt)
    adjoints: dict[sp.Symbol, list] = {}
    if isinstance(output, sp.Symbol) and output in needs:
        if not seed.is_Number and program.shape_of(seed) != program.shapes[output]:
            seed = program.sum_to(seed, program.shapes[output])  # an output broadcast from a smaller symbol
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
            if _promoted(program, contribution, arg):  # a promoted operand's cotangent, in its own dtype
                contribution = program.astype(contribution, program.dtypes[arg])  # (cast at the edge, as
                # PyTorch casts it, before the contributions are summed)
            adjoints.setdefault(arg, []).append(contribution)  # a 0 too: 0 * inf further back is NaN
    for w in wrt:  # the inputs among the targets
        if w not in totals and adjoints.get(w):
            totals[w] = _total(program, adjoints[w], w, f"grad_{w.name}")
    return [totals.get(w, sp.S.Zero) for w in wrt]


def _promoted(program, contribution, arg) -> bool:
    """Whether ``contribution``'s values have another float dtype than ``arg``'s (a float32 operand
    of a float64 op; a float64 operand times a folded cotangent and a float32 array).  A number, or
    a form of numbers alone, takes its dtype where it is used."""
    dtype = program.dtypes[arg]
    if "float" not in dtype or contribution.is_Number:
        return False
    values = program.dtype_of(contribution, default=None)  # (a select's condition alone says "bool": no cast)
    return values is not None and "float" in values and values != dtype


def _total(program, contributions, sym, hint):
    """The sum of the cotangents reaching ``sym``, as a number or an array of sym's full shape."""
    total = ieee.add(*contributions)
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
        if _is_mask(expr):  # PyTorch's zeros: a NaN cotangent stops here
            result.append((arg, sp.S.Zero))
            continue
        if _divides(expr, arg):
            derivative = _quotient_derivative(program, sym, expr, arg)
        else:
            derivative = _derivative(expr, arg)
            with sp.evaluate(False):  # rebuilding must not fold x*x**-2 into 1/x (IEEE, symgrad.ir.ieee)
                derivative = derivative.xreplace({expr: sym})
        contribution = _chain(g, derivative)
        if program.shapes[arg] != out_shape:  # arg was broadcast: sum the cotangent back
            contribution = program.materialize(contribution, out_shape, program.dtypes[sym])
            contribution = program.sum_to(contribution, program.shapes[arg])
        result.append((arg, contribution))
    return result


def _divides(expr, x) -> bool:
    """Whether ``expr`` is a quotient by ``x`` (div's form, ``a * x**-1``)."""
    return expr.is_Mul and len(expr.args) == 2 and expr.args[1] == sp.Pow(x, -1, evaluate=False)


def _quotient_derivative(program, sym, expr, x):
    """d(a / x)/dx as PyTorch's div backward takes it: ``-(a / x) / x``, the quotient's value ``sym``
    divided once more and bound to a symbol of its own, so that the cotangent multiplies it whole.
    SymPy's ``-a / x**2`` squares x, which overflows (to ``a / inf``: 0, or NaN) where PyTorch's
    numbers are finite: x / (y / x) at x = y = 1e30 (float32)."""
    numerator, reciprocal = expr.args
    divided = program.assign(ieee.mul(sym, reciprocal), program.shapes[sym], program.dtypes[sym], f"{sym.name}_divided")
    by_divisor = ieee.mul(sp.S.NegativeOne, divided)
    if x not in numerator.free_symbols:
        return by_divisor
    return ieee.add(ieee.mul(_derivative(numerator, x), reciprocal), by_divisor)  # x / x


def _chain(g, derivative):
    """The cotangent times a derivative, as PyTorch's backward formulas take it: into each branch
    of a select, where a branch that does not depend on the input gets exact zeros (``where``'s
    backward; relu's, clamp's), even where the cotangent is NaN or infinite; a masked one whole."""
    if isinstance(derivative, select) and not isinstance(derivative, masked):
        condition, a, b = derivative.args
        return select(condition, *(sp.S.Zero if d == 0 else _chain(g, d) for d in (a, b)))
    if isinstance(derivative, rerouted):  # a value that differentiates as another: so does its product
        return rerouted(*(_chain(g, d) for d in derivative.args))
    if derivative.is_Add and any(isinstance(d, select) for d in derivative.args):
        # one tensor as several operands (``clamp(x, max=x)``): PyTorch sums each operand's backward,
        # so a select's zeros stay zeros under a NaN cotangent
        return ieee.add(*[_chain(g, d) for d in derivative.args])
    return ieee.mul(g, derivative)


def _derivative(expr, x):
    """d expr / d x for an elementwise expression: the chain, sum and product rules here, each
    head's own derivative from SymPy (``fdiff``).  Much cheaper than ``sympy.diff``, which
    builds and evaluates ``Derivative`` objects; the expressions are one op's form, so small.
    Built with IEEE-safe folding only (symgrad.ir.ieee): ``d(x/x)/dx`` is NaN at inf, as in PyTorch."""
    if expr == x:
        return sp.S.One
    if x not in expr.free_symbols:
        return sp.S.Zero
    args = expr.args
    if expr.is_Add:
        return ieee.add(*[_derivative(a, x) for a in args])
    if expr.is_Mul:  # a factor's derivative that cancels to 0 (x - x) still multiplies: 0 * inf is NaN;
        # a mask or a sign has none (PyTorch's backwards make them without history: relu's, abs's)
        return ieee.add(*[ieee.mul(*args[:i], _derivative(a, x), *args[i + 1:])
                          for i, a in enumerate(args) if x in a.free_symbols and not _is_mask(a)])
    if expr.is_Pow:
        return _pow_derivative(expr, x)
    if isinstance(expr, select):  # the branch not taken sends nothing, not 0 * its derivative (NaN at inf)
        condition, a, b = args
        da, db = _derivative(a, x), _derivative(b, x)
        return sp.S.Zero if da == 0 and db == 0 else select(condition, da, db)
    if isinstance(expr, rerouted):  # the new value sends nothing, not 0 * its derivative
        return _derivative(args[1], x)
    if getattr(type(expr), "fdiff", sp.Function.fdiff) is not sp.Function.fdiff:  # heads with their own rule
        return ieee.add(*[ieee.mul(expr.fdiff(i), _derivative(a, x))
                          for i, a in enumerate(args, 1) if x in a.free_symbols])
    return expr.diff(x)


def _is_mask(expr) -> bool:
    """Whether ``expr`` is a test, a step or a sign, or a choice between such (max's tie mask): flat
    wherever it is defined, made by PyTorch's backwards without history."""
    if isinstance(expr, select):
        return all(a.is_Number or _is_mask(a) for a in expr.args[1:])
    return getattr(type(expr), "zero_gradient", False) or isinstance(expr, _MASKS)


_MASKS = (sp.sign, sp.Heaviside, sp.DiracDelta)  # SymPy's (abs's derivative, and theirs)


def _pow_derivative(expr, x):
    """PyTorch's pow gradients: zero where the exponent is 0 (even at a base of 0), and for the
    exponent zero where the base is 0 and the exponent >= 0 (where b**e * log(b) is 0 * -inf), a
    zero the cotangent still multiplies (``grad * where(...)``: NaN for an infinite cotangent)."""
    base, exponent = expr.args
    terms = []
    if x in base.free_symbols and not exponent.is_zero:
        db = _derivative(base, x)
        lowered = exponent - 1 if exponent.is_Number else ieee.add(exponent, sp.S.NegativeOne)
        power = sp.S.One if lowered == 0 else base if lowered == 1 else sp.Pow(base, lowered, evaluate=False)
        by_base = ieee.mul(exponent, power)
        if not exponent.is_Number:
            by_base = select(equal(exponent, 0), sp.S.Zero, by_base)
        terms.append(ieee.mul(by_base, db))
    if x in exponent.free_symbols:
        de = _derivative(exponent, x)
        by_exponent = ieee.mul(expr, sp.log(base, evaluate=False))  # the real log: log(-2) is NaN
        if base.is_Number:
            if base.is_zero:
                by_exponent = masked(greater_equal(exponent, 0), sp.S.Zero, by_exponent)
        else:
            by_exponent = masked(ieee.mul(equal(base, 0), greater_equal(exponent, 0)), sp.S.Zero, by_exponent)
        terms.append(ieee.mul(by_exponent, de))
    return ieee.add(*terms)


def _symbols_between(program, wrt):
    """Symbols that depend on some of ``wrt``: the only ones worth sending cotangents to."""
    reach = set(wrt)
    for sym, expr in program.assignments:
        if sym not in reach and expr.free_symbols & reach:
            reach.add(sym)
    return reach
