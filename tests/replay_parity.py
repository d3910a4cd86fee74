"""Running a scenario with symgrad and with PyTorch on the same numbers and comparing what each
recorded: the harness of the replay parity tests (test_replay.py).

The program cache is emptied before each test that uses ``fresh_cache``, so each one sees its
structures first walked and then replayed, whatever ran before it.
"""
from __future__ import annotations

import numpy as np
import pytest

import codegen.compile as programs
import symgrad
from symgrad import engine, replay, replaying

torch = pytest.importorskip("torch")

RTOL, ATOL = 2e-5, 1e-5


@pytest.fixture(autouse=True)
def fresh_cache():
    programs.cache.clear()
    getattr(engine, "_number_values", {}).clear()
    yield


class Counter:
    """Backwards replayed: by the root's kind (counted as they run), or as part of a replayed
    trace (symgrad.replaying's count since the fixture began)."""

    def __init__(self):
        self.by_kind, self.traced_before = 0, replaying.stats.replayed

    @property
    def count(self) -> int:
        return self.by_kind + replaying.stats.replayed - self.traced_before


@pytest.fixture
def replays(monkeypatch):
    """Counts backward calls that ran a replayed program (no walk)."""
    counter = Counter()
    original = replay.Replay.run

    def run(self, request, dead=()):
        counter.by_kind += 1
        return original(self, request, dead)

    monkeypatch.setattr(replay.Replay, "run", run)
    return counter


def snap(x):
    """A copy of a tensor's values (or None / a number / a string), taken now."""
    if x is None or isinstance(x, (bool, int, float, str, tuple)):
        return x
    if isinstance(x, (np.ndarray, list, np.generic)):
        return np.array(x, copy=True)
    return np.array(x.detach().numpy(), copy=True)


class Record(list):
    def add(self, label, value):
        self.append((label, snap(value)))


def compare(got, want, rtol=RTOL, atol=ATOL):
    assert [label for label, _ in got] == [label for label, _ in want]
    for (label, g), (_, w) in zip(got, want):
        if w is None or g is None:
            assert g is None and w is None, f"{label}: symgrad {g!r} vs torch {w!r}"
            continue
        if isinstance(w, (bool, str, tuple)):
            assert g == w, f"{label}: symgrad {g!r} vs torch {w!r}"
            continue
        g_arr, w_arr = np.asarray(g), np.asarray(w)
        if isinstance(w, np.ndarray):
            assert g_arr.shape == w_arr.shape, f"{label}: shape {g_arr.shape} vs torch {w_arr.shape}"
            assert g_arr.dtype == w_arr.dtype, f"{label}: dtype {g_arr.dtype} vs torch {w_arr.dtype}"
        np.testing.assert_allclose(g_arr.astype(np.float64), w_arr.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=label)


def check(scenario, **kwargs):
    """Run ``scenario(lib)`` with symgrad and with torch and compare what each recorded."""
    got = scenario(symgrad)
    want = scenario(torch)
    compare(got, want, **kwargs)
    return got


def rng(seed=0):
    return np.random.default_rng(seed)


def f32(a):
    return np.asarray(a, dtype=np.float32)
