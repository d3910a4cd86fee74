"""IR -> JAX source -> jax.jit/XLA.  Knows the IR (symgrad.ir) and nothing of the Tensor API.

Modules: ``printer`` (one expression -> JAX text), ``emit`` (a Program -> Python source),
``compile`` (source -> jitted function, and the cache keyed by structure), ``deferred`` (calls of
small hot programs, run many at a time as one XLA call), ``speed`` (the switch that turns deferral,
rerolling and replay off).
"""
from codegen import deferred, speed
from codegen.compile import CompiledProgram, ProgramCache, cache, compile_program, stats

__all__ = ["CompiledProgram", "ProgramCache", "cache", "compile_program", "deferred", "speed", "stats"]
