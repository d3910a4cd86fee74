"""Loops in straight-line programs: runs of assignments that repeat, to be emitted as one
``jax.lax.scan`` whose body is printed once.

A graph recorded step by step (``h = sin(h) * h + 0.5`` a thousand times, an RNN unrolled over
time) reaches the IR as a straight line, and so does its gradient, which repeats in reverse.
XLA compiles an unrolled chain slowly (seconds at a thousand steps) and runs it slowly (its
fusion recomputes producers inside the backward); a scan compiles the body once and keeps each
step's values, which the backward loop reads in reverse order.

A loop here is ``steps`` consecutive iterations of ``period`` assignments, each iteration the
first one (the *template*) with every symbol it reads replaced consistently:

* *internal*: defined earlier in the same iteration;
* *carried*: defined by the iteration before (for the first step, by the straight-line
  iteration just before the loop, which gives the initial carry);
* *invariant*: the same symbol at every step (read from the enclosing function);
* *strided*: one step further (or back) at every step through an earlier loop's iterations:
  the backward loop reading the forward loop's values, fed to the scan as sliced stacks.

and an assignment may be ``x[t]`` (or its gradient, ``zeros.at[t].add(g)``) with ``t`` *moving*
by a fixed step: an RNN reading its input sequence row by row.

Nothing is assumed from names: candidate runs come from a name-free signature per assignment
and every iteration is checked to be the template with its symbols substituted.
"""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from symgrad.ir.functions import Index, IndexAdd

MIN_STEPS = 4     # a scan pays off from a few steps on (measured: faster than the unrolled form at 10)
MAX_PERIOD = 256  # assignments per iteration looked for (a 3-layer LSTM's backward step has ~80)


@dataclass(eq=False)
class Loop:
    start: int          # position of the template (the first scanned iteration) in the assignment list
    period: int
    steps: int
    carried: list       # (symbol read from the iteration before the template, offset that defines its successor)
    strided: dict       # template's symbol -> (earlier loop, offset in it, iteration read by the template, +1/-1)
    symbols: list       # the symbols the loop defines, step after step
    moving: dict = field(default_factory=dict)  # offset -> (first index, index step): x[t] reads, their gradients

    @property
    def end(self) -> int:
        return self.start + self.period * self.steps

    def covers(self, position: int) -> bool:
        return self.start <= position < self.end

    def locate(self, position: int) -> tuple[int, int]:
        """(iteration, offset) of a position this loop covers."""
        return divmod(position - self.start, self.period)

    def symbol(self, iteration: int, offset: int):
        return self.symbols[iteration * self.period + offset]


def loop_covering(loops: list[Loop], starts: list[int], position):
    """The loop (of ``loops``, sorted by ``starts``) that covers ``position``, or None."""
    if position is None:
        return None
    i = bisect.bisect_right(starts, position) - 1
    return loops[i] if i >= 0 and loops[i].covers(position) else None


def find_loops(assignments, shapes, dtypes) -> list[Loop]:
    """The loops in ``assignments`` (a live, ordered list of (symbol, expression)), by start."""
    return _Finder(assignments, shapes, dtypes).loops


def split_step_terms(program, assignments, loops):
    """``assignments`` with each sum of one product per step (``g_1*s_1 + g_2*s_2 + ...``, the
    gradient of a weight every step reads elementwise) split: each term gets an assignment of
    its own, in step order, just before the sum.  Those assignments repeat, so a second
    ``find_loops`` makes them a loop, and the sum one of bare symbols.  Returns None when
    there is nothing to split.  ``program`` (a copy) takes the new symbols."""
    position = {sym: i for i, (sym, _) in enumerate(assignments)}
    starts = [loop.start for loop in loops]

    def first_step_read(term):
        reads = [position[r] for r in term.free_symbols
                 if loop_covering(loops, starts, position.get(r)) is not None]
        return min(reads) if reads else None

    result, split = [], False
    for i, (sym, expr) in enumerate(assignments):
        # a float sum: each term computed in the sum's dtype adds up as the whole sum would
        if expr.is_Add and program.dtypes[sym].startswith("float") and loop_covering(loops, starts, i) is None:
            steps = []
            for term in expr.args:
                first = None if term.is_Symbol else first_step_read(term)
                if first is not None:
                    steps.append((first, term))
            if len(steps) > MIN_STEPS:
                steps.sort(key=lambda step: step[0])
                terms = [term for _, term in steps]
                symbols = [program.assign(t, program.shape_of(t), program.dtypes[sym], "term", fold=False)
                           for t in terms]
                result += list(zip(symbols, terms))
                split_off = set(terms)
                expr = sp.Add(*[t for t in expr.args if t not in split_off], *symbols)
                split = True
        result.append((sym, expr))
    return result if split else None


class _Finder:
    """Candidate runs, longest first; each kept if its iterations check out."""

    def __init__(self, assignments, shapes, dtypes):
        self.assignments, self.shapes, self.dtypes = assignments, shapes, dtypes
        self.position = {sym: i for i, (sym, _) in enumerate(assignments)}
        self._forms: dict = {}  # (position, moving) -> the assignment's own form, made once
        self.loops: list[Loop] = []
        self.starts: list[int] = []
        self.taken = [False] * len(assignments)
        runs = _periodic_runs(self._signatures())
        while runs:  # a run may read a loop found after it: retry the rest after each find
            found, failed = len(self.loops), []
            for run in runs:
                parts = self._untaken(*run)
                while parts:
                    first, period, repeats = parts.pop()
                    loop = self._loop_in(first, period, repeats)
                    if loop is None:
                        failed.append((first, period, repeats))
                        continue
                    self._keep(loop)
                    rest = (first + period * repeats - loop.end) // period
                    if rest > MIN_STEPS:  # the run goes on differently (another weight): try the rest now
                        parts.append((loop.end, period, rest))
            runs = failed if len(self.loops) > found else []

    def _untaken(self, first, period, repeats):
        """The parts of a run that no loop has taken, as runs of their own."""
        taken, end, parts = self.taken, first + period * repeats, []
        if not any(taken[first:end]):
            return [(first, period, repeats)]
        i = first
        while i < end:
            if taken[i]:
                i += 1
                continue
            j = i
            while j < end and not taken[j]:
                j += 1
            if (j - i) // period > MIN_STEPS:
                parts.append((i, period, (j - i) // period))
            i = j
        return parts

    def _keep(self, loop):
        i = bisect.bisect_left(self.starts, loop.start)
        self.loops.insert(i, loop)
        self.starts.insert(i, loop.start)
        self.taken[loop.start - loop.period:loop.end] = [True] * (loop.end - loop.start + loop.period)

    def _own_form(self, position, moving):
        key = (position, moving)
        form = self._forms.get(key)
        if form is None:
            form = self._forms[key] = _form(self.assignments[position][1], {}, moving=moving)
        return form

    def _same_type(self, a, b) -> bool:
        return self.shapes[a] == self.shapes[b] and self.dtypes[a] == self.dtypes[b]

    def _signatures(self) -> list[int]:
        """One small integer per assignment, equal for assignments that could be the same step:
        the shape and dtype of the result and of each symbol read, and the expression's form."""
        interned: dict = {}
        typed = {s: (shape, self.dtypes[s]) for s, shape in self.shapes.items()}
        return [interned.setdefault((self.shapes[sym], self.dtypes[sym], _form(expr, typed, moving=True)),
                                    len(interned)) for sym, expr in self.assignments]

    def _loop_in(self, first, period, repeats):
        """The loop at the first phase of a periodic run that gives one (the run's rest, if the
        loop stops early, is tried again by the caller); None if no phase gives a long enough one."""
        for phase in range(period):
            steps = (period * repeats - phase) // period - 1  # the run's first iteration is the prefix
            if steps < MIN_STEPS:
                return None
            loop = self._loop_at(first + phase + period, period, steps)
            if loop is not None:
                return loop
        return None

    def _loop_at(self, start, period, steps):
        """The loop whose template starts at ``start``, with as many of ``steps`` as check out.

        What each symbol the template reads is (carried, strided, ...) is read off the template
        and the step after it; ``_matching_steps`` then checks every step against that."""
        assignments, position = self.assignments, self.position
        prefix = start - period
        carried, strided, moving = {}, {}, {}
        for offset in range(period):
            template = assignments[start + offset][1]
            following = assignments[start + period + offset][1]
            index, next_index = moving_index(template), moving_index(following)
            if index is not None and next_index is not None and next_index != index:
                moving[offset] = (index, next_index - index)
            near = {}  # symbols of the prefix and the template -> their successors one step on
            for r in template.free_symbols:
                p = position.get(r, -1)
                if prefix <= p < start + period:
                    near[r] = assignments[p + period][0]
                    if p < start:
                        carried[r] = p - prefix
            later = following.free_symbols - set(near.values())
            for r in template.free_symbols - set(near) - later:  # those in ``later`` are invariant
                stride = self._stride(r, later)
                if stride is None:
                    return None
                strided[r] = stride
        for offset in moving:  # x in x[t] must be the same array at every step: the scan slices it
            expr = assignments[start + offset][1]
            if isinstance(expr, Index) and (position.get(expr.args[0], -1) >= prefix or expr.args[0] in strided):
                return None
        if not all(self._same_type(r, assignments[start + offset][0]) for r, offset in carried.items()):
            return None  # the initial carry must have the type of what follows it
        for loop, _, iteration, direction in strided.values():  # stay inside the stacks read
            steps = min(steps, loop.steps - iteration if direction > 0 else iteration + 1)
        steps = self._matching_steps(start, period, steps, strided, moving)
        if steps < MIN_STEPS:
            return None
        symbols = [sym for sym, _ in assignments[start:start + period * steps]]
        return Loop(start, period, steps, sorted(carried.items(), key=lambda item: item[1]), strided, symbols,
                    moving)

    def _stride(self, r, later):
        """How ``r`` moves from one step to the next when it lies in an earlier loop: one
        iteration forward or back through it, if the next step reads that symbol."""
        p = self.position.get(r)
        loop = loop_covering(self.loops, self.starts, p)
        if loop is not None:
            iteration, offset = loop.locate(p)
            for direction in (1, -1):
                following = iteration + direction
                if 0 <= following < loop.steps and loop.symbol(following, offset) in later:
                    return loop, offset, iteration, direction
        return None

    def _matching_steps(self, start, period, steps, strided, moving) -> int:
        """How many steps from the template on are the template with its symbols moved on."""
        assignments = self.assignments
        template = assignments[start:start + period]
        reads = set().union(*(expr.free_symbols for _, expr in template))
        near = [(r, self.position[r]) for r in reads if start - period <= self.position.get(r, -1) < start + period]
        for step in range(1, steps):
            moved = {r: assignments[p + step * period][0] for r, p in near}
            for r, (loop, offset, iteration, direction) in strided.items():
                moved[r] = loop.symbol(iteration + direction * step, offset)
            for offset, (sym, expr) in enumerate(template):
                other, other_expr = assignments[start + step * period + offset]
                position = start + step * period + offset
                if offset in moving:
                    first, by = moving[offset]
                    if moving_index(other_expr) != first + by * step \
                            or _form(expr, moved, moving=True) != self._own_form(position, True):
                        return step
                elif _form(expr, moved) != self._own_form(position, False):
                    return step
                if not self._same_type(sym, other):
                    return step
        return steps


def moving_index(expr):
    """``t`` of ``x[t]`` (an Index by one integer) or of its gradient ``zeros.at[t].add(g)``: an
    index that may move by a fixed step from one step of a loop to the next (an RNN reading
    its input sequence).  None for anything else."""
    if isinstance(expr, (Index, IndexAdd)) and expr.args[0].is_Symbol:
        spec = expr.args[1]
        if len(spec) == 1 and int(spec[0][0]) == 0 and int(spec[0][1]) >= 0:
            return int(spec[0][1])
    return None


def _form(expr, names, moving=False):
    """A hashable description of ``expr``, its symbols replaced as ``names`` says: equal for two
    expressions that compute the same thing, whatever order SymPy gave the terms of a sum or a
    product (it orders them by symbol name).  ``moving``: a moving index is left out."""
    if moving and moving_index(expr) is not None:
        return expr.func, names.get(expr.args[0], expr.args[0]), tuple(expr.args[2:])
    if expr.is_Symbol:
        return names.get(expr, expr)
    if not expr.args:
        return expr
    children = [_form(a, names) for a in expr.args]
    if isinstance(expr, (sp.Add, sp.Mul)):
        return expr.func, frozenset(Counter(children).items())
    return expr.func, tuple(children)


def _periodic_runs(signatures):
    """(first position, period, repeats) of runs whose signatures repeat, longest coverage first."""
    sig = np.asarray(signatures)
    n = len(sig)
    runs = []
    for period in range(1, min(MAX_PERIOD, n // (MIN_STEPS + 1)) + 1):
        same = np.concatenate(([False], sig[:-period] == sig[period:], [False]))
        edges = np.flatnonzero(same[1:] != same[:-1])  # starts and ends of runs of equal pairs
        for first, end in zip(edges[::2].tolist(), edges[1::2].tolist()):
            repeats = (end + period - first) // period
            if repeats > MIN_STEPS:
                runs.append((first, period, repeats))
    runs.sort(key=lambda run: (-run[1] * run[2], run[1]))
    return runs
