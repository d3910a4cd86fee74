"""A hot program's straight-line form, for the steady state of a loop that calls it.

codegen.reroll prints repeated runs of assignments once, as a ``lax.scan``: XLA compiles that
in a fraction of the time, which a first call needs.  Called again and again, the straight-line
form runs faster on CPU (measured on W4's chain of 100 steps: 1.7-2.0 ms rerolled against
1.5-1.7 ms unrolled, as fast as ``jax.jit`` of the same function written in ``jax.numpy``), so
a loop that has called a rerolled program ``HOT_AFTER`` times gets it compiled unrolled, in a
thread of its own, and calls that once it is ready.  Programs beyond ``MAX_ASSIGNMENTS`` stay
rerolled (XLA's compile time grows too fast with an unrolled chain).
"""
from __future__ import annotations

import threading

import jax

import codegen.compile as programs  # module imports: importing codegen may be what imports symgrad
import codegen.emit as emitter

HOT_AFTER = 64
MAX_ASSIGNMENTS = 2000

_compiling: list = []


class Unrolled:
    """The straight-line form of one compiled program: None until it is compiled (False when it
    is not worth it, or failed)."""

    def __init__(self, compiled):
        self.run = self.python_fn = None
        program = compiled.program
        if "jax.lax.scan(" not in compiled.source or len(program.assignments) > MAX_ASSIGNMENTS:
            self.run = False
            return
        thread = threading.Thread(target=self._compile, args=(compiled,))
        _compiling.append(thread)
        thread.start()

    def _compile(self, compiled) -> None:
        try:
            with programs.building:
                source = emitter.emit(compiled.program, reroll=False)
            namespace: dict = {}
            exec(compile(source, f"<symgrad:{compiled.program.name}:unrolled>", "exec"), namespace)
            python_fn = namespace[compiled.program.name]
            run = jax.jit(python_fn)
            arguments = [jax.ShapeDtypeStruct(compiled.program.shapes[s], compiled.program.dtypes[s])
                         for s in compiled.program.inputs]
            run = run.lower(*arguments).compile()
            self.python_fn, self.run = python_fn, run
        except Exception:  # noqa: BLE001 - the rerolled form simply stays
            self.run = False


def finish_compiles() -> None:
    """Wait for the straight-line forms being compiled."""
    while _compiling:
        _compiling.pop().join()
