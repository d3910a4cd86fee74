"""Values read to the host (``item()``, ``numpy()``, ``tolist()``, printing), waited for by
spinning before sleeping.

XLA's CPU runtime runs a program on a worker thread, and the thread that reads the result sleeps
until the worker wakes it: on these hosts a sleeping thread takes tens of microseconds to wake,
longer than a small program runs.  A read whose program is still running (an evaluation loop's
``loss.item()``, right after the program was dispatched) checks the array's readiness in a loop
for up to ``SPIN_SECONDS`` before it sleeps (docs/performance.md, session 25).
"""
from __future__ import annotations

import time

import numpy as np

SPIN_SECONDS = 50e-6  # about a small program and a worker's wake-up; a long program is slept on


def host_array(value) -> np.ndarray:
    """A tensor's array (``Tensor._value()``) as a NumPy array (a view of XLA's buffer: copy it
    to keep it)."""
    ready = getattr(value, "is_ready", None)
    if ready is not None and not ready():
        deadline = time.perf_counter() + SPIN_SECONDS
        while not ready() and time.perf_counter() < deadline:
            pass
    return np.asarray(value)
