"""Values without history carried from one training step to the next (a momentum buffer, an
average of the weights, a running total): the same numbers as PyTorch, and a graph that stays
the same size however long the loop runs (graph.outlived: such a value is computed when it is
used again after a step, as PyTorch computed it at once)."""
import jax
import numpy as np
import pytest

import codegen
import symgrad

STEPS = 240
TOL = dict(rtol=1e-4, atol=1e-6)
STEP_TOL = dict(rtol=1e-5, atol=1e-6)  # float32, step by step


def reachable(tensor) -> int:
    """How many nodes the tensor's value still depends on (its uncomputed history)."""
    seen, stack = set(), [tensor._node]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(node.inputs)
    return len(seen)


def net(T):
    rng = np.random.default_rng(5)
    x = T.tensor(np.linspace(-1.0, 1.0, 5).astype(np.float32))
    y = T.tensor(np.float32([0.0, 0.5, 1.0]))
    w = T.tensor((0.5 * rng.standard_normal((5, 3))).astype(np.float32), requires_grad=True)
    b = T.tensor(np.zeros(3, np.float32), requires_grad=True)
    return x, y, w, b


def momentum(T, w, b, state):
    """A hand-written momentum buffer, out of place under no_grad (``prev = g``)."""
    g = w.grad.clone() if "prev" not in state else w.grad + 0.9 * state["prev"]
    w -= 0.05 * g
    b -= 0.05 * b.grad
    state["prev"] = g
    return g


def weight_average(T, w, b, state):
    """An exponential moving average of the weights, out of place."""
    w -= 0.1 * w.grad
    b -= 0.1 * b.grad
    state["ema"] = w.clone() if "ema" not in state else 0.9 * state["ema"] + 0.1 * w
    return state["ema"]


def running_total(T, w, b, state):
    """The sum of all losses so far, in place."""
    w -= 0.1 * w.grad
    b -= 0.1 * b.grad
    state.setdefault("total", T.zeros(()))
    state["total"] += state["loss"].detach()
    return state["total"]


def update_twice(T, w, b, state):
    """A parameter moved twice per step in place, with another value read in between (the
    program that reads it does not need the parameter)."""
    w -= 0.05 * w.grad
    state["bias seen"] = b.sum().item()
    w -= 0.05 * w.grad
    b -= 0.1 * b.grad
    return w


def train(T, carry, steps, on_step=None):
    """Per step, snapshots of the loss, the carried value and the parameters, kept (not read: a
    read computes values early) to be compared after the loop."""
    x, y, w, b = net(T)
    state, history = {}, []
    for step in range(steps):
        loss = T.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)
        loss.backward()
        state["loss"] = loss
        with T.no_grad():
            carried = carry(T, w, b, state)
        w.grad.zero_()
        b.grad.zero_()
        history.append([t.detach().clone() for t in (loss, carried, w, b)])
        if on_step:
            on_step(step, carried)
    return history


@pytest.mark.parametrize("carry", [momentum, weight_average, running_total, update_twice],
                         ids=lambda f: f.__name__)
def test_a_carried_value_keeps_the_graph_and_the_programs_from_growing(torch, carry):
    sizes, compiles = {}, {}

    def on_step(step, carried):
        if step in (STEPS // 2, STEPS - 1):
            codegen.finish_compiles()  # a scan compiled in a thread of its own lands when it lands
            sizes[step], compiles[step] = reachable(carried), codegen.stats.compiles

    codegen.finish_compiles()  # an earlier test's, too
    history = train(symgrad, carry, STEPS, on_step)
    expected = train(torch, carry, STEPS)
    for step, (ours, theirs) in enumerate(zip(history, expected)):
        for name, a, e in zip(("loss", "carried value", "w", "b"), ours, theirs):
            np.testing.assert_allclose(a.numpy(), e.numpy(), err_msg=f"{name} at step {step}", **STEP_TOL)
    middle, last = STEPS // 2, STEPS - 1
    assert sizes[last] == sizes[middle] <= 12, f"the carried value's history grows: {sizes}"
    assert compiles[last] == compiles[middle], "programs compiled in the second half of the loop"


def test_a_carried_value_used_inside_a_traced_function_keeps_an_array():
    """A value that outlived a step is computed when a function traced by ``value_and_grad``
    first uses it: it gets an array, not one of the trace's tracers.  (On the plain path: a
    replayed cycle gives the results it holds their values when the chain runs it.)"""
    _, _, w, _ = net(symgrad)
    x, y = symgrad.ones(5), symgrad.zeros(3)
    prev = None
    with symgrad.plain_path():
        for _ in range(4):
            symgrad.nn.functional.binary_cross_entropy_with_logits(x @ w, y).backward()
            with symgrad.no_grad():
                prev = w.grad * 2 if prev is None else w.grad + 0.5 * prev
            w.grad.zero_()
        symgrad.nn.functional.binary_cross_entropy_with_logits(x @ w, y).backward()
    assert prev._node.value is None  # and a backward has run since it was recorded
    value, grad = symgrad.value_and_grad(lambda v: (v * (prev + 1.0)).sum())(np.ones((5, 3), np.float32))
    array = prev._node.value
    assert array is not None and not isinstance(array, jax.core.Tracer)
    np.testing.assert_allclose(float(value), float((prev.numpy() + 1.0).sum()), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(grad), prev.numpy() + 1.0, rtol=1e-6)


def test_a_plain_loop_that_reads_after_each_step_computes_nothing_early(monkeypatch, torch):
    """Reading a metric or a gradient's norm after ``step()`` runs a program past the updated
    parameters; they are still computed inside the next backward, not one by one before it."""
    early = []
    original = symgrad.engine.realize_outlived
    monkeypatch.setattr(symgrad.engine, "realize_outlived", lambda nodes: early.append(len(nodes)) or original(nodes))

    def loop(T, steps=60):
        x, y, w, b = net(T)
        sgd = T.optim.SGD([w, b], lr=0.1, momentum=0.9)
        seen = []
        for _ in range(steps):
            sgd.zero_grad()
            out = x @ w + b
            T.nn.functional.binary_cross_entropy_with_logits(out, y).backward()
            sgd.step()
            seen.append(((out > 0).float() == y).float().mean().item() + float((w.grad ** 2).sum()))
        return seen, w

    seen, w = loop(symgrad)
    expected, tw = loop(torch)
    assert early == []
    np.testing.assert_allclose(seen, expected, **TOL)
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), **TOL)


def test_an_evaluation_loop_computes_its_forward_once_per_batch(torch):
    """``with no_grad()``: ``loss.item()``, then ``pred.argmax(1)`` of the prediction the first read's
    program went through.  Once learned, that program stores ``pred`` too: two programs a batch (not
    three, the forward computed twice), and PyTorch's numbers."""
    rng = np.random.default_rng(11)
    data, labels = rng.standard_normal((40, 6)).astype(np.float32), rng.integers(0, 3, 40)
    seen = {}
    for T in (symgrad, torch):
        T.manual_seed(0)
        model = T.nn.Sequential(T.nn.Linear(6, 8), T.nn.ReLU(), T.nn.Linear(8, 3))
        x, y, seen[T] = T.tensor(data), T.tensor(labels), []
        for epoch in range(3):
            programs = codegen.stats.hits + codegen.stats.compiles
            with T.no_grad():
                for i in range(0, 40, 8):
                    pred = model(x[i:i + 8])
                    seen[T].append(T.nn.functional.cross_entropy(pred, y[i:i + 8]).item())
                    seen[T].append((pred.argmax(1) == y[i:i + 8]).type(T.float).sum().item())
            if T is symgrad and epoch == 2:
                assert codegen.stats.hits + codegen.stats.compiles - programs == 2 * 5
    np.testing.assert_allclose(seen[symgrad], seen[torch], rtol=1e-5)
