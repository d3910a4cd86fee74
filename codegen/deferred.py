"""Calls of small compiled programs, deferred and run back to back as one XLA call.

On small tensors a jitted call is mostly JAX's dispatch (about 2.5 µs, plus about 0.25 µs per
argument and 0.75 µs per result on this machine), not arithmetic.  A torch-style training
loop makes one such call per step, and the next step only feeds its results into the next
call.  So a call of a *hot* (called ``HOT_AFTER`` times in a row) and *small* (``MAX_ELEMENTS``)
program is deferred: it returns ``Pending`` placeholders, and later calls that read them join the
same *chain*.  A chain runs as one jitted composition of its programs' Python functions when
it holds ``MAX_CHAIN`` calls (once a loop has proven long: ``FUSE_AFTER``; until then, and while
that program compiles, call by call), or as soon as anyone needs one of its values
(``Pending.get``).

Only the results still referenced when the chain runs come back out of it: a placeholder
that nobody holds any more (last step's loss, a gradient already folded into an update) is
never needed again, and Python's reference counting says so exactly.  Programs are pure, so
running later changes no value; a chain is run whole, so every live placeholder gets its
array.  Nothing here differentiates: the programs composed are the symbolic ones.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import weakref

import jax
import jax.numpy as jnp
from jax.core import Tracer

try:  # whether JAX is tracing here: no public spelling; without it, on_arrays always takes the safe way
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # pragma: no cover - depends on the JAX version
    def _trace_state_clean() -> bool:
        return False


def on_arrays():
    """A context in which jitted calls compute arrays even while JAX traces a function around them
    (``ensure_compile_time_eval``), entered only then: the setting is part of jit's cache key, so a
    program also called there was compiled twice (a 70 ms stall the first time a loop read a value
    in the middle of a chain)."""
    return contextlib.nullcontext() if _trace_state_clean() else jax.ensure_compile_time_eval()

from codegen import speed

MAX_CHAIN = 16        # calls per chain: one dispatch instead of sixteen
HOT_AFTER = 8         # calls of a program in a row (no value read) before its calls are deferred
MAX_WAIT = 1024       # the longest a program read after every call waits before it is tried again
FUSE_AFTER = 32       # full chains of one shape before their fused program is compiled (~500 steps):
                      # compiling costs ~50 ms of the loop's time, which only a long loop wins back
MAX_ELEMENTS = 4096   # inputs and outputs of a deferred program, in elements: dispatch-bound sizes


class Pending:
    """One result of a deferred call, until its chain runs."""

    __slots__ = ("call", "index", "array", "__weakref__")

    def __init__(self, call, index):
        self.call, self.index, self.array = call, index, None

    def get(self):
        """The array, running the chain this result belongs to if it has not run yet.

        Someone needed a value before the chain was full: its programs go back to being
        called at once until they are hot again, and a program read right after its first
        deferred call (a loop that prints every step's loss) waits twice as long next time."""
        if self.array is None:
            chain = self.call.chain
            with chain.lock:  # the chain's own thread may be adding to it, or another running it
                if self.array is None:
                    for call in chain.calls:
                        call.program.calls = 0
                        if len(chain.calls) == 1:
                            call.program.wait = min(2 * call.program.wait, MAX_WAIT)
                    chain.run(self)
        return self.array


class _Call:
    __slots__ = ("program", "wiring", "chain", "position", "results")

    def __init__(self, program, wiring, chain, position):
        self.program, self.wiring, self.chain, self.position = program, wiring, chain, position
        self.results = ()  # weak references to the Pending results


class _Chain:
    """Deferred calls of one thread, in order, and the arrays they take from outside.

    A chain is a first call and then repeats of one call: the same program, wired the same way
    to the calls before it (a loop's step).  So a full chain compiles one fused program per
    loop, whatever arrays each step reads; a call that breaks the pattern runs the chain first.
    Another thread may read one of its values, and so run it: ``lock`` is held to add or run.
    """

    __slots__ = ("calls", "arrays", "done", "lock")

    def __init__(self):
        self.calls, self.arrays, self.done = [], [], False
        self.lock = threading.Lock()

    def accepts(self, program, wiring) -> bool:
        calls = self.calls
        if len(calls) < 2:
            return True
        last = calls[-1]
        return last.program is program and last.wiring == wiring

    def wire(self, inputs):
        """Each input as None (an array from outside, in order: ``arrays`` gets it) or as
        (how many calls back, which result); None when some input is being traced by JAX, or
        is a value of another thread's chain not yet run (run at once, outside this lock)."""
        wiring, arrays = [], []
        here = len(self.calls)
        for value in inputs:
            cls = value.__class__
            if cls is Pending:
                call = value.call
                if call.chain is self:
                    wiring.append((here - call.position, value.index))
                    continue
                value = value.array  # of a chain already run, or of another thread's
                if value is None:
                    return None, None
            elif cls not in _UNTRACED:
                if isinstance(value, Tracer):
                    return None, None
                _UNTRACED.add(cls)
            wiring.append(None)
            arrays.append(value)
        return tuple(wiring), arrays

    def add(self, program, wiring, arrays):
        call = _Call(program, wiring, self, len(self.calls))
        results = tuple([Pending(call, i) for i in range(program.result_count)])
        call.results = tuple([weakref.ref(p) for p in results])
        self.calls.append(call)
        self.arrays += arrays
        return results

    def run(self, asking=None) -> None:
        """Run the chain's calls (one jitted program when it is full), ``lock`` held; live
        placeholders get their arrays (``asking``, the one whose ``get`` ran it, among them: a
        chain of symgrad.cycles computes only that one).  Always on arrays, never traced: a
        value read while JAX traces a function (a pending tensor captured by ``value_and_grad``)
        is a constant of that trace, and the chain's other results must not become tracers."""
        with on_arrays():
            self._run()

    def _run(self) -> None:
        self.done = True
        calls = self.calls
        live, wanted = [], []
        for c, call in enumerate(calls):
            for i, ref in enumerate(call.results):
                pending = ref()
                if pending is not None:
                    live.append(pending)
                    wanted.append((c, i))
        if len(calls) == MAX_CHAIN:
            head, tail = calls[0], calls[1]
            tail.program.wait = HOT_AFTER
            key = (id(head.program), head.wiring, id(tail.program), tail.wiring, tuple(wanted))
            fused = _fused.get(key, 0)
            if fused.__class__ is int:  # full chains of this shape seen so far
                if len(_fused) >= 256:
                    _fused.clear()
                if fused + 1 < FUSE_AFTER:
                    _fused[key], fused = fused + 1, None
                else:
                    fused = _fused[key] = _Fused([call.program for call in calls],
                                                 [call.wiring for call in calls], wanted, self.arrays)
            results = fused.run(self.arrays) if fused is not None else None
        else:
            results = None
        if results is None:  # cut short, or its fused program is still compiling: call by call
            results = _compose([call.program.run for call in calls], [call.wiring for call in calls],
                               wanted, self.arrays)
        stats.chains_run += 1
        for pending, array in zip(live, results):
            pending.array = array
        self.calls, self.arrays = [], []  # calls refer to their chain: no cycle is left behind


def _compose(functions, wirings, wanted, arrays):
    """The ``wanted`` (call, result) pairs of ``functions`` called in turn as ``wirings`` say."""
    results, outside = [], iter(arrays)
    for function, wiring in zip(functions, wirings):
        here = len(results)
        args = [next(outside) if w is None else results[here - w[0]][w[1]] for w in wiring]
        results.append(function(*args))
    return tuple([results[c][i] for c, i in wanted])


class _Fused:
    """One XLA program for a full chain, compiled in a thread of its own while the loop goes on
    (its chains run call by call until it is ready): a loop never waits for it, so a short loop
    costs no more than before.  It keeps the programs whose ids are in its key.

    When each repeat reads only the call just before it and only the last call's results are
    wanted (a training loop), the repeats after the first are a ``lax.scan`` of one step: it
    compiles in the time of two steps, not of sixteen.
    """

    __slots__ = ("programs", "compiled", "thread")

    def __init__(self, programs, wirings, wanted, arrays):
        functions = [program.python_fn for program in programs]
        tail = wirings[1]
        if all(w is None or w[0] == 1 for w in tail) and all(c == len(programs) - 1 for c, _ in wanted):
            fn = functools.partial(_looped, functions[0], functions[1], wirings[0], tail, len(programs), wanted)
        else:
            fn = functools.partial(_compose, functions, wirings, wanted)
        types = [jax.ShapeDtypeStruct(jnp.shape(a), jnp.result_type(a)) for a in arrays]
        self.programs, self.compiled = programs, None
        self.thread = threading.Thread(target=self._compile, args=(fn, types))  # Python waits for it at exit
        self.thread.start()
        stats.fused_compiles += 1

    def _compile(self, fn, types):
        try:
            self.compiled = jax.jit(lambda *arrays: fn(arrays)).lower(*types).compile()
        except Exception:  # noqa: BLE001 - the chains simply keep running call by call
            self.compiled = False

    def run(self, arrays):
        """The results, or None while compiling (or if this composition could not be compiled)."""
        if not self.compiled:
            return None
        try:
            return self.compiled(*arrays)
        except TypeError:  # arrays of another type than the first chain's (weakly typed, say)
            self.compiled = False
            return None


def finish_compiles() -> None:
    """Wait for the fused programs being compiled (tests and benchmarks, after warming up)."""
    for fused in list(_fused.values()):
        if fused.__class__ is _Fused:
            fused.thread.join()


def _looped(head, step, head_wiring, step_wiring, count, wanted, arrays):
    """``_compose`` of ``head`` and then ``count - 1`` calls of ``step``, the last ones as a scan.

    A chain's first call reads nothing of the chain, so ``head`` takes its arrays in order."""
    outside = len(step_wiring) - sum(w is not None for w in step_wiring)  # arrays per step

    def step_args(previous, arrays):
        arrays = iter(arrays)
        return [next(arrays) if w is None else previous[w[1]] for w in step_wiring]

    first = len(head_wiring) + outside
    results = step(*step_args(head(*arrays[:len(head_wiring)]), arrays[len(head_wiring):first]))
    rest = arrays[first:]
    xs = [jnp.stack(rest[j::outside]) for j in range(outside)] if outside else None
    results, _ = jax.lax.scan(lambda carry, x: (tuple(step(*step_args(carry, x or ()))), None),
                              tuple(results), xs, length=count - 2)
    return tuple([results[i] for _, i in wanted])


class _State(threading.local):
    chain = None


class Stats:
    """Counters for tests: chains run and fused programs compiled."""

    def __init__(self):
        self.chains_run = self.fused_compiles = 0


_state = _State()
_fused: dict = {}
_UNTRACED: set = set()  # classes of inputs seen that are not JAX tracers (arrays): one lookup per input
stats = Stats()


def call(program, inputs):
    """``program``'s results on ``inputs`` (arrays or Pending): arrays now, or Pending later.

    ``program`` has ``run`` (the jitted call), ``python_fn``, ``result_count``, ``small``, a
    ``calls`` counter and how many calls it ``wait``s before it is deferred (``HOT_AFTER``).
    """
    program.calls += 1
    if program.small and program.calls > program.wait and speed.fast:
        results = _deferred(program, inputs)
        if results is not None:
            return results
    return program.run(*[v.get() if v.__class__ is Pending else v for v in inputs])


def _deferred(program, inputs):
    """``program``'s Pending results, added to this thread's chain; None when it must run now."""
    while True:
        chain = _state.chain
        if chain is None or chain.done:
            chain = _state.chain = _Chain()
        with chain.lock:
            if chain.done:  # run meanwhile by another thread that read one of its values
                continue
            wiring, arrays = chain.wire(inputs)
            if wiring is None:
                return None
            if len(chain.calls) < MAX_CHAIN and chain.accepts(program, wiring):
                return chain.add(program, wiring, arrays)
            chain.run()  # full, or this call breaks its pattern: the next chain starts with it


def value(array):
    """``array`` itself, or a Pending's array (running its chain if needed)."""
    return array.get() if array.__class__ is Pending else array
