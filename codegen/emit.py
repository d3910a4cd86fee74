"""Program -> readable Python source, one assignment per line, built iteratively.

What the source must add to the IR: numbers that stand for whole arrays become
``jnp.full``; an assignment whose expression is smaller than its declared shape is
broadcast to it; one whose operands have other dtypes is cast to its declared dtype (PyTorch's
promotion is decided in the front end, not left to JAX's).  Unused assignments are dropped,
and runs that repeat (codegen.reroll) are printed once, as the body of a ``jax.lax.scan``.
"""
from __future__ import annotations

import sympy as sp

from codegen.printer import DTYPES, to_jax
from codegen.reroll import Loop, find_loops
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


def emit(program: Program, reroll: bool = True) -> str:
    """The program's source; ``reroll=False`` prints every assignment (tests compare the two)."""
    kept = live_assignments(program)
    loops = find_loops(kept, program.shapes, program.dtypes) if reroll else []
    if loops:
        program = program.copy()  # sums over steps get symbols of their own
        kept, totals = _sums_over_steps(program, kept, loops)
    picks = _values_read_from_loops(program, kept, loops)
    starting = {loop.start: loop for loop in loops}
    lines = [f"def {program.name}({', '.join(s.name for s in program.inputs)}):"]
    position = 0
    while position < len(kept):
        loop = starting.get(position)
        if loop is not None:
            lines += _scan(program, kept, loop, loops.index(loop) + 1, picks[loop])
            position = loop.end
            continue
        sym, expr = kept[position]
        for total, loop, offset, first, last in totals.get(position, ()) if loops else ():
            lines.append(f"    {total.name} = jnp.sum({_stack_name(loop, offset)}[{first}:{last + 1}], axis=0)")
        lines.append(f"    {sym.name} = {_value(program, expr, program.shapes[sym], program.dtypes[sym])}")
        position += 1
    outputs = [_value(program, expr, shape, dtype) for expr, shape, dtype in program.outputs]
    comment = ", ".join(program.output_names)
    lines.append(f"    # returns: {comment}" if comment else "    # returns nothing")
    lines.append(f"    return ({', '.join(outputs)}{',' if len(outputs) == 1 else ''})")
    return HEADER + "\n".join(lines) + "\n"


def _sums_over_steps(program, kept, loops):
    """Sums with one term per step of a loop (the gradient of a weight every step reads) read
    the steps' stack in one ``jnp.sum``: the source stays the same size however many steps.
    Returns the assignments with those sums rewritten, and the sums before each position."""
    where = _locator(kept, loops)
    kept, totals = list(kept), {}
    for position, (sym, expr) in enumerate(kept):
        if not expr.is_Add or any(loop.covers(position) for loop in loops):
            continue
        groups: dict = {}
        for term in expr.args:
            found = where(term) if term.is_Symbol else None
            if found is not None:
                loop, iteration, offset = found
                groups.setdefault((loop, offset), []).append((iteration, term))
        rewritten, terms = [], set()
        for (loop, offset), steps in groups.items():
            iterations = sorted(i for i, _ in steps)
            if len(steps) < 2 or iterations[-1] - iterations[0] != len(steps) - 1:
                continue  # not one contiguous range of steps
            stack = _stack_name(loop, offset)
            total = sp.Symbol(f"{stack}_{iterations[0]}_{iterations[-1]}_sum", real=True)
            program.shapes[total], program.dtypes[total] = program.shapes[sym], program.dtypes[sym]
            loop.stacked.add(offset)
            rewritten.append((total, loop, offset, iterations[0], iterations[-1]))
            terms |= {t for _, t in steps}
        if rewritten:
            totals[position] = rewritten
            kept[position] = (sym, sp.Add(*[t for t in expr.args if t not in terms], *[r[0] for r in rewritten]))
    return kept, totals


def _locator(kept, loops):
    """symbol -> (loop, iteration, offset) for symbols a loop defines, else None."""
    position = {sym: i for i, (sym, _) in enumerate(kept)}

    def where(sym):
        p = position.get(sym)
        for loop in loops:
            if p is not None and loop.covers(p):
                return (loop, *loop.locate(p))
        return None
    return where


def _values_read_from_loops(program, kept, loops) -> dict:
    """For each loop, the (iteration, offset) values that printed code reads one by one, and
    (in ``loop.stacked``) the offsets whose every step must be kept.  A loop's last carried
    values need neither: the scan returns them under their own names."""
    where = _locator(kept, loops)
    picks = {loop: set() for loop in loops}
    finals = {loop: {offset for _, offset in loop.carried} for loop in loops}

    def read(symbols, reader=None):
        for r in symbols:
            found = where(r)
            if found is not None and found[0] is not reader:
                loop, iteration, offset = found
                if not (iteration == loop.steps - 1 and offset in finals[loop]):
                    loop.stacked.add(offset)
                    picks[loop].add((iteration, offset))

    covered = [False] * len(kept)
    for loop in loops:
        covered[loop.start:loop.end] = [True] * (loop.end - loop.start)
        template = kept[loop.start:loop.start + loop.period]
        outside = set().union(*(expr.free_symbols for _, expr in template)) - set(loop.strided)
        read(outside, reader=loop)
        for source, offset, _, _ in loop.strided.values():
            source.stacked.add(offset)
    for i, (_, expr) in enumerate(kept):
        if not covered[i]:
            read(expr.free_symbols)
    for expr, _, _ in program.outputs:
        read(expr.free_symbols)
    return picks


def _stack_name(loop: Loop, offset: int) -> str:
    return f"{loop.symbol(0, offset).name}__steps"


def _scan(program, kept, loop: Loop, number: int, picks) -> list[str]:
    """A loop as a nested body function and one ``jax.lax.scan`` call."""
    name = f"loop_{number}"
    template = kept[loop.start:loop.start + loop.period]
    carried_in = [r.name for r, _ in loop.carried]
    carried_out = [loop.symbol(0, offset).name for _, offset in loop.carried]
    finals = [loop.symbol(loop.steps - 1, offset).name for _, offset in loop.carried]
    stacked = sorted(loop.stacked)
    read = sorted(loop.strided, key=lambda s: s.name)
    slices = []
    for r in read:
        source, offset, iteration, direction = loop.strided[r]
        stack = _stack_name(source, offset)
        if direction > 0:
            slices.append(f"{stack}[{iteration}:{iteration + loop.steps}]")
        else:
            slices.append(f"jnp.flip({stack}[{iteration - loop.steps + 1}:{iteration + 1}], 0)")
    lines = [(f"    # {loop.steps} steps of {loop.period} assignment{'s' if loop.period > 1 else ''}, "
              f"printed once and run by jax.lax.scan"),
             f"    def {name}(carry, xs):",
             f"        {_tuple(carried_in)} = carry"]
    if read:
        lines.append(f"        {_tuple([r.name for r in read])} = xs")
    for sym, expr in template:
        lines.append(f"        {sym.name} = {_value(program, expr, program.shapes[sym], program.dtypes[sym])}")
    ys = _tuple([loop.symbol(0, offset).name for offset in stacked]) if stacked else "None"
    lines.append(f"        return {_tuple(carried_out)}, {ys}")
    stacks = _tuple([_stack_name(loop, offset) for offset in stacked]) if stacked else "_"
    xs = _tuple(slices) if slices else "None"
    lines.append(f"    {_tuple(finals)}, {stacks} = jax.lax.scan({name}, {_tuple(carried_in)}, {xs}, "
                 f"length={loop.steps})")
    for iteration, offset in sorted(picks):
        lines.append(f"    {loop.symbol(iteration, offset).name} = {_stack_name(loop, offset)}[{iteration}]")
    return lines


def _tuple(names) -> str:
    return f"({', '.join(names)}{',' if len(names) == 1 else ''})"
