"""Printing the loops codegen.reroll finds: a nested body function and one ``jax.lax.scan``.

A loop's values are read after it in three ways: one value of one step (printed as an index
into the step's stack), a range of steps by a later loop (a slice of the stack, fed as the
scan's ``xs``), or a sum with one term per step (one ``jnp.sum`` over a slice).  The last
step's carried values are the scan's final carry, named as the program names them.

A carried value is stacked as it enters each step (the stack starts with the initial carry),
not as the step computes it: XLA then keeps the carry and the stack apart without copying
(W4's scan: 7.2 ms -> 5.6 ms).  The stack holds steps -1 .. n-2, so a carried value whose last
step is read from a stack is stacked as computed instead.

An input read as ``x[t]`` with ``t`` moving is a slice of ``x`` fed as ``xs``; its gradient
``zeros.at[t].add(g)`` is kept as the rows ``g`` and added back in one scatter, not as an array
of ``x``'s size per step.
"""
from __future__ import annotations

import sympy as sp

from codegen.printer import DTYPES, value_text
from codegen.reroll import Loop, loop_covering
from symgrad.ir.functions import Index, IndexAdd


class Scans:
    """The loops of one program and what the straight-line code around them reads."""

    def __init__(self, program, kept, loops: list[Loop]):
        """``program`` is a copy the sums over steps add their symbols to; ``kept`` its live
        assignments (``loops`` are found in them), rewritten here where a sum reads a stack."""
        self.program, self.kept, self.loops = program, list(kept), loops
        position = {sym: i for i, (sym, _) in enumerate(self.kept)}
        self._position, self._starts = position, [loop.start for loop in loops]
        self.numbers = {loop: i + 1 for i, loop in enumerate(loops)}
        self.finals = {loop: {offset: r for r, offset in loop.carried} for loop in loops}
        self.stacked = {loop: set() for loop in loops}
        self.last_stacked = {loop: set() for loop in loops}  # carried offsets stacked as computed
        self.picks = {loop: set() for loop in loops}
        self.sums: dict = {}  # position -> [(total symbol, loop, offset, first, last)]
        self._strided_reads: set = set()  # (loop, offset) read by a later loop's steps
        self._rewrite_sums()
        self._find_reads()
        self.rows = {loop: self._row_offsets(loop) for loop in loops}

    # ----------------------------------------------------------------- where values are

    def locate(self, sym):
        """(loop, iteration, offset) of a symbol a loop defines, else None."""
        p = self._position.get(sym)
        loop = loop_covering(self.loops, self._starts, p)
        return None if loop is None else (loop, *loop.locate(p))

    def _need(self, loop, offset, first, last):
        """Steps ``first`` .. ``last`` of ``offset`` are read from its stack."""
        self.stacked[loop].add(offset)
        if last == loop.steps - 1 and offset in self.finals[loop]:
            self.last_stacked[loop].add(offset)

    def _slot(self, loop, offset, iteration):
        """(stack name, index) of a step's value."""
        if offset in self.finals[loop] and offset not in self.last_stacked[loop]:
            return f"{self.finals[loop][offset].name}__steps", iteration + 1
        return f"{loop.symbol(0, offset).name}__steps", iteration

    def _range(self, loop, offset, first, last) -> str:
        stack, start = self._slot(loop, offset, first)
        return f"{stack}[{start}:{start + last - first + 1}]"

    # ---------------------------------------------------------------------- reads

    def _rewrite_sums(self):
        """Sums with one term per step of a loop (the gradient of a weight every step reads)
        become one ``jnp.sum`` over the stack: the source keeps its size however many steps."""
        for position, (sym, expr) in enumerate(self.kept):
            if not expr.is_Add or loop_covering(self.loops, self._starts, position) is not None:
                continue
            groups: dict = {}
            for term in expr.args:
                found = self.locate(term) if term.is_Symbol else None
                if found is not None:
                    loop, iteration, offset = found
                    groups.setdefault((loop, offset), []).append((iteration, term))
            totals, summed = [], set()
            for (loop, offset), steps in groups.items():
                iterations = sorted(i for i, _ in steps)
                step = loop.symbol(0, offset)
                if len(steps) < 2 or iterations[-1] - iterations[0] != len(steps) - 1 \
                        or self.program.dtypes[step] == "bool":  # not consecutive steps; or a logical or
                    continue
                total = sp.Symbol(f"{step.name}_{iterations[0]}_{iterations[-1]}_sum", real=True)
                # the sum has its terms' type; the assignment casts and broadcasts it to its own
                self.program.shapes[total], self.program.dtypes[total] = self.program.shapes[step], self.program.dtypes[step]
                totals.append((total, loop, offset, iterations[0], iterations[-1]))
                summed |= {t for _, t in steps}
                self._need(loop, offset, iterations[0], iterations[-1])
            if totals:
                self.sums[position] = totals
                self.kept[position] = (sym, sp.Add(*[t for t in expr.args if t not in summed], *[t[0] for t in totals]))

    def _find_reads(self):
        """Single values read by straight-line code and loop bodies, and the ranges loops read."""
        covered = [False] * len(self.kept)
        for loop in self.loops:
            covered[loop.start:loop.end] = [True] * (loop.end - loop.start)
            template = self.kept[loop.start:loop.start + loop.period]
            self._read(set().union(*(expr.free_symbols for _, expr in template)) - set(loop.strided), loop)
            for source, offset, iteration, direction in loop.strided.values():
                end = iteration + direction * (loop.steps - 1)
                self._need(source, offset, min(iteration, end), max(iteration, end))
                self._strided_reads.add((source, offset))
        for i, (_, expr) in enumerate(self.kept):
            if not covered[i]:
                self._read(expr.free_symbols)
        for expr, _, _ in self.program.outputs:
            self._read(expr.free_symbols)

    def _read(self, symbols, reader=None):
        for r in symbols:
            found = self.locate(r)
            if found is not None and found[0] is not reader:
                loop, iteration, offset = found
                if not (iteration == loop.steps - 1 and offset in self.finals[loop]):  # a final carry
                    self.picks[loop].add((iteration, offset))
                    self._need(loop, offset, iteration, iteration)

    def _row_offsets(self, loop) -> set:
        """Offsets of ``zeros.at[t].add(g)`` (the gradient of ``x[t]``) whose steps are kept as
        their rows ``g``, not as arrays of ``x``'s size each: those the loop's body does not
        read itself and no later loop reads step by step."""
        template = self.kept[loop.start:loop.start + loop.period]
        read_inside = set().union(*(expr.free_symbols for _, expr in template))
        return {offset for offset in loop.moving
                if isinstance(template[offset][1], IndexAdd) and template[offset][0] not in read_inside
                and (loop, offset) not in self._strided_reads}

    def _scattered(self, loop, offset, first, last) -> str:
        """Steps ``first`` .. ``last`` of a row-stacked gradient, added up: one scatter."""
        sym = loop.symbol(0, offset)
        start, by = loop.moving[offset]
        zeros = f"jnp.zeros({self.program.shapes[sym]!r}, dtype={DTYPES[self.program.dtypes[sym]]})"
        rows = f"{sym.name}__rows[{first}:{last + 1}]"
        if by < 0:
            rows = f"jnp.flip({rows}, 0)"
        return f"{zeros}.at[{_indices(start + by * first, by, last - first + 1)}].add({rows})"

    # ------------------------------------------------------------------- printing

    def sums_before(self, position) -> list[str]:
        lines = []
        for total, loop, offset, first, last in self.sums.get(position, ()):
            if offset in self.rows[loop]:
                lines.append(f"    {total.name} = {self._scattered(loop, offset, first, last)}")
            else:  # dtype: JAX would widen an int32 sum
                lines.append(f"    {total.name} = jnp.sum({self._range(loop, offset, first, last)}, axis=0, "
                             f"dtype={DTYPES[self.program.dtypes[total]]})")
        return lines

    def lines(self, loop: Loop) -> list[str]:
        """A loop as a nested body function and one ``jax.lax.scan`` call."""
        program, name = self.program, f"loop__{self.numbers[loop]}"  # '__': no symbol of the IR is named so
        template = self.kept[loop.start:loop.start + loop.period]
        carried_in = [r.name for r, _ in loop.carried]
        carried_out = [loop.symbol(0, offset).name for _, offset in loop.carried]
        finals = [loop.symbol(loop.steps - 1, offset).name for _, offset in loop.carried]
        stacked = sorted(self.stacked[loop])
        read = sorted(loop.strided, key=lambda s: s.name)
        slices = []
        for r in read:
            source, offset, iteration, direction = loop.strided[r]
            if direction > 0:
                slices.append(self._range(source, offset, iteration, iteration + loop.steps - 1))
            else:
                slices.append(f"jnp.flip({self._range(source, offset, iteration - loop.steps + 1, iteration)}, 0)")
        sequence = [offset for offset in sorted(loop.moving) if isinstance(template[offset][1], Index)]
        for offset in sequence:  # x[t] for t moving on: the scan slices x
            slices.append(self._sequence(loop, offset, template[offset][1].args[0]))
        lines = [(f"    # {loop.steps} steps of {loop.period} assignment{'s' if loop.period > 1 else ''}, "
                  f"printed once and run by jax.lax.scan"),
                 f"    def {name}({name}_carry, {name}_xs):"]
        if carried_in:
            lines.append(f"        {_tuple(carried_in)} = {name}_carry")
        if slices:
            bound = [r.name for r in read] + [template[offset][0].name for offset in sequence]
            lines.append(f"        {_tuple(bound)} = {name}_xs")
        for offset, (sym, expr) in enumerate(template):
            if offset not in sequence and offset not in self.rows[loop]:
                lines.append(f"        {sym.name} = {value_text(program, expr, program.shapes[sym], program.dtypes[sym])}")
        ys = [self._entering(loop, offset) for offset in stacked]
        lines.append(f"        return {_tuple(carried_out)}, {_tuple(ys) if ys else 'None'}")
        stacks = _tuple([f"{loop.symbol(0, offset).name}__rows" if offset in self.rows[loop]
                         else self._slot(loop, offset, 0)[0] for offset in stacked]) if stacked else "_"
        xs = _tuple(slices) if slices else "None"
        lines.append(f"    {_tuple(finals) if finals else '_'}, {stacks} = jax.lax.scan({name}, {_tuple(carried_in)}, {xs}, "
                     f"length={loop.steps})")
        for iteration, offset in sorted(self.picks[loop]):
            if offset in self.rows[loop]:
                value = self._scattered(loop, offset, iteration, iteration)
            else:
                stack, index = self._slot(loop, offset, iteration)
                value = f"{stack}[{index}]"
            lines.append(f"    {loop.symbol(iteration, offset).name} = {value}")
        return lines

    def _sequence(self, loop, offset, source) -> str:
        """``source[t]`` for the loop's steps, as one slice (reversed when t counts down)."""
        start, by = loop.moving[offset]
        rows = f"{source.name}[{_indices(start, by, loop.steps)}]"
        return rows if by > 0 else f"jnp.flip({rows}, 0)"

    def _entering(self, loop, offset) -> str:
        """What the body stacks for ``offset``: the carry as it enters, the value computed, or
        (for a gradient of ``x[t]``) its row."""
        if offset in self.rows[loop]:
            return self.kept[loop.start + offset][1].args[0].name
        if offset in self.finals[loop] and offset not in self.last_stacked[loop]:
            return self.finals[loop][offset].name
        return loop.symbol(0, offset).name


def _indices(start, by, count) -> str:
    """The slice holding indices ``start``, ``start + by``, ... (``count`` of them) in increasing
    order; callers flip what they take or put there when ``by`` is negative."""
    lo, hi = sorted((start, start + by * (count - 1)))
    return f"{lo}:{hi + 1}" + ("" if abs(by) == 1 else f":{abs(by)}")


def _tuple(names) -> str:
    return f"({', '.join(names)}{',' if len(names) == 1 else ''})"
