"""Adversarial scenarios for deferred calls (codegen.deferred): torch-style loops long enough for
deferral (8 calls) and fusion (32 full chains of 16) to kick in, each run with ``symgrad`` and
with real PyTorch on the same arrays; every number read must agree.  The loops also record the
parameters along the way (``record``: every eager step and the last step of every chain, kept
and read only after the loop), compared with PyTorch's step by step: a step skipped or made
twice late in a loop hardly moves where it ends."""
import gc
import threading

import numpy as np
import pytest
from test_deferred import assert_same_steps, record

import codegen
import symgrad
from codegen import deferred

TOL = dict(rtol=1e-4, atol=1e-5)
STEP_TOL = dict(rtol=1e-5, atol=1e-6)  # float32, step by step (PyTorch's and ours part by ~3e-6 at most)
WARM = deferred.HOT_AFTER + (deferred.FUSE_AFTER + 1) * deferred.MAX_CHAIN + 56  # 600: fused program built
STEPS = WARM + 250  # and used afterwards


@pytest.fixture
def fused_runs(monkeypatch):
    """How many chains ran as a fused XLA program (not call by call)."""
    count = [0]
    original = deferred._Fused.run

    def run(self, arrays):
        results = original(self, arrays)
        if results is not None:
            count[0] += 1
        return results

    monkeypatch.setattr(deferred._Fused, "run", run)
    return count


@pytest.fixture
def full_chains(monkeypatch):
    """How many chains ran full (``MAX_CHAIN`` calls, the ones a fused program may run)."""
    count = [0]
    original = deferred._Chain._run

    def run(self):
        count[0] += len(self.calls) == deferred.MAX_CHAIN
        original(self)

    monkeypatch.setattr(deferred._Chain, "_run", run)
    return count


def net(T, dtype=np.float32, seed=7, n=5, m=3):
    rng = np.random.default_rng(seed)
    x = T.tensor(np.linspace(-1.0, 1.0, n).astype(dtype))
    y = T.tensor(np.linspace(0.0, 1.0, m).astype(dtype))
    w = T.tensor((0.5 * rng.standard_normal((n, m))).astype(dtype), requires_grad=True)
    b = T.tensor((0.5 * rng.standard_normal(m)).astype(dtype), requires_grad=True)
    return x, y, w, b


def bce(T, x, y, w, b):
    return T.nn.functional.binary_cross_entropy_with_logits(T.matmul(x, w) + b, y)


def warm(T, step):
    """After the warm-up, wait for the fused programs, so that the rest of the loop uses them."""
    if T is symgrad and step in (WARM, WARM + 100):
        deferred.finish_compiles()


def arr(t):
    return np.array(t.detach().numpy() if hasattr(t, "detach") else t, dtype=np.float64)


def same(a, b, err_msg="", **tol):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), err_msg=err_msg, **(tol or TOL))


def both(torch, loop, *args):
    """``loop`` run with symgrad and with torch; returns both results."""
    return loop(symgrad, *args), loop(torch, *args)


def stepwise(torch, loop, *args, **tol):
    """``loop(T, records, *args)`` run with symgrad and with torch, what they ``record`` compared
    step by step; returns both results."""
    records, expected = {}, {}
    results = loop(symgrad, records, *args), loop(torch, expected, *args)
    assert_same_steps(records, expected, **(tol or STEP_TOL))
    return results


def sgd_step(T, w, b, lr=0.1):
    with T.no_grad():
        w -= lr * w.grad
        b -= lr * b.grad
    w.grad.zero_()
    b.grad.zero_()


# ----------------------------------------------------------------------------- reading values


def _plain(T, records=None, steps=STEPS):
    x, y, w, b = net(T)
    for step in range(steps):
        warm(T, step)
        bce(T, x, y, w, b).backward()
        if records is not None:
            record(T, records, step, w, b)
        sgd_step(T, w, b)
    return arr(w), arr(b)


def test_read_only_at_the_very_end(torch, fused_runs):
    (w, b), (tw, tb) = stepwise(torch, _plain)
    same(w, tw)
    same(b, tb)
    assert fused_runs[0] > 0


def _periodic(T, period):
    x, y, w, b = net(T, seed=period)
    seen = []
    for step in range(STEPS):
        warm(T, step)
        loss = bce(T, x, y, w, b)
        loss.backward()
        if step % period == period - 1:
            seen.append(loss.item())
            seen.extend(w.grad.tolist()[1])
        sgd_step(T, w, b)
    return seen, arr(w)


@pytest.mark.parametrize("period", [15, 16, 17, 33])
def test_reads_every_nth_step(torch, period):
    (seen, w), (tseen, tw) = both(torch, _periodic, period)
    same(seen, tseen)
    same(w, tw)


def _odd_moments(T):
    x, y, w, b = net(T, seed=11)
    seen = []
    for step in range(STEPS):
        warm(T, step)
        loss = bce(T, x, y, w, b)
        if step % 97 == 5:
            seen.append(("before backward", float(loss)))
        loss.backward()
        if step % 101 == 7:
            seen.append(("after backward", w.grad.detach().numpy().sum().item()))
        with T.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
        if step % 89 == 3:
            seen.append(("between update and zero_", arr(w).sum(), arr(b.grad).sum()))
        w.grad.zero_()
        b.grad.zero_()
        if step % 113 == 9:
            seen.append(("after zero_", arr(b).sum(), bool(loss > 0.1), int(loss * 1000)))
    return seen, arr(w)


def test_reads_at_odd_moments(torch):
    (seen, w), (tseen, tw) = both(torch, _odd_moments)
    assert [s[0] for s in seen] == [s[0] for s in tseen]
    for s, t in zip(seen, tseen):
        same(s[1:], t[1:])
    same(w, tw)


def _every_way(T, records):
    x, y, w, b = net(T, seed=3)
    seen = []
    for step in range(STEPS):
        warm(T, step)
        loss = bce(T, x, y, w, b)
        loss.backward()
        record(T, records, step, w, b)
        if step in (620, 700, 781):
            seen.append(f"{loss:.5f}")
            seen.append(format(float(loss), ".5f"))
            seen.append(np.round(np.asarray(b.grad), 5).tolist())
            seen.append(np.round(b.grad.numpy(), 5).tolist())
            seen.append(round(b.grad[1].item(), 5))
            seen.append(np.round(np.asarray(w.detach()[2]), 5).tolist())
        sgd_step(T, w, b)
    return seen


def test_every_way_of_reading_mid_loop(torch):
    seen, tseen = stepwise(torch, _every_way)
    assert seen == tseen


def _printed(T, records):
    x, y, w, b = net(T, seed=5)
    for step in range(STEPS):
        warm(T, step)
        bce(T, x, y, w, b).backward()
        record(T, records, step, w, b)
        sgd_step(T, w, b)
    with T.no_grad():  # rounded so that float32 noise in the last digit cannot show
        return str(T.round(b * 100) / 100) if hasattr(T, "round") else None, repr(b.detach().numpy().round(2))


def test_printing_a_deferred_parameter(torch):
    (printed, r), (tprinted, tr) = stepwise(torch, _printed)
    assert r == tr
    if printed is not None:
        assert printed == tprinted


# ------------------------------------------------------------------- keeping old tensors alive


def _keep(T):
    x, y, w, b = net(T, seed=13)
    losses, grads, snaps = [], [], []
    for step in range(STEPS):
        warm(T, step)
        loss = bce(T, x, y, w, b)
        loss.backward()
        losses.append(loss)
        grads.append(w.grad.clone())
        snaps.append(w.detach().clone())
        sgd_step(T, w, b)
    return [l.item() for l in losses], [arr(g) for g in grads], [arr(s) for s in snaps]


def test_old_tensors_kept_alive_and_read_much_later(torch):
    got, expected = both(torch, _keep)
    for name, a, e in zip(["losses", "grads", "snapshots"], got, expected):
        assert len(a) == len(e), name
        same(np.array(a), np.array(e), err_msg=name)


def _keep_grad_tensor(T):
    x, y, w, b = net(T, seed=17)
    grads = []
    for step in range(STEPS):
        warm(T, step)
        bce(T, x, y, w, b).backward()
        grads.append(w.grad)  # the same tensor object every step, zeroed in place
        sgd_step(T, w, b)
    return [arr(g) for g in grads[::97]], all(g is grads[0] for g in grads)


def test_the_grad_tensor_object_kept_is_zeroed_in_place(torch):
    (g, same_obj), (tg, tsame_obj) = both(torch, _keep_grad_tensor)
    assert same_obj == tsame_obj
    same(g, tg)


# --------------------------------------------------------------------------- gradient flows


def _accumulate(T, records):
    x, y, w, b = net(T, seed=19)
    seen = []
    for step in range(STEPS):
        warm(T, step)
        bce(T, x, y, w, b).backward()
        record(T, records, step, w, b, b.grad)
        with T.no_grad():
            w -= 1e-4 * w.grad  # never zeroed: the gradients add up
        if step % 200 == 199:
            seen.append(arr(b.grad))
    return seen, arr(w), arr(w.grad)


def test_gradient_accumulation_without_zero(torch):
    (seen, w, g), (tseen, tw, tg) = stepwise(torch, _accumulate)
    same(seen, tseen)
    same(w, tw)
    same(g, tg)


@pytest.mark.parametrize("config", [dict(momentum=0.9), dict(momentum=0.9, weight_decay=0.01),
                                    dict(momentum=0.8, nesterov=True, weight_decay=0.001),
                                    dict(momentum=0.5, dampening=0.3)])
def test_optimizer_sgd(torch, config):
    def loop(T, records):
        x, y, w, b = net(T, seed=23)
        opt = T.optim.SGD([w, b], lr=0.05, **config)
        for step in range(STEPS):
            warm(T, step)
            opt.zero_grad()
            loss = bce(T, x, y, w, b)
            loss.backward()
            record(T, records, step, w, b)
            opt.step()
        return arr(w), arr(b), loss.item()
    got, expected = stepwise(torch, loop)
    for a, e in zip(got, expected):
        same(a, e)


def _retain(T, records):
    x, y, w, b = net(T, seed=29)
    seen = []
    for step in range(STEPS):
        warm(T, step)
        loss = bce(T, x, y, w, b)
        loss.backward(retain_graph=True)
        (loss * 0.5).backward()
        record(T, records, step, w, b, w.grad)
        if step % 250 == 3:
            seen.append(arr(w.grad))
        sgd_step(T, w, b)
    return seen, arr(w)


def test_two_backwards_per_step_with_retain_graph(torch):
    (seen, w), (tseen, tw) = stepwise(torch, _retain)
    same(seen, tseen)
    same(w, tw)


def _alternate(T, records, pattern):
    x, y, w, b = net(T, seed=31)
    seen = []
    for step in range(STEPS):
        warm(T, step)
        if pattern[step % len(pattern)] == "bce":
            loss = bce(T, x, y, w, b)
        else:
            loss = ((T.matmul(x, w) + b - y) ** 2).mean()
        loss.backward()
        record(T, records, step, w, b)
        sgd_step(T, w, b)
        if step % 211 == 0:
            seen.append(loss.item())
    return seen, arr(w), arr(b)


@pytest.mark.parametrize("pattern", [("bce", "mse"), ("bce", "mse", "mse"), ("bce",) * 16 + ("mse",)])
def test_alternating_losses(torch, pattern):
    got, expected = stepwise(torch, _alternate, pattern)
    for a, e in zip(got, expected):
        same(a, e)


@pytest.mark.parametrize("schedule", ["every step", "cycle of 2", "changes after fusion"])
def test_learning_rate_schedules(torch, schedule, fused_runs):
    def lr(step):
        if schedule == "every step":
            return 0.1 / (1 + 0.01 * step)
        if schedule == "cycle of 2":
            return (0.1, 0.05)[step % 2]
        return 0.1 if step < WARM + 50 else 0.03 if step < WARM + 150 else 0.1

    def loop(T, records):
        x, y, w, b = net(T, seed=37)
        for step in range(STEPS):
            warm(T, step)
            bce(T, x, y, w, b).backward()
            record(T, records, step, w, b, every_step=schedule == "cycle of 2")  # two programs in turn: no chain fills
            sgd_step(T, w, b, lr(step))
        return arr(w), arr(b)
    got, expected = stepwise(torch, loop)
    for a, e in zip(got, expected):
        same(a, e)


def _hyper_in_loss(T, records):
    x, y, w, b = net(T, seed=41)
    for step in range(STEPS):
        warm(T, step)
        scale = 1.0 + (step % 3) * 0.5  # a Python float inside the differentiated graph
        (scale * bce(T, x, y, w, b)).backward()
        record(T, records, step, w, b, every_step=True)  # a program per scale: chains of two calls
        sgd_step(T, w, b)
    return arr(w), arr(b)


# ------------------------------------------------------------------------ switching modes


def _switch(T, records):
    x, y, w, b = net(T, seed=43)
    for step in range(STEPS):
        warm(T, step)
        frozen = WARM + 20 <= step < WARM + 120
        if step == WARM + 20:
            b.requires_grad_(False)
        if step == WARM + 120:
            b.requires_grad_(True)
        use_w = w.detach() if 300 <= step < 400 else w
        loss = bce(T, x, y, use_w, b)
        loss.backward()
        record(T, records, step, w, b)
        with T.no_grad():
            if w.grad is not None:
                w -= 0.1 * w.grad
                w.grad.zero_()
            if not frozen and b.grad is not None:
                b -= 0.1 * b.grad
                b.grad.zero_()
    return arr(w), arr(b)


def _inplace(T, records):
    x, y, w, b = net(T, seed=47)
    for step in range(STEPS):
        warm(T, step)
        bce(T, x, y, w, b).backward()
        record(T, records, step, w, b)
        with T.no_grad():
            w.mul_(0.999)
            w.add_(w.grad, alpha=-0.1)
            b.add_(-0.1 * b.grad)
            if step % 100 == 99:
                w.copy_(w * 0.5 + 0.1)
            if step % 150 == 149:
                w.data = w.data * 0.9
        w.grad.zero_()
        b.grad.zero_()
    return arr(w), arr(b)


@pytest.mark.parametrize("loop", [_hyper_in_loss, _switch, _inplace],
                         ids=["python float inside the loss varies", "requires_grad and detach switched mid-loop",
                              "in-place ops on parameters"])
def test_parameters_end_where_pytorchs_do(torch, loop, full_chains):
    got, expected = stepwise(torch, loop)
    for a, e in zip(got, expected):
        same(a, e)
    if loop is _hyper_in_loss:  # which records every step: right while no chain fills up
        assert full_chains[0] == 0


def _two_models(T, records, second_shape):
    x, y, w, b = net(T, seed=53)
    x2, y2, w2, b2 = net(T, seed=59, n=second_shape[0], m=second_shape[1])
    for step in range(STEPS):
        warm(T, step)
        bce(T, x, y, w, b).backward()
        bce(T, x2, y2, w2, b2).backward()
        record(T, records, step, w, b, w2, b2, every_step=True)  # two programs: chains of two calls
        sgd_step(T, w, b)
        sgd_step(T, w2, b2, 0.2)
    return arr(w), arr(b), arr(w2), arr(b2)


@pytest.mark.parametrize("second_shape", [(5, 3), (4, 2)])
def test_two_models_in_one_loop(torch, second_shape, full_chains):
    got, expected = stepwise(torch, _two_models, second_shape)
    for a, e in zip(got, expected):
        same(a, e)
    assert full_chains[0] == 0  # which _two_models' recording every step relies on


def _manual_momentum(T, records, steps, carry):
    x, y, w, b = net(T, seed=61)
    prev = None
    for step in range(steps):
        warm(T, step)
        bce(T, x, y, w, b).backward()
        record(T, records, step, w, b)
        with T.no_grad():
            g = w.grad.clone() if prev is None else w.grad + 0.5 * prev
            w -= 0.1 * g
            b -= 0.1 * b.grad
        prev = carry(g)
        w.grad.zero_()
        b.grad.zero_()
    return arr(w), arr(b), arr(prev)


def test_a_value_carried_from_step_to_step_detached(torch):
    got, expected = stepwise(torch, _manual_momentum, STEPS, lambda g: g.detach())
    for a, e in zip(got, expected):
        same(a, e)


def test_a_value_carried_from_step_to_step_as_a_no_grad_result(torch):
    def carry(g):
        return g

    _manual_momentum(symgrad, {}, 10, carry)  # compiles what the first steps need (and the reads after)
    compiles = codegen.stats.compiles
    records, expected = {}, {}
    got = _manual_momentum(symgrad, records, 40, carry)
    assert codegen.stats.compiles == compiles, "a program per step: the graph grows"
    for a, e in zip(got, _manual_momentum(torch, expected, 40, carry)):
        same(a, e)
    assert_same_steps(records, expected, **STEP_TOL)


# --------------------------------------------------------------------- functional / checks


def _trained(T, records, seed, steps=WARM + 30):
    x, y, w, b = net(T, seed=seed)
    for step in range(steps):
        warm(T, step)
        bce(T, x, y, w, b).backward()
        record(T, records, step, w, b)
        sgd_step(T, w, b)
    bce(T, x, y, w, b).backward()
    return x, y, w, b


def test_value_and_grad_capturing_a_pending_value(torch):
    """A function traced by jax.jit reads a pending gradient: its chain must not run inside the
    trace (the other live results, here w's and b's, would get tracers as values)."""
    records, expected = {}, {}
    _, _, w, b = _trained(symgrad, records, 67)
    _, _, tw, tb = _trained(torch, expected, 67)
    g = b.grad
    assert isinstance(g._node.value, deferred.Pending)
    value, dv = symgrad.value_and_grad(lambda v: (symgrad.tanh(v) * g).sum())(np.float32([0.1, 0.2, 0.3]))
    v = torch.tensor(np.float32([0.1, 0.2, 0.3]), requires_grad=True)
    tvalue = (torch.tanh(v) * tb.grad).sum()
    tvalue.backward()
    same(float(value), tvalue.item())
    same(np.asarray(dv), v.grad.numpy())
    same(arr(b.grad), arr(tb.grad))  # read again afterwards
    same(arr(w.grad), arr(tw.grad))
    same(arr(w), arr(tw))
    assert_same_steps(records, expected, **STEP_TOL)


def test_gradcheck_and_crosscheck_on_pending_values(torch):
    records, expected = {}, {}
    _, _, w, b = _trained(symgrad, records, 71)
    assert isinstance(b.grad._node.value, deferred.Pending)
    assert symgrad.gradcheck(lambda v: (symgrad.sin(v) * b.grad).sum(),
                             (symgrad.tensor(np.ones(3), requires_grad=True),))
    wd = w.detach()
    report = symgrad.crosscheck(lambda v: (v * wd).sum(), [np.ones((5, 3))], against=("jax",))
    assert report.ok
    _, _, tw, tb = _trained(torch, expected, 71)
    same(arr(w), arr(tw))
    same(arr(b.grad), arr(tb.grad))
    assert_same_steps(records, expected, **STEP_TOL)


# -------------------------------------------------------------- threads, errors, dtypes, shapes


def test_one_loop_per_thread(torch):
    results, records, errors = {}, {}, []

    def run(seed):
        try:
            x, y, w, b = net(symgrad, seed=seed)
            records[seed] = {}
            for step in range(STEPS):
                bce(symgrad, x, y, w, b).backward()
                record(symgrad, records[seed], step, w, b)
                sgd_step(symgrad, w, b)
            results[seed] = (arr(w), arr(b))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=run, args=(seed,)) for seed in (71, 73, 79)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for seed, (w, b) in results.items():
        x, y, tw, tb = net(torch, seed=seed)
        expected = {}
        for step in range(STEPS):
            bce(torch, x, y, tw, tb).backward()
            record(torch, expected, step, tw, tb)
            sgd_step(torch, tw, tb)
        assert_same_steps(records[seed], expected, **STEP_TOL)
        same(w, arr(tw))
        same(b, arr(tb))


def test_pending_values_read_from_another_thread_while_training(torch):
    x, y, w, b = net(symgrad, seed=83)
    kept, seen, errors, done = [], [], [], threading.Event()

    def reader():
        try:
            while not done.is_set():
                if kept:
                    i = len(kept) - 1
                    seen.append((i, kept[i].item()))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for step in range(STEPS):
            loss = bce(symgrad, x, y, w, b)
            loss.backward()
            kept.append(loss.detach())
            sgd_step(symgrad, w, b)
    finally:
        done.set()
        t.join()
    assert not errors, errors
    tx, ty, tw, tb = net(torch, seed=83)
    expected = []
    for step in range(STEPS):
        loss = bce(torch, tx, ty, tw, tb)
        loss.backward()
        expected.append(loss.item())
        sgd_step(torch, tw, tb)
    same([loss.item() for loss in kept], expected)
    same([v for _, v in seen], [expected[i] for i, _ in seen])
    same(arr(w), arr(tw))


def _errors(T, records):
    x, y, w, b = net(T, seed=89)
    caught = 0
    for step in range(STEPS):
        warm(T, step)
        loss = bce(T, x, y, w, b)
        loss.backward()
        record(T, records, step, w, b)
        if step % 37 == 36:
            try:
                T.matmul(w, x)  # (5, 3) @ (5,): a shape error
            except RuntimeError:
                caught += 1
            try:
                loss.backward()  # the graph was freed
            except RuntimeError:
                caught += 1
            try:
                loss.backward(T.ones(4))  # a wrong gradient shape
            except RuntimeError:
                caught += 1
        sgd_step(T, w, b)
    return caught, arr(w), arr(b)


def test_errors_raised_and_caught_mid_loop(torch):
    (c, w, b), (tc, tw, tb) = stepwise(torch, _errors)
    assert c == tc
    same(w, tw)
    same(b, tb)


def test_float64_parameters(torch):
    def loop(T, records):
        x, y, w, b = net(T, dtype=np.float64, seed=97)
        for step in range(STEPS):
            warm(T, step)
            loss = bce(T, x, y, w, b)
            loss.backward()
            record(T, records, step, w, b)
            sgd_step(T, w, b)
        return arr(w), arr(b), loss.item(), str(w.dtype)
    (w, b, l, d), (tw, tb, tl, td) = stepwise(torch, loop, rtol=1e-10, atol=1e-12)
    assert d == td
    same(w, tw, rtol=1e-10, atol=1e-12)
    same(b, tb, rtol=1e-10, atol=1e-12)
    same(l, tl, rtol=1e-10, atol=1e-12)


def test_a_non_scalar_loss_with_a_gradient(torch):
    def loop(T, records):
        x, y, w, b = net(T, seed=101)
        seen = []
        for step in range(STEPS):
            warm(T, step)
            out = T.sigmoid(T.matmul(x, w) + b)
            out.backward(gradient=T.tensor(np.float32([1.0, -0.5, 0.25 + (step % 5) * 0.1])))
            record(T, records, step, w, b)
            sgd_step(T, w, b, 0.05)
            if step % 150 == 0:
                seen.append(arr(out))
        return seen, arr(w), arr(b)
    got, expected = stepwise(torch, loop)
    for a, e in zip(got, expected):
        same(a, e)


def test_a_reused_numpy_batch_buffer(torch):
    def loop(T, records):
        rng = np.random.default_rng(103)
        _, y, w, b = net(T, seed=103)
        buf = np.zeros(5, np.float32)
        for step in range(STEPS):
            warm(T, step)
            buf[:] = rng.standard_normal(5)  # refilled in place each step
            x = T.from_numpy(buf)
            bce(T, x, y, w, b).backward()
            record(T, records, step, w, b)
            sgd_step(T, w, b)
        return arr(w), arr(b)
    got, expected = stepwise(torch, loop)
    for a, e in zip(got, expected):
        same(a, e)


def test_a_long_loop_leaks_no_pending_values():
    def count():
        gc.collect()
        return sum(1 for o in gc.get_objects() if o.__class__ in (deferred.Pending, deferred._Call, deferred._Chain))
    _plain(symgrad, steps=200)
    before = count()
    w, _ = _plain(symgrad)
    assert count() - before <= 2 * deferred.MAX_CHAIN
