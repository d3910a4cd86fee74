"""Program -> readable Python source, one assignment per line, built iteratively.

What the source must add to the IR: numbers that stand for whole arrays become
``jnp.full``; an assignment whose expression is smaller than its declared shape is
broadcast to it; one whose operands have other dtypes is cast to its declared dtype (PyTorch's
promotion is decided in the front end, not left to JAX's).  Unused assignments are dropped,
and runs that repeat (codegen.reroll) are printed once, as the body of a ``jax.lax.scan``.
"""
from __future__ import annotations

from codegen import nan_literals, speed, stable, unrewritten
from codegen.printer import value_text
from codegen.reroll import find_loops, split_step_terms
from codegen.scan import Scans
from symgrad.ir import Program

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


def bare(text: str) -> str:
    """``text`` without parentheses around the whole of it: ``g = (1/b)`` reads ``g = 1/b``."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, char in enumerate(text):
            depth += (char == "(") - (char == ")")
            if depth == 0:
                break
        if i != len(text) - 1:
            return text
        text = text[1:-1]
    return text


def emit(program: Program, reroll: bool | None = None) -> str:
    """The program's source; ``reroll=False`` prints every assignment (tests compare the two; by
    default loops are rerolled on the fast path only, codegen.speed)."""
    kept = unrewritten.guarded(live_assignments(program))
    loops = find_loops(kept, program.shapes, program.dtypes) if (speed.fast if reroll is None else reroll) else []
    scans = None
    if loops:
        program = program.copy()  # what loops need adds symbols of its own
        split = split_step_terms(program, kept, loops)
        if split is not None:
            kept, loops = split, find_loops(split, program.shapes, program.dtypes)
        scans = Scans(program, kept, loops)
        kept = scans.kept
    starting = {loop.start: loop for loop in loops}
    lines = [f"def {program.name}({', '.join(s.name for s in program.inputs)}):"]
    position = 0
    while position < len(kept):
        loop = starting.get(position)
        if loop is not None:
            lines += scans.lines(loop)
            position = loop.end
            continue
        sym, expr = kept[position]
        if scans is not None:
            lines += scans.sums_before(position)
        lines.append(f"    {sym.name} = {bare(value_text(program, expr, program.shapes[sym], program.dtypes[sym]))}")
        position += 1
    outputs = [value_text(program, expr, shape, dtype) for expr, shape, dtype in program.outputs]
    comment = ", ".join(program.output_names)
    lines.append(f"    # returns: {comment}" if comment else "    # returns nothing")
    lines.append(f"    return ({', '.join(outputs)}{',' if len(outputs) == 1 else ''})")
    function = "\n".join(lines) + "\n"
    return HEADER + nan_literals.kept(stable.definitions_for(function) + function)
