"""Timing by the rules of the benchmark: warm up, then the median of at least five
measurements of at least 0.2 s each, taken *in turns*.

The machine is shared: for tens of seconds at a time it can run at half speed.  Timing one
system after another would let such a stretch land on one of them and move a ratio by 2x, so
each round measures every system once, and the medians come from the rounds.
"""
from __future__ import annotations

import statistics
import time

MIN_SECONDS = 0.2
REPEATS = 7


class Turns:
    """The systems of one workload, each added with a warm-up, timed together by ``measure``."""

    def __init__(self, workload: str):
        self.workload = workload
        self.systems = {}  # label -> (fn, calls per measurement)

    def per_call(self, label: str, fn, warmup: int = 3) -> None:
        """``fn()`` (which must block until its result is ready), timed per call."""
        for _ in range(warmup):
            fn()
        calls = 1
        while _seconds(fn, calls) < MIN_SECONDS:  # calibrate the batch size to reach the minimum duration
            calls *= 2
        self.systems[label] = (fn, calls)

    def whole(self, label: str, fn) -> None:
        """``fn()``, long enough to be timed one call at a time (its first call is the warm-up)."""
        fn()
        self.systems[label] = (fn, 1)

    def measure(self, scale: float = 1.0) -> list:
        """Rows ``(workload, system, median seconds * scale)``."""
        samples = {label: [] for label in self.systems}
        for _ in range(REPEATS):
            for label, (fn, calls) in self.systems.items():
                samples[label].append(_seconds(fn, calls) / calls)
        return [(self.workload, label, statistics.median(s) * scale) for label, s in samples.items()]


def _seconds(fn, calls: int) -> float:
    """Seconds that ``calls`` calls of ``fn()`` take, back to back."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return time.perf_counter() - start


def once(fn) -> float:
    return _seconds(fn, 1)
