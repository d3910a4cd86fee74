"""Reads to the host spin on the array's readiness for a bounded time before sleeping
(symgrad.host_reads): the values are the program's, a long program is waited for, and a spin
never outlasts its budget."""
import time
import numpy as np

import symgrad
from symgrad import host_reads


class NeverReady:
    """An array whose program never reports done: only the budget ends the spin."""

    def __init__(self):
        self.asked = 0

    def is_ready(self):
        self.asked += 1
        return False

    def __array__(self, dtype=None, copy=None):
        return np.arange(3.0)


def test_the_spin_ends_at_its_budget(monkeypatch):
    monkeypatch.setattr(host_reads, "SPIN_SECONDS", 2e-3)
    value = NeverReady()
    start = time.perf_counter()
    array = host_reads.host_array(value)
    waited = time.perf_counter() - start
    assert array.tolist() == [0.0, 1.0, 2.0]
    assert value.asked > 1 and 2e-3 <= waited < 0.5


def test_reads_of_a_program_still_running_give_its_values():
    """A program far longer than the spin (a chain of 256 x 256 products) is slept on."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float32) / 16
    x = symgrad.tensor(a)
    y = x
    for _ in range(20):
        y = symgrad.tanh(y @ x)
    expected = a
    for _ in range(20):
        expected = np.tanh(expected @ a)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-4, atol=1e-5)
    total = y.sum()
    assert np.isclose(total.item(), expected.sum(), rtol=1e-3)
    assert np.allclose(y[0, :3].tolist(), expected[0, :3], rtol=1e-4, atol=1e-5)
