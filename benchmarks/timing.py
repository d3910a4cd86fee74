"""Timing by the rules of the benchmark: warm up, then the median of at least five
measurements of at least 0.2 s each."""
from __future__ import annotations

import statistics
import time

MIN_SECONDS = 0.2
REPEATS = 5


def per_call(fn, warmup: int = 3) -> float:
    """Median seconds per call of ``fn()`` (which must block until its result is ready)."""
    for _ in range(warmup):
        fn()
    calls, elapsed = 1, 0.0
    while elapsed < MIN_SECONDS:  # calibrate the batch size to reach the minimum duration
        calls *= 2
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def once(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_of(fn, repeats: int = REPEATS) -> float:
    """Median seconds of ``fn()`` for work that is long enough to time one call at a time."""
    fn()
    return statistics.median(once(fn) for _ in range(repeats))


def side_by_side(runs: dict, repeats: int = 7) -> dict:
    """Median seconds of each ``runs[name]()``, measured in turns: each round runs every system
    once, so a stretch in which the shared machine is slow slows all of them alike."""
    samples = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            samples[name].append(once(fn))
    return {name: statistics.median(times) for name, times in samples.items()}
