"""Source -> a jitted JAX function, and the cache that makes a rebuilt graph free.

The cache is keyed by whatever hashable structural key the caller computes; codegen never
looks at the front end's graph.  A hit costs one dict lookup.  A miss builds the Program
(SymPy work), emits source and compiles it with XLA on its first call; the time of each
phase is kept in ``stats`` so growth with graph size is visible.
"""
from __future__ import annotations

import itertools
import linecache
import math
import threading
import time
import weakref
from dataclasses import dataclass, field

import jax

from codegen import deferred, donated, speed
from codegen.emit import emit
from symgrad.ir import Program


@dataclass
class CompiledProgram:
    """A compiled program with the IR and source it came from."""

    program: Program
    source: str
    fn: object            # the jitted function
    python_fn: object     # the same, before jax.jit: for callers that bind constants into it

    def __post_init__(self):
        self.run = self._first_run  # replaced by the jitted function itself after the first call
        self.result_count = len(self.program.outputs)
        shapes = [self.program.shapes[s] for s in self.program.inputs] + [o[1] for o in self.program.outputs]
        self.small = sum(math.prod(shape) for shape in shapes) <= deferred.MAX_ELEMENTS
        self.calls, self.wait = 0, deferred.HOT_AFTER  # kept by deferred.call: hot programs are deferred
        self.variants = None  # codegen.donated, made when a caller first gives up inputs

    def _first_run(self, *arrays):
        """The first call compiles with XLA (timed into ``stats``)."""
        start = time.perf_counter()
        out = self.fn(*arrays)
        jax.block_until_ready(out)
        stats.xla_seconds += time.perf_counter() - start
        self.run = self.fn
        return out

    def __call__(self, *arrays):
        return self.run(*arrays)

    def run_donating(self, positions: tuple, arrays):
        """The results on ``arrays``, writing them into the inputs at ``positions`` where XLA
        can (the caller gives those up); None when no such variant is ready (codegen.donated)."""
        if self.variants is None:
            self.variants = donated.Variants(self.python_fn, self.program)
        return self.variants.call(positions, arrays)


@dataclass
class Stats:
    """Counters that tests use to prove the cache works (not timings)."""

    compiles: int = 0
    hits: int = 0
    sympy_seconds: float = 0.0
    emit_seconds: float = 0.0
    xla_seconds: float = 0.0
    ir_nodes: list = field(default_factory=list)      # per compiled program: its size in the IR
    source_lines: list = field(default_factory=list)  # and in emitted source (loops printed once)

    def reset(self):
        self.__init__()


stats = Stats()

# SymPy's caches are not safe to use from two threads at once (two threads building programs
# left 8**-1 == 8 in its cache about one run in forty): one thread builds at a time.
building = threading.RLock()


_numbers = itertools.count()


def compile_program(program: Program) -> CompiledProgram:
    """Emit, exec and jit ``program``.  Its source is registered with ``linecache`` under a name
    of its own (``<symgrad:forward_backward:3>``) while the program lives, so a traceback or a
    debugger stepping into it shows the generated lines."""
    start = time.perf_counter()
    source = emit(program)
    filename = f"<symgrad:{program.name}:{next(_numbers)}>"
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    python_fn = namespace[program.name]
    stats.emit_seconds += time.perf_counter() - start
    compiled = CompiledProgram(program, source, jax.jit(python_fn), python_fn)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(compiled, linecache.cache.pop, filename, None)
    return compiled


class ProgramCache:
    """Structural key -> compiled program, holding at most ``capacity`` over both paths, the least
    recently used going first.

    Each compiled program holds XLA's executable, 5 to 16 memory mappings of JIT code and data;
    Linux allows a process 65,530, so a process that compiled a few thousand programs and kept them
    all crashed in LLVM ("Cannot allocate memory", then a segmentation fault; the random-loops
    fuzzer, about 7,000 programs in).  Programs of the fast and the plain path (codegen.speed) are
    kept apart: a rerolled program, or a replay, must not serve the plain path."""

    def __init__(self, capacity: int = 1024):
        self._paths = ({}, {})  # plain, fast
        self.capacity = capacity
        self.cleared = 0  # times cleared: a program held elsewhere (symgrad.cycles) is not used past a clear
        self._clock = 0  # counts uses: a program's ``used`` is the count at its last one

    @property
    def _programs(self) -> dict:
        return self._paths[speed.fast]

    def find(self, key):
        """The program for ``key``, or None (a hit is counted, and marks the program used)."""
        compiled = self._paths[speed.fast].get(key)
        if compiled is not None:
            stats.hits += 1
            self._clock += 1
            compiled.used = self._clock
        return compiled

    def put(self, key, compiled):
        while len(self._paths[0]) + len(self._paths[1]) >= self.capacity > 0:
            self._evict()
        self._clock += 1
        compiled.used = self._clock
        self._programs[key] = compiled
        return compiled

    def _evict(self) -> None:
        """Forget the least recently used program (a scan: it runs only when one is compiled)."""
        programs, key = min(((programs, key) for programs in self._paths for key in programs),
                            key=lambda pair: pair[0][pair[1]].used)
        del programs[key]

    def get(self, key, build):
        """The compiled program for ``key``; ``build()`` makes its Program on a miss."""
        compiled = self.find(key)
        if compiled is not None:
            return compiled
        with building:
            compiled = self._programs.get(key)  # built by another thread meanwhile
            if compiled is not None:
                return compiled
            start = time.perf_counter()
            program = build()
            stats.sympy_seconds += time.perf_counter() - start
            compiled = compile_program(program)
            stats.compiles += 1
            stats.ir_nodes.append(program.node_count())
            stats.source_lines.append(compiled.source.count("\n"))
            return self.put(key, compiled)

    def clear(self):
        """Forget every program (and, through ``cleared``, every replay holding one)."""
        self.cleared += 1
        for programs in self._paths:
            programs.clear()

    def __len__(self):
        return len(self._programs)


cache = ProgramCache()
