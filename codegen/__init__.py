"""IR -> JAX source -> jax.jit/XLA.  Knows the IR (symgrad.ir) and nothing of the Tensor API.

Modules: ``printer`` (one expression -> JAX text), ``emit`` (a Program -> Python source),
``compile`` (source -> jitted function, and the cache keyed by structure).
"""
from codegen.compile import CompiledProgram, ProgramCache, cache, compile_program, stats

__all__ = ["CompiledProgram", "ProgramCache", "cache", "compile_program", "stats"]
