"""Long loops stay flat in memory and give PyTorch's numbers (benchmarks/memory.py has the full
10,000-step figures; these run fewer steps)."""
import gc

import numpy as np
import pytest

from benchmarks import memory


def _torch_evaluation(torch, batches, seed=0):
    rng = np.random.default_rng(seed)
    xs = [torch.tensor(rng.normal(size=(16, 8)).astype(np.float32)) for _ in range(50)]
    ys = [torch.tensor(rng.integers(0, 3, size=16)) for _ in range(50)]
    w = torch.tensor(rng.normal(size=(8, 3)).astype(np.float32))
    total = torch.zeros(())
    with torch.no_grad():
        for batch in range(1, batches + 1):
            total += torch.nn.functional.cross_entropy(xs[batch % 50] @ w, ys[batch % 50])
    return total.item()


def test_a_running_total_nobody_reads_stays_bounded(torch):
    """Was: 2,000 batches of ``total += loss`` under no_grad took 25 s and 2.1 GB to read once
    (the chain of pending values grew with every batch)."""
    seen, total = memory.evaluation(3000, at=(1000, 2000))
    assert total == pytest.approx(_torch_evaluation(torch, 3000), rel=1e-5)
    assert seen[3000] <= seen[1000] * 1.10, seen


def test_a_long_training_loop_stays_flat():
    seen, w = memory.training(3000, at=(1000,))
    assert np.isfinite(w).all()
    assert seen[3000] <= seen[1000] * 1.10, seen


def _uncomputed_behind(node):
    """How many nodes without a value a node's value still depends on."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n.value is None and id(n) not in seen:
            seen.add(id(n))
            stack.extend(n.inputs)
    return len(seen)


def test_a_parameter_updated_again_and_again_without_a_read_keeps_a_bounded_chain(torch):
    """Updates under no_grad with no backward and no read in between (PyTorch computes each at
    once): the pending chain behind the parameter is cut at a bounded length, the value is
    PyTorch's."""
    import symgrad
    results, longest = [], 0
    for T in (symgrad, torch):
        w, g = T.zeros(5, 3, requires_grad=True), T.ones(5, 3)
        for _ in range(3000):
            with T.no_grad():
                w.sub_(0.1 * g)
            if T is symgrad:
                longest = max(longest, _uncomputed_behind(w._node))
        results.append(w.detach().numpy())
    np.testing.assert_array_equal(results[0], results[1])
    from symgrad.kinds import MAX_ARGS
    from symgrad.tensor import MAX_UNKINDED_RUN
    assert longest <= 4 * (MAX_UNKINDED_RUN + MAX_ARGS), longest  # 3 nodes an update; unbounded: 9,000


def _kept_accuracies(T, where, steps, count_arrays=False):
    """A classifier's loop keeping each step's accuracy, computed before or after the backward,
    as tutorials do; returns the accuracies, and (symgrad) the JAX arrays alive after each half."""
    import jax
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(4, 16), T.nn.ReLU(), T.nn.Linear(16, 3))
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = T.tensor(rng.standard_normal((32, 4)).astype(np.float32))
    y = T.tensor(rng.integers(0, 3, 32))
    accuracies, alive = [], []
    for step in range(steps):
        out = model(x)
        loss = T.nn.functional.cross_entropy(out, y)
        if where == "before backward":
            accuracies.append((out.argmax(1) == y).float().mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if where == "after backward":
            accuracies.append((out.argmax(1) == y).float().mean())
        if count_arrays and step + 1 in (steps // 2, steps):
            gc.collect()
            alive.append(len(jax.live_arrays()))
    return [a.item() for a in accuracies], alive


@pytest.mark.parametrize("where", ["before backward", "after backward"])
def test_results_kept_without_history_hold_no_earlier_parameters(where, torch, both_paths):
    """Was: each kept accuracy, pending, held its step's graph (after the backward, recorded) or its
    cycle's starting state (before it, replayed): the parameters' values of every step, 165-204 MB
    per 100 steps of a 256-1024-3 MLP.  Now a backward computes them (PyTorch has their values):
    about one array a step (the accuracy's own) stays, not eight."""
    import symgrad
    ours, alive = _kept_accuracies(symgrad, where, 400, count_arrays=True)
    theirs, _ = _kept_accuracies(torch, where, 400)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert (alive[1] - alive[0]) / 200 < 2.5, alive
