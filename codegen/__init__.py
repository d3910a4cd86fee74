"""IR -> JAX source -> jax.jit/XLA.  Knows the IR (symgrad.ir) and nothing of the Tensor API."""
from codegen.compile import CompiledProgram, ProgramCache, cache, compile_program, stats
from codegen.emit import emit

__all__ = ["CompiledProgram", "ProgramCache", "cache", "compile_program", "emit", "stats"]
