"""The speed layer's one switch.

symgrad computes the same numbers on two paths.  The plain path compiles one program per graph
structure and calls it.  The fast path adds what only saves time: deferred calls (codegen.deferred:
hot small programs run many at a time as one XLA call), rerolled loops (codegen.reroll: repeated
steps printed once, as a ``lax.scan``), replayed backwards (symgrad.replay: a structure seen
before found from its root's kind, without walking the graph) and, for a replayed backward on big
arrays, the old state given to XLA to write the new one into (symgrad.donation, codegen.donated).

``SYMGRAD_PLAIN=1`` in the environment, or ``symgrad.plain_path()`` around some code, turns the
fast path off, so that a wrong number can be told to come from a feature or from the speed layer.
Programs compiled on each path are cached apart (codegen.compile).
"""
from __future__ import annotations

import contextlib
import os

fast = os.environ.get("SYMGRAD_PLAIN", "").strip() in ("", "0")


@contextlib.contextmanager
def plain_path():
    """Run the enclosed code on the plain path (process-wide, not per thread: a debugging switch).
    Values the fast path left pending are read as usual."""
    global fast
    before, fast = fast, False
    try:
        yield
    finally:
        fast = before
