"""IR -> JAX source -> jax.jit/XLA.  Knows the IR (symgrad.ir) and nothing of the Tensor API.

Modules: ``printer`` (one expression -> JAX text), ``emit`` (a Program -> Python source),
``compile`` (source -> jitted function, and the cache keyed by structure), ``deferred`` (calls of
small hot programs, run many at a time as one XLA call), ``cycle_scan`` (a replayed training
step's program run as a loop over its carried state), ``donated`` (a program writing its results
into inputs its caller gives up), ``speed`` (the switch that turns deferral, rerolling, replay and
donation off).
"""
from codegen import cycle_scan, deferred, donated, speed, unrolled
from codegen.compile import CompiledProgram, ProgramCache, cache, compile_program, stats


def finish_compiles() -> None:
    """Wait for the programs compiled in threads of their own (fused chains, scans of
    replayed steps, donating variants):
    tests and benchmarks, after warming up, measure the steady state."""
    deferred.finish_compiles()
    cycle_scan.finish_compiles()
    unrolled.finish_compiles()
    donated.finish_compiles()


__all__ = ["CompiledProgram", "ProgramCache", "cache", "compile_program", "cycle_scan", "deferred", "donated", "finish_compiles",
           "unrolled",
           "speed", "stats"]
