"""Program -> readable Python source, one assignment per line, built iteratively.

What the source must add to the IR: numbers that stand for whole arrays become
``jnp.full``; an assignment whose expression is smaller than its declared shape is
broadcast to it; one whose operands have other dtypes is cast to its declared dtype (PyTorch's
promotion is decided in the front end, not left to JAX's).  Unused assignments are dropped.
"""
from __future__ import annotations

import sympy as sp

from codegen.printer import DTYPES, to_jax
from symgrad.ir import Program, Structural

HEADER = "import jax\nimport jax.numpy as jnp\n\n\n"


def live_assignments(program: Program):
    """The assignments the outputs depend on, in program order."""
    live = set()
    for expr, _, _ in program.outputs:
        live |= expr.free_symbols
    kept = []
    for sym, expr in reversed(program.assignments):
        if sym in live:
            live |= expr.free_symbols
            kept.append((sym, expr))
    kept.reverse()
    return kept


def _value(program: Program, expr, shape, dtype) -> str:
    if not expr.free_symbols and not isinstance(expr, Structural):  # a constant such as 2, log(2), E
        value = expr if expr.is_Number else sp.Float(expr.evalf())
        return f"jnp.full({tuple(shape)!r}, {to_jax(value)}, dtype={DTYPES[dtype]})"
    text = to_jax(expr)
    if isinstance(expr, sp.Symbol):
        if program.dtypes[expr] != dtype:  # a gradient that is an integer input, say
            text = f"jnp.asarray({text}, dtype={DTYPES[dtype]})"
    elif not isinstance(expr, Structural):
        if dtype == "bool" or any(program.dtypes[s] != dtype for s in expr.free_symbols):
            text = f"jnp.asarray({text}, dtype={DTYPES[dtype]})"
    if program.shape_of(expr) != tuple(shape):
        text = f"jnp.broadcast_to({text}, {tuple(shape)!r})"
    return text


def emit(program: Program) -> str:
    lines = [f"def {program.name}({', '.join(s.name for s in program.inputs)}):"]
    for sym, expr in live_assignments(program):
        lines.append(f"    {sym.name} = {_value(program, expr, program.shapes[sym], program.dtypes[sym])}")
    outputs = [_value(program, expr, shape, dtype) for expr, shape, dtype in program.outputs]
    comment = ", ".join(program.output_names)
    lines.append(f"    # returns: {comment}" if comment else "    # returns nothing")
    lines.append(f"    return ({', '.join(outputs)}{',' if len(outputs) == 1 else ''})")
    return HEADER + "\n".join(lines) + "\n"
