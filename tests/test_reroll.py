"""Loop rerolling (codegen.reroll): repeated steps are emitted once, as a ``jax.lax.scan``.

Every program is run both ways, rerolled and printed in full, on the same inputs: the numbers
must agree (to float64's rounding, or float32's: a sum over steps may add in another order).
Both ways share the symbolic gradient, so each program's numbers are also checked against an
independent reference: real PyTorch on the same inputs (the loss and every leaf's gradient), or
a closed form.  Random cells check that whatever repeats (several carries, swapped states,
invariant weights that get gradients, values read back from every step) keeps its meaning.
"""
import re

import jax
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import codegen
import symgrad as torch
from codegen.emit import emit
from codegen.reroll import MIN_STEPS
from symgrad.tracing import BackwardPlan, Walk, forward_program
from symgrad.ir import Program


@pytest.fixture(scope="module")  # not per test: Hypothesis runs many examples in one
def torch_reference():
    return pytest.importorskip("torch")


# Run eagerly, jax.lax.scan slices its sequences step by step, each start a compile of its own (cached: the
# short loops of random examples reuse them; a chain of 300 steps took ~10 s in CI). A longer scan is compiled.
EAGER_SCAN_STEPS = 64


def _run(source, program, inputs, jit):
    namespace = {}
    exec(compile(source, "<test>", "exec"), namespace)
    fn = namespace[program.name]
    if jit or max(map(int, re.findall(r"length=(\d+)\)", source)), default=0) > EAGER_SCAN_STEPS:
        return jax.jit(fn)(*inputs)
    with jax.disable_jit():  # the emitted program's meaning, without compiling each example
        return fn(*inputs)


def both_ways(program, inputs, jit=True):
    """(rerolled source, its results, the unrolled results)."""
    rerolled = emit(program)
    ours = _run(rerolled, program, inputs, jit)
    reference = _run(emit(program, reroll=False), program, inputs, jit)
    for a, b in zip(ours, reference):  # a sum over steps may add in another order: float32 rounds
        tolerance = 1e-12 if np.asarray(b).dtype != np.float32 else 1e-6
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tolerance, atol=tolerance)
    return rerolled, ours


def backward_both_ways(loss, jit=True):
    plan = BackwardPlan(loss._node, None)
    return both_ways(plan.program(), plan.walk.inputs, jit)


def leaves_of(T, arrays):
    """Tensors of ``arrays`` in the module T; the floating ones require grad."""
    return [T.tensor(a, requires_grad=np.issubdtype(np.asarray(a).dtype, np.floating)) for a in arrays]


def assert_backward_matches(plan, results, ours, reference_loss, theirs, rtol=1e-10, atol=1e-12):
    """The results of ``plan``'s program (the loss first, then the gradients of the tensors whose
    ``.grad`` it fills) against a reference loss and the reference leaves ``theirs`` after its
    ``backward``: leaf by leaf with ``ours``, a leaf the reference gives no gradient gets none."""
    gradients = dict(zip(map(id, plan.owners), results[1 + len(plan.pending):]))
    np.testing.assert_allclose(np.asarray(results[0]), reference_loss.detach().numpy(), rtol=rtol, atol=atol)
    for mine, reference in zip(ours, theirs):
        if reference.grad is None:
            assert id(mine) not in gradients
        else:
            np.testing.assert_allclose(np.asarray(gradients[id(mine)]), reference.grad.numpy(), rtol=rtol, atol=atol)


def backward_against_torch(reference, fn, arrays, jit=True, rtol=1e-10, atol=1e-12):
    """``fn(T, *leaves)`` is a scalar loss, for T in (symgrad, the reference PyTorch), on leaves
    made of ``arrays`` (``leaves_of``).  symgrad's backward program is run rerolled and unrolled
    (``both_ways``) and its loss and gradients are checked against PyTorch's backward.  Returns
    the rerolled source."""
    ours = leaves_of(torch, arrays)
    plan = BackwardPlan(fn(torch, *ours)._node, None)
    source, results = both_ways(plan.program(), plan.walk.inputs, jit)
    theirs = leaves_of(reference, arrays)
    reference_loss = fn(reference, *theirs)
    reference_loss.backward()
    assert_backward_matches(plan, results, ours, reference_loss, theirs, rtol, atol)
    return source


def chain(T, depth, x):
    h = x
    for _ in range(depth):
        h = T.sin(h) * h + 0.5
    return h


def chain_loss(depth):
    return lambda T, x: chain(T, depth, x).sum()


def chain_against_torch(reference, values, depth):
    """``chain(depth)`` of ``values`` with symgrad (its loss and leaf) and with the reference
    module (its loss and leaf), both after ``backward``."""
    results = []
    for T in (torch, reference):
        x = T.tensor(values, requires_grad=True)
        loss = chain(T, depth, x).sum()
        loss.backward()
        results.append((loss, x))
    return results


def test_chain_is_one_loop_each_way_and_matches_torch(torch_reference):
    values = np.random.default_rng(0).uniform(-1, 1, 7)
    x = torch.tensor(values, requires_grad=True)  # kept alive: .grad is filled only for live tensors
    source, _ = backward_both_ways(chain(torch, 40, x).sum())
    assert source.count("jax.lax.scan(") == 2  # the forward, and the backward reading it in reverse
    (loss, ours), (reference_loss, theirs) = chain_against_torch(torch_reference, values, 40)
    np.testing.assert_allclose(loss.item(), reference_loss.item(), rtol=1e-12)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_source_size_does_not_grow_with_depth(torch_reference):
    x = np.random.default_rng(1).uniform(-1, 1, 5)
    lines = [len(backward_against_torch(torch_reference, chain_loss(depth), [x], jit=False, atol=0).splitlines())
             for depth in (30, 300)]  # relative only: x's gradient is about 1e-58 after 300 steps
    assert lines[0] == lines[1] < 45


def test_short_runs_stay_straight_line(torch_reference):
    x = np.random.default_rng(2).uniform(-1, 1, 3)
    source = backward_against_torch(torch_reference, chain_loss(MIN_STEPS - 1), [x], jit=False)
    assert "scan" not in source


def test_rnn_with_shared_weights(torch_reference):
    """Weights read by every step: their gradients sum one term per step, read from the
    backward loop's stack in one sum, so the source does not grow with the steps."""
    rng = np.random.default_rng(3)
    W0, b0, h0 = rng.normal(size=(4, 4)) * 0.5, rng.normal(size=4), rng.normal(size=(2, 4))

    def rnn(T, W, b, steps):
        h = T.tensor(h0)
        for _ in range(steps):
            h = T.tanh(h @ W + b)
        return (h * h).sum()

    sizes = [len(backward_against_torch(torch_reference, lambda T, W, b: rnn(T, W, b, steps), [W0, b0],
                                        jit=steps == 12).splitlines()) for steps in (12, 40)]
    assert sizes[0] == sizes[1]
    W, b = torch.tensor(W0, requires_grad=True), torch.tensor(b0, requires_grad=True)  # and symgrad's own backward
    rnn(torch, W, b, 12).backward()
    tW, tb = (torch_reference.tensor(v, requires_grad=True) for v in (W0, b0))
    rnn(torch_reference, tW, tb, 12).backward()
    np.testing.assert_allclose(W.grad.numpy(), tW.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_every_step_read_back_and_two_loops_in_a_row(torch_reference):
    """A loss over all states (each step's value is kept and read), and a chain whose op changes
    half-way (two forward loops, two backward loops)."""
    def fn(T, x):
        h, total = x, 0
        for i in range(24):
            h = T.sin(h) * h + 0.5 if i < 12 else T.cos(h) - h * 0.25
            total = total + h.mean()
        return total
    source = backward_against_torch(torch_reference, fn, [np.random.default_rng(4).uniform(-1, 1, 6)])
    assert source.count("jax.lax.scan(") >= 3


def test_forward_value_program_is_rerolled():
    x = torch.tensor(np.linspace(-1, 1, 5))
    h = chain(torch, 30, x)
    walk = Walk()
    program = forward_program(walk, (walk.add(h._node, False),))
    source, (value,) = both_ways(program, walk.inputs)
    assert "jax.lax.scan(" in source
    expected = np.linspace(-1, 1, 5)
    for _ in range(30):
        expected = np.sin(expected) * expected + 0.5
    np.testing.assert_allclose(np.asarray(value), expected, rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), expected, rtol=1e-12)


CELL_OPS = {
    "mul": lambda T, a, b: a * b, "add": lambda T, a, b: a + b, "sub": lambda T, a, b: a - 0.5 * b,
    "tanh": lambda T, a, b: T.tanh(a), "sin": lambda T, a, b: T.sin(a) * b,
    "mix": lambda T, a, b: T.sigmoid(a) * b + 1.0, "mean": lambda T, a, b: a * b.mean(),
}
cell = st.lists(st.tuples(st.sampled_from(sorted(CELL_OPS)), st.integers(0, 20), st.integers(0, 20)),
                min_size=1, max_size=4)


@settings(max_examples=300 if settings().max_examples >= 2000 else 40, deadline=None)  # pytest --slow: 300
@given(states=st.integers(1, 3), weights=st.integers(0, 2), cells=st.lists(cell, min_size=1, max_size=3),
       depth=st.integers(MIN_STEPS, 20), keep=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_random_cells(torch_reference, states, weights, cells, depth, keep, seed):
    """Random recurrent cells: each new state is a few ops over the old states and the weights,
    squashed by tanh (unbounded, the states reach 1e17 and more, where XLA's sin and PyTorch's
    part ways and the numbers say nothing about the loops)."""
    def fn(T, *leaves):
        hs, ws = list(leaves[:states]), list(leaves[states:])
        total = 0
        for _ in range(depth):
            pool, new = hs + ws, []
            for s in range(states):
                ops = cells[s % len(cells)]
                value = pool[ops[0][1] % len(pool)]
                for name, _, j in ops:
                    value = CELL_OPS[name](T, value, pool[j % len(pool)])
                    pool = pool + [value]
                new.append(T.tanh(value))
            hs = new[1:] + new[:1]  # states also trade places
            if keep:
                total = total + hs[-1].sum()
        return total + sum(h.sum() for h in hs) if keep else sum(h.sum() for h in hs)
    rng = np.random.default_rng(seed)
    backward_against_torch(torch_reference, fn, [rng.uniform(-1, 1, 3) for _ in range(states + weights)], jit=False)


def _chain_program(steps):
    """A program by hand: a_k = sin(a_{k-1}); b_k = b_{k-1} * a_k + 1 (a second loop reading the
    first one forward), and one sum over every a_k, the last (the final carry) included."""
    program = Program("by_hand")
    a = program.input((3,), "float64", "a")
    b = program.input((3,), "float64", "b")
    As = [a]
    for _ in range(steps):
        As.append(program.assign(sp.sin(As[-1]), (3,), "float64", "a"))
    for k in range(1, steps + 1):
        b = program.assign(b * As[k] + 1, (3,), "float64", "b")
    total = program.assign(sp.Add(*As[1:]), (3,), "float64", "total")
    program.output(total, (3,), "float64", "total")
    program.output(b, (3,), "float64", "b")
    return program


def test_forward_strides_and_a_sum_that_reads_the_final_carry():
    program = _chain_program(12)
    rng = np.random.default_rng(5)
    a0, b0 = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
    source, (total, b) = both_ways(program, [a0, b0])
    assert source.count("jax.lax.scan(") == 2 and "jnp.sum(" in source
    a, expected_total, expected_b = a0, 0, b0
    for _ in range(12):
        a = np.sin(a)
        expected_total, expected_b = expected_total + a, expected_b * a + 1
    np.testing.assert_allclose(np.asarray(total), expected_total, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(b), expected_b, rtol=1e-12)


@pytest.mark.parametrize("order", ["forward", "backward", "every other"])
def test_rnn_over_a_sequence(torch_reference, order):
    """h = tanh(h @ W + X[t] @ U + b): X[t] moves one row (or two) per step.  The scan takes
    X's rows as a slice, and X's gradient, one row per step, is scattered back in one add."""
    rng = np.random.default_rng(6)
    X0, W0, U0, b0 = rng.normal(size=(40, 2, 3)), rng.normal(size=(4, 4)) * 0.5, rng.normal(size=(3, 4)), rng.normal(size=4)

    def rnn(T, X, W, U, b, steps):
        times = {"forward": range(steps), "backward": range(steps - 1, -1, -1),
                 "every other": range(0, 2 * (steps // 2), 2)}[order]
        h = T.zeros(2, 4, dtype=T.float64)
        for t in times:
            h = T.tanh(h @ W + X[t] @ U + b)
        return (h * h).sum()

    sizes = [len(backward_against_torch(torch_reference, lambda T, *leaves: rnn(T, *leaves, steps), [X0, W0, U0, b0],
                                        jit=steps == 40).splitlines()) for steps in (16, 40)]
    assert sizes[0] == sizes[1]
    ours = [torch.tensor(v, requires_grad=True) for v in (X0, W0, U0, b0)]  # and symgrad's own backward
    rnn(torch, *ours, 40).backward()
    theirs = [torch_reference.tensor(v, requires_grad=True) for v in (X0, W0, U0, b0)]
    rnn(torch_reference, *theirs, 40).backward()
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad.numpy(), reference.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_a_sequence_read_from_a_value_the_steps_change_is_not_sliced(torch_reference):
    """h[t] of the carried h itself: not an input sequence, so no slice of it is taken."""
    def fn(T, x):
        h = x
        for t in range(8):
            h = h * 0.9 + T.sin(h[t])
        return h.sum()
    backward_against_torch(torch_reference, fn, [np.random.default_rng(7).uniform(-1, 1, (8, 3))], jit=False)


def test_a_step_of_many_assignments(torch_reference):
    """Three stacked LSTM layers: 52 assignments per forward step and 78 per backward step."""
    rng = np.random.default_rng(8)
    params = [rng.uniform(-1, 1, shape)
              for layer in range(3) for shape in ((3 if layer == 0 else 4, 16), (4, 16), (16,))]

    def lstm(T, X, *weights):
        hs = [T.zeros(2, 4, dtype=T.float64) for _ in range(3)]
        cs = [T.zeros(2, 4, dtype=T.float64) for _ in range(3)]
        for t in range(X.shape[0]):
            inp = X[t]
            for layer in range(3):
                Wx, Wh, b = weights[3 * layer:3 * layer + 3]
                z = inp @ Wx + hs[layer] @ Wh + b
                i, f, o = T.sigmoid(z[:, :4]), T.sigmoid(z[:, 4:8]), T.sigmoid(z[:, 12:])
                cs[layer] = f * cs[layer] + i * T.tanh(z[:, 8:12])
                hs[layer] = inp = o * T.tanh(cs[layer])
        return (hs[-1] * hs[-1]).sum()

    sizes = [len(backward_against_torch(torch_reference, lstm, [rng.uniform(-1, 1, (steps, 2, 3)), *params],
                                        jit=False).splitlines()) for steps in (8, 16)]
    assert sizes[0] == sizes[1]


def test_an_rnn_under_a_learning_rate_schedule_is_still_a_scan(torch_reference):
    """An RNN over ``X[t]`` trained with a rate that changes every step: the rate becomes an input of
    the step's program and the rows' starts, the same every step, stay in it, so the program is still
    printed as a scan (as one taking the starts as inputs could not be); every loss PyTorch's."""
    rng = np.random.default_rng(9)
    X0, W0, U0 = rng.normal(size=(30, 8)), rng.normal(size=(8, 4)) * 0.3, rng.normal(size=(4, 4)) * 0.3

    def losses(T):
        X, W, U = T.tensor(X0), T.tensor(W0, requires_grad=True), T.tensor(U0, requires_grad=True)
        step = T.optim.SGD([W, U], lr=0.1)
        schedule, kept = T.optim.lr_scheduler.ExponentialLR(step, 0.9), []
        for _ in range(6):
            h = T.zeros(4, dtype=T.float64)
            for t in range(30):
                h = T.tanh(X[t] @ W + h @ U)
            loss = (h * h).sum()
            step.zero_grad()
            loss.backward()
            step.step()
            schedule.step()
            kept.append(loss.item())
        return kept

    compiled = len(codegen.stats.source_lines)
    ours = losses(torch)
    assert len(codegen.stats.source_lines) > compiled and max(codegen.stats.source_lines[compiled:]) < 120, \
        codegen.stats.source_lines[compiled:]
    np.testing.assert_allclose(ours, losses(torch_reference), rtol=1e-10)
