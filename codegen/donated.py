"""A compiled program that may write its results into input buffers its caller gives up.

Without donation XLA allocates every result afresh.  A training step on a big model returns
new parameters, optimizer state and gradients each call while the old ones die just after it,
and fresh multi-megabyte buffers fault their pages in: on this machine W6's step (a 784-512-512-10
MLP, four sets of 2.7 MB) took 1.19-1.27x ``jax.jit``'s time, 1.02-1.09x with its dead inputs
donated (``jax.jit``'s ``donate_argnums``), so that XLA writes the results into them.

Which inputs are dead is the caller's knowledge (symgrad.donation); this module only compiles
the variant, in a thread of its own so that a loop never waits for it, and donates only inputs
that some result of the same shape and dtype can take (XLA warns about the others).
"""
from __future__ import annotations

import threading

import jax
import numpy as np

from codegen import speed

HOT_AFTER = 3  # calls offering the same inputs before their variant is compiled: a loop's first
               # steps (each a program of its own) and one-off calls compile nothing more
_compiling: list = []  # threads compiling variants (``finish_compiles`` waits for them)


class Stats:
    """Counters for tests: variants compiled and calls that donated."""

    def __init__(self):
        self.compiles = self.calls = 0


stats = Stats()


def aliasable(program) -> frozenset:
    """The inputs of ``program`` that some result of the same shape and dtype could be written
    into: the only ones worth giving up."""
    results = {(tuple(shape), dtype) for _, shape, dtype in program.outputs}
    return frozenset(p for p, s in enumerate(program.inputs) if (program.shapes[s], program.dtypes[s]) in results)


def _usable(program, positions) -> tuple:
    """The ``positions`` (inputs of ``program``) that a result can be written into: per shape
    and dtype, at most as many as there are results of that shape and dtype."""
    free = {}
    for _, shape, dtype in program.outputs:
        free[(tuple(shape), dtype)] = free.get((tuple(shape), dtype), 0) + 1
    chosen = []
    for p in positions:
        symbol = program.inputs[p]
        slot = (program.shapes[symbol], program.dtypes[symbol])
        if free.get(slot):
            free[slot] -= 1
            chosen.append(p)
    return tuple(chosen)


class Variants:
    """The donating variants of one compiled program, by the positions they donate."""

    __slots__ = ("python_fn", "program", "usable", "offers", "compiled")

    def __init__(self, python_fn, program):
        self.python_fn, self.program = python_fn, program
        self.usable, self.compiled = {}, {}  # positions offered -> those donated; those -> variant
        self.offers = {}  # positions offered -> how many calls offered them, until HOT_AFTER

    def call(self, offered: tuple, arrays):
        """The results on ``arrays`` of the variant donating what it can of ``offered``, or None
        when there is none ready (it compiles meanwhile, on the first call's types) or the
        arrays' types are not those it was compiled for: the caller then runs the program."""
        positions = self.usable.get(offered)
        if positions is None:
            positions = self.usable[offered] = _usable(self.program, offered)
        if not positions:
            return None
        compiled = self.compiled.get(positions)
        if compiled is None and speed.fast:
            offers = self.offers[offered] = self.offers.get(offered, 0) + 1
            if offers < HOT_AFTER:
                return None
            self.compiled[positions] = False
            thread = threading.Thread(target=self._compile, args=(positions, [_zeros_like(a) for a in arrays]))
            _compiling.append(thread)  # Python waits for it at exit
            thread.start()
        if not compiled:
            return None
        results = compiled(*arrays)
        stats.calls += 1
        return results

    def _compile(self, positions, zeros):
        """The jitted variant, called once on zeros of the arrays' types: that compiles it into
        jit's own cache (a later call on other types compiles again instead of failing)."""
        variant = jax.jit(self.python_fn, donate_argnums=positions)
        try:
            jax.block_until_ready(variant(*zeros))
        except Exception:  # noqa: BLE001 - the program keeps running without donating
            return
        self.compiled[positions] = variant
        stats.compiles += 1


def _zeros_like(array):
    """Zeros of ``array``'s shape, dtype and weak type, to compile for (and give up)."""
    return jax.numpy.zeros_like(array) if isinstance(array, jax.Array) else np.zeros_like(array)


def finish_compiles() -> None:
    """Wait for the variants being compiled (tests and benchmarks, after warming up)."""
    while _compiling:
        _compiling.pop().join()
