"""Deferred calls (codegen.deferred): a hot loop's small programs run sixteen at a time, and
every value anyone reads is the one an immediate run gives (PyTorch's, for the seed loop)."""
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import codegen
import symgrad
from codegen import deferred
from symgrad import replaying

F32 = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture(autouse=True)
def no_chain_left_over():
    """Each test starts with this thread's chain run: its counts of chains do not depend on what an
    earlier test, of this file or of another one run in the same worker, left pending."""
    chain = deferred._state.chain
    if chain is not None:
        with chain.lock:
            if not chain.done:
                chain.run()
    yield


class Step:
    """A stand-in for a compiled program: ``(a, b) -> (a + 1, b / 2 + cos(a))``, counting its runs.
    ``a`` counts the calls and ``b`` never settles: a call skipped or made twice shows in both."""

    def __init__(self, small=True):
        self.result_count, self.small, self.calls, self.runs = 2, small, 0, 0
        self.wait = deferred.HOT_AFTER
        self.fn = jax.jit(self.python_fn)

    @staticmethod
    def python_fn(a, b):
        return a + 1, b * 0.5 + jnp.cos(a)

    def run(self, *arrays):
        self.runs += 1
        return self.fn(*arrays)


def kept_unchanged(result) -> bool:
    """Whether a loop can keep ``result`` (an array or a Pending) to read after the loop, and leave
    its chain as it was: a chain returns the results still held when it runs, and its fused
    program is compiled for that set (the latest results only: a scan of one step).  So: a result
    computed already, or one of the last call of a full chain (returned anyway)."""
    return result.__class__ is not deferred.Pending or result.call.position == deferred.MAX_CHAIN - 1


def _iterate(step, a, b, n, kept=None):
    """``n`` calls; ``kept`` (a dict) gets the results of call k at k where ``kept_unchanged``."""
    for k in range(1, n + 1):
        a, b = deferred.call(step, [a, b])
        if kept is not None and kept_unchanged(a):
            kept[k] = a, b
    return a, b


def _by_hand_steps(a, b, n):
    """The states after 0, 1, ..., n calls, in float32 as the program computes them."""
    states = [(np.float32(a), np.float32(b))]
    for _ in range(n):
        a, b = states[-1]
        states.append((a + np.float32(1), b * np.float32(0.5) + np.cos(a)))
    return states


def _by_hand(a, b, n):
    return _by_hand_steps(a, b, n)[-1]


def assert_kept_states(kept, expected):
    """The states kept at calls k against ``expected[k]``, read now, after the loop."""
    assert len(kept) > 2
    np.testing.assert_allclose([[deferred.value(a), deferred.value(b)] for a, b in kept.values()],
                               [expected[k] for k in kept], **F32)


def test_a_hot_small_program_runs_in_chains_with_the_same_results():
    step = Step()
    chains, fused = deferred.stats.chains_run, deferred.stats.fused_compiles
    n = deferred.HOT_AFTER + deferred.FUSE_AFTER * deferred.MAX_CHAIN + 1  # the last full chain compiles
    state = [jnp.float32(0.5), jnp.float32(0.25)]  # holds only the latest results, as a loop does
    kept = {}  # and, by call, those that kept_unchanged allows

    def calls(numbers):
        for k in numbers:
            state[:] = deferred.call(step, state)
            if kept_unchanged(state[0]):
                kept[k] = tuple(state)

    calls(range(1, n + 1))
    assert step.runs == n - 1  # until then, full chains run call by call
    deferred.finish_compiles()
    last = n + 2 * deferred.MAX_CHAIN - 1  # two more full chains
    calls(range(n + 1, last + 1))
    a, b = state
    assert isinstance(a, deferred.Pending)
    expected = _by_hand_steps(0.5, 0.25, last)
    np.testing.assert_allclose([a.get(), b.get()], expected[-1], **F32)
    assert step.runs == n - 1  # both ran as one fused program each
    assert deferred.stats.chains_run - chains == deferred.FUSE_AFTER + 2
    assert deferred.stats.fused_compiles - fused == 1  # one per loop shape
    assert_kept_states(kept, expected)


def test_a_short_loop_compiles_nothing_new():
    step = Step()
    fused = deferred.stats.fused_compiles
    n = deferred.HOT_AFTER + (deferred.FUSE_AFTER - 1) * deferred.MAX_CHAIN + 1
    a, b = _iterate(step, jnp.float32(0.5), jnp.float32(0.25), n, kept := {})
    assert step.runs == n - 1 and deferred.stats.fused_compiles == fused  # full chains, call by call
    expected = _by_hand_steps(0.5, 0.25, n)
    np.testing.assert_allclose([a.get(), b.get()], expected[-1], **F32)
    assert_kept_states(kept, expected)


def test_a_read_runs_the_chain_cut_short_and_cools_the_program():
    step = Step()
    a, b = _iterate(step, jnp.float32(0.5), jnp.float32(0.1), deferred.HOT_AFTER + 5)
    fused = deferred.stats.fused_compiles
    np.testing.assert_allclose(b.get(), _by_hand(0.5, 0.1, deferred.HOT_AFTER + 5)[1], **F32)
    assert deferred.stats.fused_compiles == fused  # a short chain compiles nothing new
    assert step.calls == 0  # read before the chain was full: called at once until hot again
    a2, _ = deferred.call(step, [a, b])
    assert not isinstance(a2, deferred.Pending)


def test_a_chain_cut_short_compiles_no_program_again():
    """Was: a chain always ran inside ``ensure_compile_time_eval``, a setting that is part of jit's
    cache key, so a program called at once before and then in a chain cut short was compiled by
    XLA a second time (a 70 ms stall in the 9th fresh W5 loop of a process)."""
    compiles = []

    def listener(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    step = Step()
    a, b = deferred.call(step, [jnp.float32(0.5), jnp.float32(0.1)])  # compiled here, at once
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        a, b = _iterate(step, a, b, deferred.HOT_AFTER + 5)
        assert isinstance(b, deferred.Pending)
        np.testing.assert_allclose(b.get(), _by_hand(0.5, 0.1, deferred.HOT_AFTER + 6)[1], **F32)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiles == []


def test_only_results_still_held_come_out_of_a_chain():
    step = Step()
    kept = []
    a, b = jnp.float32(0.5), jnp.float32(0.5)
    for k in range(deferred.HOT_AFTER + 6):
        a, b = deferred.call(step, [a, b])
        if k in (deferred.HOT_AFTER + 1, deferred.HOT_AFTER + 3):
            kept.append(a)
    b.get()
    expected = [_by_hand(0.5, 0.5, k + 1)[0] for k in (deferred.HOT_AFTER + 1, deferred.HOT_AFTER + 3)]
    np.testing.assert_allclose([p.get() for p in kept], expected, **F32)


def test_a_call_that_breaks_the_loop_runs_the_chain_first():
    step, other = Step(), Step()
    a, b = _iterate(step, jnp.float32(0.5), jnp.float32(0.25), deferred.HOT_AFTER + 4)
    other.calls = deferred.HOT_AFTER  # hot too, but another program: a new chain
    chains = deferred.stats.chains_run
    c, d = deferred.call(other, [a, b])
    assert deferred.stats.chains_run == chains + 1 and a.array is not None
    np.testing.assert_allclose([c.get(), d.get()], _by_hand(*_by_hand(0.5, 0.25, deferred.HOT_AFTER + 4), 1), **F32)


def test_big_programs_and_traced_inputs_run_at_once():
    big = Step(small=False)
    a, _ = _iterate(big, jnp.float32(0.5), jnp.float32(0.25), 3 * deferred.MAX_CHAIN)
    assert not isinstance(a, deferred.Pending) and big.runs == 3 * deferred.MAX_CHAIN
    step = Step()
    step.calls = deferred.HOT_AFTER
    traced = jax.jit(lambda x: deferred.call(step, [x, x])[1])(jnp.float32(3.0))
    np.testing.assert_allclose(float(traced), _by_hand(3.0, 3.0, 1)[1], **F32)


def test_a_pending_value_read_from_another_thread():
    step = Step()
    a, b = _iterate(step, jnp.float32(0.5), jnp.float32(0.25), deferred.HOT_AFTER + 2)
    seen = []
    reader = threading.Thread(target=lambda: seen.append(float(a.get())))
    reader.start()
    reader.join()
    np.testing.assert_allclose(seen, [_by_hand(0.5, 0.25, deferred.HOT_AFTER + 2)[0]], **F32)
    np.testing.assert_allclose(b.get(), _by_hand(0.5, 0.25, deferred.HOT_AFTER + 2)[1], **F32)


# ------------------------------------------------------------------- the seed loop, end to end


def record(T, records, step, *tensors, every_step=False):
    """Snapshots of ``tensors`` at ``step`` in ``records``, to be compared step by step after the
    loop: every step of PyTorch's, and symgrad's where keeping them leaves the deferred chains as
    they were (``kept_unchanged`` of the first tensor's value): the eager steps, and then the last
    step of each chain.  ``every_step`` keeps symgrad's every step too: right for a loop whose
    chains never fill up (the caller checks it), where no fused program depends on what is kept."""
    if T is not symgrad or every_step or kept_unchanged(tensors[0]._node.value):
        records[step] = [t.detach().clone() for t in tensors]


def assert_same_steps(records, expected, rtol, atol):
    """symgrad's ``records`` (at least one per chain) against PyTorch's of the same steps."""
    assert len(records) >= len(expected) // deferred.MAX_CHAIN, sorted(records)
    for step, snapshots in records.items():
        for ours, theirs in zip(snapshots, expected[step]):
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=rtol, atol=atol, err_msg=f"step {step}")


def _seed_loop(T, steps, reads=(), keep=None, records=None):
    """The tutorials' network trained torch-style; at the steps in ``reads`` the loss and the
    gradients are read (as a user printing them would); ``keep`` collects every loss tensor, and
    ``records`` the parameters each loss was computed with (``record``)."""
    rng = np.random.default_rng(7)
    x, y = T.tensor(np.ones(5, np.float32)), T.tensor(np.zeros(3, np.float32))
    w = T.tensor(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=True)
    b = T.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    seen = []
    for step in range(steps):
        loss = T.nn.functional.binary_cross_entropy_with_logits(T.matmul(x, w) + b, y)
        loss.backward()
        if step in reads:
            seen.append((loss.item(), w.grad.numpy().copy(), b.grad.numpy().copy()))
        if keep is not None:
            keep.append(loss)
        if records is not None:
            record(T, records, step, w, b)
        with T.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
        w.grad.zero_()
        b.grad.zero_()
    return seen, w.detach().numpy(), b.detach().numpy()


def test_the_seed_loop_runs_in_chains_and_ends_where_pytorch_does(torch):
    steps = 200
    chains = deferred.stats.chains_run
    _, w, b = _seed_loop(symgrad, steps, records=(records := {}))
    assert deferred.stats.chains_run - chains <= steps // deferred.MAX_CHAIN + 2
    _, tw, tb = _seed_loop(torch, steps, records=(expected := {}))
    assert_same_steps(records, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w, tw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, tb, rtol=1e-4, atol=1e-5)


def test_reads_in_the_middle_of_a_chain_give_pytorchs_numbers(torch):
    reads = (3, 30, 31, 57, 90)
    seen, w, _ = _seed_loop(symgrad, 100, reads)
    expected, tw, _ = _seed_loop(torch, 100, reads)
    for (loss, gw, gb), (tloss, tgw, tgb) in zip(seen, expected):
        np.testing.assert_allclose(loss, tloss, rtol=1e-5)
        np.testing.assert_allclose(gw, tgw, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(gb, tgb, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(w, tw, rtol=1e-4, atol=1e-5)


def test_losses_kept_across_chains_are_read_afterwards(torch):
    kept, expected = [], []
    _seed_loop(symgrad, 60, keep=kept)
    _seed_loop(torch, 60, keep=expected)
    np.testing.assert_allclose([loss.item() for loss in kept], [loss.item() for loss in expected], rtol=1e-5)


@pytest.mark.parametrize("read", ["print", "numpy", "detach", "value_and_grad"])
def test_every_way_of_reading_a_pending_value(read):
    a = symgrad.tensor(np.float32([1.0, 2.0]), requires_grad=True)
    for _ in range(deferred.HOT_AFTER + 3):
        (a * a).sum().backward()
    assert replaying.carried(a.grad) or isinstance(a.grad._node.value, deferred.Pending)  # trace replay, or deferred
    grad = 2 * (deferred.HOT_AFTER + 3) * np.float32([1.0, 2.0])
    if read == "print":
        assert str(a.grad) == repr(symgrad.tensor(grad))
    elif read == "numpy":
        np.testing.assert_allclose(a.grad.numpy(), grad)
    elif read == "detach":
        np.testing.assert_allclose((a.grad.detach() + 1).numpy(), grad + 1)
    else:  # a pending tensor captured by a compiled function is a constant of its trace
        g = a.grad
        value, dx = symgrad.value_and_grad(lambda x: (x * g).sum())(np.float32([1.0, 1.0]))
        np.testing.assert_allclose(float(value), grad.sum())
        np.testing.assert_allclose(np.asarray(dx), grad)


def test_a_deferred_loop_leaves_nothing_for_the_cycle_collector():
    """Chains forget their calls once run: a loop's garbage is freed by reference counting
    (a cycle left per chain made the collector sweep the whole heap every few thousand steps)."""
    import gc

    for _ in range(2):  # compiles (tracing leaves cyclic garbage of its own): the step, then the scans of
        _seed_loop(symgrad, 100)  # its replayed chains, some begun only in the second loop (a loaded machine)
    codegen.finish_compiles()  # and so do compiles in threads, this test's or an earlier one's
    enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        chains, replayed = deferred.stats.chains_run, replaying.stats.replayed
        _seed_loop(symgrad, 100)
        assert deferred.stats.chains_run > chains or replaying.stats.replayed > replayed + 90
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()


def test_a_program_read_after_every_call_is_tried_ever_less_often():
    step = Step()
    a, b = jnp.float32(0.5), jnp.float32(0.25)
    deferred_calls, seen = 0, []
    for _ in range(2000):
        a, b = deferred.call(step, [a, b])
        if isinstance(a, deferred.Pending):
            deferred_calls += 1
        a = deferred.value(a)  # read every step
        seen.append((a, deferred.value(b)))  # b came out with a: reading it runs nothing
    np.testing.assert_allclose(seen, _by_hand_steps(0.5, 0.25, 2000)[1:], **F32)
    assert deferred_calls <= 8  # waits 8, 16, ..., 1024 calls between tries
    assert step.wait == deferred.MAX_WAIT
