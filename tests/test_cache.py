"""Compile once per structure: counters, not timings."""
import numpy as np

import codegen
import symgrad as torch
from symgrad import replaying
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
    compiles, hits, replayed = codegen.stats.compiles, codegen.stats.hits, replaying.stats.replayed

    def no_sympy(*args, **kwargs):
        raise AssertionError("a cache hit must not build a Program")

    monkeypatch.setattr(Program, "__init__", no_sympy)
    for _ in range(20):
        loss = _seed_step(x, y, w, b)
    assert codegen.stats.compiles == compiles
    # each step finds its program in the cache, or replays its trace (symgrad.cycles: no lookup)
    assert (codegen.stats.hits - hits) + (replaying.stats.replayed - replayed) == 20
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

    from symgrad.nodes import Node

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


def test_a_repeated_step_neither_walks_the_graph_nor_infers_shapes(monkeypatch):
    """After warm-up, backward finds its program from the root's kind, and recording an op
    of a known kind skips the op's shape rule."""
    import symgrad.engine as engine
    import symgrad.tracing as tracing
    from symgrad import kinds
    from symgrad.ops.linalg import MATMUL

    kinds._kinds.clear()  # the table is bounded: a test run may fill it while this test runs
    x, y = torch.ones(5), torch.zeros(3)
    w, b = torch.randn(5, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    for _ in range(3):
        _seed_step(x, y, w, b)
    expected_w = w.detach().numpy() - 0.1 * _seed_gradient(x, y, w, b)

    def forbidden(*args, **kwargs):
        raise AssertionError("a repeated step must not walk the graph or infer shapes")

    monkeypatch.setattr(engine, "Walk", forbidden)
    monkeypatch.setattr(tracing, "Walk", forbidden)
    monkeypatch.setattr(MATMUL, "infer", forbidden)
    _seed_step(x, y, w, b)
    monkeypatch.undo()
    np.testing.assert_allclose(w.detach().numpy(), expected_w, rtol=1e-6, atol=1e-7)  # an entry near 0 keeps float32 rounding


def _seed_gradient(x, y, w, b):
    """d loss / d w of the seed network, by hand: x^T (sigmoid(z) - y) / 3."""
    z = x.numpy() @ w.detach().numpy() + b.detach().numpy()
    return np.outer(x.numpy(), (1 / (1 + np.exp(-z)) - y.numpy()) / 3)


def test_a_chain_over_one_array_keeps_one_argument_pair():
    """``sin(h) * h`` shares its inputs' arguments, so a deep chain stays keyable."""
    h = torch.ones(10, requires_grad=True)
    x = h
    for _ in range(200):
        x = torch.sin(x) * x + 0.5
    assert x._node.kind is not None and len(x._node.args) == 2


def test_recorded_graphs_are_freed_without_the_cycle_collector():
    """Nodes do not refer to themselves, so dropping a graph frees it at once."""
    import gc
    import weakref

    w = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        w -= 0.1 * torch.ones(3)  # a pending leaf
    loss = (w * 2).sum()
    probes = [weakref.ref(loss._node), weakref.ref(w._node)]
    enabled = gc.isenabled()
    gc.disable()
    try:
        del loss, w
        assert [p() for p in probes] == [None, None]
    finally:
        if enabled:
            gc.enable()


def test_one_thread_builds_a_program_at_a_time():
    """SymPy's caches are not thread-safe: a second thread's build waits for the first's."""
    import threading

    first_started, release, order = threading.Event(), threading.Event(), []

    def slow_build():
        first_started.set()
        release.wait(5)
        order.append("first")
        return _tiny_program(1.0)

    def quick_build():
        order.append("second")
        return _tiny_program(2.0)

    thread = threading.Thread(target=lambda: codegen.cache.get(("test build lock", 1), slow_build))
    thread.start()
    first_started.wait(5)
    second = threading.Thread(target=lambda: codegen.cache.get(("test build lock", 2), quick_build))
    second.start()
    second.join(0.3)
    assert order == [], "the second build ran while the first was building"
    release.set()
    thread.join(5)
    second.join(5)
    assert order == ["first", "second"]


def _tiny_program(scale: float) -> Program:
    program = Program("tiny")
    x = program.input((3,), "float32", "x")
    program.output(scale * x, (3,), "float32", "scaled")
    return program



def test_the_cache_forgets_the_least_recently_used_program_of_either_path(monkeypatch):
    """Each compiled program holds XLA's executable and its memory mappings (Linux allows a process
    65,530): a process that compiled a few thousand and kept them all crashed in LLVM.  The cache
    holds ``capacity`` programs over both paths and forgets the one used least recently."""
    class Entry:
        pass

    cache = codegen.cache
    monkeypatch.setattr(cache, "capacity", 3)
    cache.clear()
    a, b, c, d, e = (Entry() for _ in range(5))
    for key, entry in zip("abc", (a, b, c)):
        cache.put(key, entry)
    assert cache.find("a") is a  # used again: "b" is now the least recently used
    cache.put("d", d)
    assert [cache.find(k) for k in "bcda"] == [None, c, d, a]  # (each find is a use: "c" is the oldest now)
    with torch.plain_path():
        cache.put("e", e)
        assert cache.find("e") is e
    assert [cache.find(k) for k in "cda"] == [None, d, a]


def test_a_program_the_cache_forgot_is_freed(monkeypatch):
    """Nothing but the cache holds a compiled program (and its executable) once its step is over,
    and a full cache stays far from Linux's limit of memory mappings."""
    import gc
    import os
    import weakref

    def mappings():
        with open(f"/proc/{os.getpid()}/maps") as maps:
            return sum(1 for _ in maps)

    capacity = codegen.cache.capacity
    monkeypatch.setattr(codegen.cache, "capacity", 4)
    codegen.cache.clear()
    gc.collect()
    before = mappings() if os.path.exists("/proc/self/maps") else None
    x, compiled = torch.ones(3), []
    for depth in range(1, 9):  # a structure of its own each time: a program of its own
        value = x
        for _ in range(depth):
            value = value.sin()
        expected = np.ones(3)
        for _ in range(depth):
            expected = np.sin(expected)
        assert np.allclose(value.numpy(), expected)
        compiled.append(weakref.ref(max(codegen.cache._paths[1].values(), key=lambda entry: entry.used)))
        if depth == 4 and before is not None:
            per_program = (mappings() - before) / 4
            # a step's program takes up to ~3 times this chain's mappings (9-16 in the random loops)
            assert capacity * per_program * 4 < 65_530, (capacity, per_program)
    del value
    gc.collect()
    assert [ref() is not None for ref in compiled] == [False] * 4 + [True] * 4
