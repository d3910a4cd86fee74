"""Compile once per structure: counters, not timings."""
import numpy as np

import codegen
import symgrad as torch
from symgrad.ir import Program


def _seed_step(x, y, w, b, lr=0.1, T=torch):
    """One step of the seeds' network trained by hand, on symgrad or (``T``) on PyTorch."""
    z = T.matmul(x, w) + b
    loss = T.nn.functional.binary_cross_entropy_with_logits(z, y)
    loss.backward()
    with T.no_grad():
        w -= lr * w.grad
        b -= lr * b.grad
    w.grad.zero_()
    b.grad.zero_()
    return loss


def test_training_loop_compiles_once_then_only_hits(monkeypatch):
    x, y = torch.ones(5), torch.zeros(3)
    w, b = torch.randn(5, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    for _ in range(3):
        _seed_step(x, y, w, b)
    compiles, hits = codegen.stats.compiles, codegen.stats.hits

    def no_sympy(*args, **kwargs):
        raise AssertionError("a cache hit must not build a Program")

    monkeypatch.setattr(Program, "__init__", no_sympy)
    for _ in range(20):
        loss = _seed_step(x, y, w, b)
    assert codegen.stats.compiles == compiles
    assert codegen.stats.hits == hits + 20
    assert np.isfinite(loss.item())


def test_different_structures_get_different_programs():
    a = torch.ones(3, requires_grad=True)
    (a * 2).sum().backward()
    (a * 3).sum().backward()  # another baked constant: another program
    (a + 2).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [6.0, 6.0, 6.0])
    b = torch.ones(4, requires_grad=True)
    (b * 2).sum().backward()  # another shape
    np.testing.assert_allclose(b.grad.numpy(), [2.0] * 4)
    c = torch.ones(3, dtype=torch.float64, requires_grad=True)
    (c * 2).sum().backward()  # another dtype
    assert c.grad.dtype is torch.float64


def test_requires_grad_and_grad_mode_are_part_of_the_key():
    x = torch.ones(3, requires_grad=True)
    y = torch.ones(3, requires_grad=True)
    (x * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0] * 3)
    x.grad.zero_()
    y.requires_grad_(False)
    (x * y * 2).sum().backward()
    assert y.grad is not None and np.allclose(y.grad.numpy(), 1.0)  # untouched since
    with torch.no_grad():
        z = x * y
    assert not z.requires_grad


def test_same_leaf_twice_is_not_confused_with_two_leaves():
    a = torch.tensor([3.0], requires_grad=True)
    b = torch.tensor([5.0], requires_grad=True)
    (a * a).sum().backward()
    (a * b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [6.0 + 5.0])
    np.testing.assert_allclose(b.grad.numpy(), [3.0])


def test_ten_thousand_steps_hold_steady_memory():
    import gc

    from symgrad.graph import Node

    x, y = torch.ones(5), torch.zeros(3)
    w, b = torch.randn(5, 3, requires_grad=True), torch.randn(3, requires_grad=True)

    def live_nodes():
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is Node)

    for _ in range(10):
        loss = _seed_step(x, y, w, b)
    before = live_nodes()  # with one step's graph alive, as after the loop
    for _ in range(10_000):
        loss = _seed_step(x, y, w, b)
    after = live_nodes()
    assert after <= before + 5, (before, after)
    assert np.isfinite(loss.item())


def test_a_learning_rate_schedule_compiles_once_more_not_every_step(torch):
    """Floats are baked until a structure comes back with other values; then one program takes
    them as inputs.  30 steps with a new learning rate each compile 3 programs, not 30."""
    import symgrad

    rng = np.random.default_rng(5)
    w0, b0 = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)

    def train(T):
        x, y = T.ones(5), T.zeros(3)
        w, b = T.tensor(w0, requires_grad=True), T.tensor(b0, requires_grad=True)
        return [_seed_step(x, y, w, b, 0.5 * 0.9 ** step, T).item() for step in range(30)]

    before = codegen.stats.compiles
    ours = train(symgrad)
    assert codegen.stats.compiles - before <= 3
    np.testing.assert_allclose(ours, train(torch), rtol=1e-5)
