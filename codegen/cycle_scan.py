"""A compiled program run as the step of a loop whose state it carries: step by step, or as a scan.

symgrad.replaying hands over the replayed steps of a training loop.  Each step calls the same
program; a *signature* wires its inputs and results: each input is a slot of the state (an int
>= 0), an array from outside (-1 - its number among the step's outside arrays) or a fill
(``("fill", k)``, an array of one constant); each slot of the state after the step is the slot
before (-1), a result of the program (an int), an outside array (``("in", j)``) or a fill.  The
program's first result (the loss) is collected per step.

A run of ``LENGTH`` steps is one ``lax.scan``, loop-invariant outside arrays passed once and the
others stacked, compiled in a thread of its own the first time such a run comes (a loop never
waits for it); until it is ready, and for a shorter run, the program is called step by step.
Nothing here differentiates: the program is the symbolic backward the front end compiled.
"""
from __future__ import annotations

import threading
from itertools import repeat
from operator import is_

import jax
import jax.numpy as jnp
import numpy as np

from codegen import unrolled

LENGTH = 32  # steps per scan


class Stats:
    """Counters for tests: runs made as one scan."""

    def __init__(self):
        self.scans = 0


stats = Stats()
_compiling: list = []


class Loop:
    """One program as a loop's step, with its scans compiled so far (by signature and by which
    outside arrays stay the same)."""

    def __init__(self, program):
        self.program = program  # ``run`` (jitted) and ``python_fn`` (to compose)
        self.scans = {}  # (signature, invariant) -> compiled scan; None while compiling, False if it failed
        self.steps, self.unrolled = 0, None  # steps run one by one; the program's straight-line form
        self.fills = {}  # signature -> its fill arrays

    def _run(self):
        """The program's jitted call: its straight-line form once ready (codegen.unrolled)."""
        straight = self.unrolled
        if straight is None:
            self.steps += 1
            if self.steps >= unrolled.HOT_AFTER and hasattr(self.program, "source"):
                self.unrolled = unrolled.Unrolled(self.program)
            return self.program.run
        return straight.run or self.program.run

    def run(self, signature, fills, state, outside):
        """The first results of each step in turn and the state after them; ``outside``: each
        step's outside arrays; ``fills``: ``("fill", k)`` -> (shape, value, dtype)."""
        arrays = self.fills.get(signature)
        if arrays is None:
            arrays = self.fills[signature] = {k: filled(shape, v, dtype) for k, (shape, v, dtype) in fills.items()}
        fills = arrays
        if len(outside) == LENGTH:
            invariant = tuple([all(map(is_, column, repeat(column[0]))) for column in zip(*outside)])
            key = (signature, invariant)
            scan = self.scans.get(key, 0)
            if scan == 0:
                key, scan = self._covering(key)
            if scan == 0:
                self.scans[key] = None
                self._compile(key, fills, state, outside)
            elif scan:
                invariant = key[1]
                stats.scans += 1
                invariants = [outside[0][j] for j, same in enumerate(invariant) if same]
                varying = [_stacked([a[j] for a in outside]) for j, same in enumerate(invariant) if not same]
                roots, final = scan(tuple(state), tuple(invariants), tuple(varying))
                return roots, list(final)
        roots = []
        for arrays in outside:
            run = self._run()
            try:
                root, state = _step(signature, fills, state, arrays, run)
            except TypeError:  # arguments of other types than the straight-line form was compiled for
                if run is self.program.run:
                    raise
                self.unrolled.run = False
                root, state = _step(signature, fills, state, arrays, self.program.run)
            roots.append(root)
        return roots, state

    def _covering(self, key):
        """A scan of the signature that stacks every array this run varies (and maybe more), and
        its key; else ``key`` and 0.  A number that stops changing (Adam's first bias correction,
        after some hundred steps) or changes again is one more array stacked, not one more compile."""
        signature, invariant = key
        found = key, 0
        for (other, same), scan in self.scans.items():
            if other == signature and scan is not False and all(a or not b for a, b in zip(invariant, same)):
                found = (other, same), scan
                if scan is not None:
                    break
        return found

    def _compile(self, key, fills, state, outside) -> None:
        signature, invariant = key
        python_fn = self.program.python_fn

        def scanned(state, invariants, varying):
            def body(carry, xs):
                inv, var = iter(invariants), iter(xs)
                arrays = [next(inv) if same else next(var) for same in invariant]
                root, new = _step(signature, fills, list(carry), arrays, python_fn)
                return tuple(new), root
            final, roots = jax.lax.scan(body, state, varying, length=LENGTH)
            return roots, final

        def of(a, stacked=False):
            return jax.ShapeDtypeStruct(((LENGTH,) if stacked else ()) + jnp.shape(a), jnp.result_type(a))

        types = (tuple(of(a) for a in state),
                 tuple(of(a) for a, same in zip(outside[0], invariant) if same),
                 tuple(of(a, True) for a, same in zip(outside[0], invariant) if not same))

        def compile_it():
            try:
                self.scans[key] = jax.jit(scanned).lower(*types).compile()
            except Exception:  # noqa: BLE001 - the runs simply go on step by step
                self.scans[key] = False

        thread = threading.Thread(target=compile_it)
        _compiling.append(thread)
        thread.start()


def _step(signature, fills, state, arrays, fn):
    """One step: the program's first result and the state after it."""
    sources, outs = signature
    inputs = [state[s] if s.__class__ is int and s >= 0 else arrays[-1 - s] if s.__class__ is int else fills[s]
              for s in sources]
    results = fn(*inputs)
    return results[0], [state[c] if o == -1 else results[o] if o.__class__ is int else
                        arrays[o[1]] if o[0] == "in" else _like(fills[o], state[c]) for c, o in enumerate(outs)]


def _stacked(arrays):
    """The steps' arrays as one: NumPy's own when they all are NumPy's (a learning rate per step:
    ``jnp.stack`` would convert each one eagerly, ~70 µs for a scan's 32)."""
    for a in arrays:
        if a.__class__ is not np.ndarray:
            return jnp.stack(arrays)
    return np.stack(arrays)


def filled(shape, value, dtype):
    """An array of one value, made by NumPy and put on the device: ``jnp.full`` compiles an XLA
    program for each new shape (~5-17 ms each, four of them in a small MLP's first replayed step)."""
    return jax.device_put(np.full(shape, value, dtype))


def _like(fill, state):
    """A fill as the slot it replaces (a zeroed gradient keeps its shape and dtype)."""
    if fill.shape == jnp.shape(state) and fill.dtype == jnp.result_type(state):
        return fill
    return jnp.full(jnp.shape(state), fill, jnp.result_type(state))


def finish_compiles() -> None:
    """Wait for the scans being compiled (tests and benchmarks, after warming up)."""
    while _compiling:
        _compiling.pop().join()
