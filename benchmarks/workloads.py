"""The workloads (the five of issue 4 and later ones), each checked for agreement before it is timed.

Every function returns rows ``(workload, system, seconds)``; ``seconds`` is per call (W1, W2,
W4 steady), per iteration (W5), or per run (W3, W4 first call).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import sympy

import codegen
import symgrad
from codegen import unrolled
import symgrad.nn.functional as SF
from symgrad import engine
from benchmarks.systems import keeping_x64, pytensor_modules, ready, torch_module, torch_threads
from benchmarks.timing import Turns, once

F32 = dict(rtol=2e-4, atol=2e-5)


def _agree(name, results, tolerance=F32):
    """All systems' (value, grads...) equal to float32 tolerance (or ``tolerance``)."""
    reference_name, reference = next(iter(results.items()))
    for system, values in results.items():
        for a, b in zip(values, reference):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), **tolerance,
                                       err_msg=f"{name}: {system} disagrees with {reference_name}")


def _sgd_loop(T, x, y, w0, b0, steps: int, lr: float, optimizer: bool = False):
    """The torch-style training loop of W3 and W5 on module ``T`` (symgrad or torch):
    rebuild, backward, update under no_grad, zero the gradients (or ``T.optim.SGD`` does the
    last two).  Returns (last loss, w)."""
    w, b = T.tensor(w0, requires_grad=True), T.tensor(b0, requires_grad=True)
    if optimizer:
        sgd = T.optim.SGD([w, b], lr=lr)
        for _ in range(steps):
            sgd.zero_grad()
            loss = T.nn.functional.binary_cross_entropy_with_logits(T.matmul(x, w) + b, y)
            loss.backward()
            sgd.step()
        return loss, w
    for _ in range(steps):
        loss = T.nn.functional.binary_cross_entropy_with_logits(T.matmul(x, w) + b, y)
        loss.backward()
        with T.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad.zero_()
        b.grad.zero_()
    return loss, w


def _in_threads(torch, threads: int, fn):
    """``fn`` run with PyTorch's intra-op pool at ``threads``."""
    def run():
        with torch_threads(torch, threads):
            return fn()
    return run


def _torch_turns(turns, torch, step, whole: bool = False, pools=(2, 1)):
    """PyTorch eager with its intra-op pool at 2 threads and at 1 (the better one is the reference)."""
    for threads in pools:
        label = f"torch eager ({threads} thread{'s' if threads > 1 else ''})"
        (turns.whole if whole else turns.per_call)(label, _in_threads(torch, threads, step))


def _whole_loop_references(turns, finals, jax_run, torch_loop, pools=(2, 1)) -> None:
    """A whole-loop workload's references (W6-W9): ``jax_run()`` and, with PyTorch installed,
    ``torch_loop(torch)`` (the loop's final tensor), each put in ``finals`` and timed in turns."""
    finals["jax.jit (functional step)"] = jax_run()
    turns.whole("jax.jit (functional step)", jax_run)
    torch = torch_module()
    if torch:
        def torch_run():
            return torch_loop(torch).detach().numpy()

        finals["torch eager"] = torch_run()
        _torch_turns(turns, torch, torch_run, whole=True, pools=pools)
    codegen.finish_compiles()


# ------------------------------------------------------------------------------- W1


def w1_seed():
    rng = np.random.default_rng(0)
    X, Y = np.ones(5, np.float32), np.zeros(3, np.float32)
    W, B = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    results, turns = {}, Turns("W1 seed")

    x, y = symgrad.tensor(X), symgrad.tensor(Y)
    w, b = symgrad.tensor(W, requires_grad=True), symgrad.tensor(B, requires_grad=True)

    def symgrad_step():
        w.grad = b.grad = None
        loss = SF.binary_cross_entropy_with_logits(symgrad.matmul(x, w) + b, y)
        loss.backward()
        ready(b.grad)
        return loss

    loss = symgrad_step()
    results["symgrad torch-style"] = (loss.item(), w.grad.numpy(), b.grad.numpy())
    turns.per_call("symgrad torch-style", symgrad_step)

    def loss_fn(w, b):
        return SF.binary_cross_entropy_with_logits(symgrad.matmul(x, w) + b, y)

    compiled = symgrad.value_and_grad(loss_fn, argnums=(0, 1))
    Wj, Bj = jnp.asarray(W), jnp.asarray(B)
    value, grads = compiled(Wj, Bj)
    results["symgrad value_and_grad"] = (value, *grads)
    turns.per_call("symgrad value_and_grad", lambda: jax.block_until_ready(compiled(Wj, Bj)))

    def jax_loss(w, b):
        z = X @ w + b
        return jnp.mean(jax.nn.softplus(z) - z * Y)

    jitted = jax.jit(jax.value_and_grad(jax_loss, argnums=(0, 1)))
    value, grads = jitted(Wj, Bj)
    results["jax.jit"] = (value, *grads)
    turns.per_call("jax.jit", lambda: jax.block_until_ready(jitted(Wj, Bj)))

    torch = torch_module()
    if torch:
        tx, ty = torch.tensor(X), torch.tensor(Y)
        tw, tb = torch.tensor(W, requires_grad=True), torch.tensor(B, requires_grad=True)

        def torch_step():
            tw.grad = tb.grad = None
            loss = torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(tx, tw) + tb, ty)
            loss.backward()
            return loss

        loss = torch_step()
        results["torch eager"] = (loss.item(), tw.grad.numpy(), tb.grad.numpy())
        _torch_turns(turns, torch, torch_step)

    pytensor, pt = pytensor_modules()
    if pytensor:
        pw, pb = pt.matrix("w"), pt.vector("b")
        z = pt.dot(X, pw) + pb
        loss = pt.mean(pt.softplus(z) - z * Y)
        for mode, label in ((None, "pytensor"), ("JAX", "pytensor (JAX mode)")):
            with keeping_x64():
                fn = pytensor.function([pw, pb], [loss, *pytensor.grad(loss, [pw, pb])], mode=mode)
            results[label] = fn(W, B)
            turns.per_call(label, lambda fn=fn: jax.block_until_ready(fn(W, B)))  # JAX mode is asynchronous

    def numpy_step():
        z = X @ W + B
        s = 1 / (1 + np.exp(-z))
        gz = (s - Y) / 3
        return np.mean(np.logaddexp(z, 0) - z * Y), np.outer(X, gz), gz

    results["numpy (by hand)"] = numpy_step()
    turns.per_call("numpy (by hand)", numpy_step)
    _agree("W1", results)
    return turns.measure()


# ------------------------------------------------------------------------------- W2

SIZES = (784, 512, 512, 10)
BATCH = 128


def w2_data():
    """W2's batch, labels and initial parameters (w1, b1, w2, b2, w3, b3), the same every run."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    labels = rng.integers(0, SIZES[-1], BATCH)
    params = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        params += [(rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32),
                   np.zeros(n_out, np.float32)]
    return X, labels, params


def w2_mlp():
    X, labels, params = w2_data()
    results, turns = {}, Turns("W2 mlp")

    x, t = symgrad.tensor(X), symgrad.tensor(labels)

    def sym_forward(*ps):
        h = x
        for i in range(0, 6, 2):
            h = h @ ps[i] + ps[i + 1]
            if i < 4:
                h = SF.relu(h)
        return SF.cross_entropy(h, t)

    leaves = [symgrad.tensor(p, requires_grad=True) for p in params]

    def symgrad_step():
        for p in leaves:
            p.grad = None
        loss = sym_forward(*leaves)
        loss.backward()
        ready(leaves[0].grad)
        return loss

    loss = symgrad_step()
    results["symgrad torch-style"] = (loss.item(), *[p.grad.numpy() for p in leaves])
    turns.per_call("symgrad torch-style", symgrad_step)

    compiled = symgrad.value_and_grad(sym_forward, argnums=tuple(range(6)))
    pj = [jnp.asarray(p) for p in params]
    value, grads = compiled(*pj)
    results["symgrad value_and_grad"] = (value, *grads)
    turns.per_call("symgrad value_and_grad", lambda: jax.block_until_ready(compiled(*pj)))

    def jax_loss(*ps):
        h = X
        for i in range(0, 6, 2):
            h = h @ ps[i] + ps[i + 1]
            if i < 4:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    jitted = jax.jit(jax.value_and_grad(jax_loss, argnums=tuple(range(6))))
    value, grads = jitted(*pj)
    results["jax.jit"] = (value, *grads)
    turns.per_call("jax.jit", lambda: jax.block_until_ready(jitted(*pj)))

    torch = torch_module()
    if torch:
        tx, tt = torch.tensor(X), torch.tensor(labels)
        tps = [torch.tensor(p, requires_grad=True) for p in params]

        def torch_step():
            for p in tps:
                p.grad = None
            h = tx
            for i in range(0, 6, 2):
                h = h @ tps[i] + tps[i + 1]
                if i < 4:
                    h = torch.relu(h)
            loss = torch.nn.functional.cross_entropy(h, tt)
            loss.backward()
            return loss

        loss = torch_step()
        results["torch eager"] = (loss.item(), *[p.grad.numpy() for p in tps])
        _torch_turns(turns, torch, torch_step)

    pytensor, pt = pytensor_modules()
    if pytensor:
        ps = [pt.matrix(f"w{i}") if i % 2 == 0 else pt.vector(f"b{i}") for i in range(6)]
        h = pt.as_tensor_variable(X)
        for i in range(0, 6, 2):
            h = pt.dot(h, ps[i]) + ps[i + 1]
            if i < 4:
                h = pt.maximum(h, 0)
        logp = pt.special.log_softmax(h, axis=1)
        loss = -pt.mean(logp[pt.arange(BATCH), labels])
        for mode, label in ((None, "pytensor"), ("JAX", "pytensor (JAX mode)")):
            with keeping_x64():
                fn = pytensor.function(ps, [loss, *pytensor.grad(loss, ps)], mode=mode)
            results[label] = fn(*params)
            turns.per_call(label, lambda fn=fn: jax.block_until_ready(fn(*params)))  # JAX mode is asynchronous
    _agree("W2", results)
    return turns.measure()


# ------------------------------------------------------------------------------- W3

def w3_logreg(steps: int = 100, lr: float = 0.1):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((10000, 100)).astype(np.float32)
    Y = (X @ rng.standard_normal(100) > 0).astype(np.float32)
    finals, turns = {}, Turns("W3 logreg (100 steps)")

    x, y = symgrad.tensor(X), symgrad.tensor(Y)

    W0, B0 = np.zeros(100, np.float32), np.zeros(1, np.float32)

    def symgrad_run():
        return _sgd_loop(symgrad, x, y, W0, B0, steps, lr)[0].item()

    finals["symgrad torch-style"] = symgrad_run()
    turns.whole("symgrad torch-style", symgrad_run)

    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)

    @jax.jit
    def jax_step(w, b):
        def loss_fn(w, b):
            z = Xj @ w + b
            return jnp.mean(jax.nn.softplus(z) - z * Yj)
        loss, (gw, gb) = jax.value_and_grad(loss_fn, argnums=(0, 1))(w, b)
        return w - lr * gw, b - lr * gb, loss

    def jax_run():
        w, b = jnp.zeros(100, jnp.float32), jnp.zeros(1, jnp.float32)
        for _ in range(steps):
            w, b, loss = jax_step(w, b)
        return float(loss)

    finals["jax.jit"] = jax_run()
    turns.whole("jax.jit", jax_run)

    torch = torch_module()
    if torch:
        tx, ty = torch.tensor(X), torch.tensor(Y)

        def torch_run():
            return _sgd_loop(torch, tx, ty, W0, B0, steps, lr)[0].item()

        finals["torch eager"] = torch_run()
        _torch_turns(turns, torch, torch_run, whole=True)

    pytensor, pt = pytensor_modules()
    if pytensor:
        for mode, label in ((None, "pytensor"), ("JAX", "pytensor (JAX mode)")):
            w = pytensor.shared(np.zeros(100, np.float32), name="w")
            b = pytensor.shared(np.zeros(1, np.float32), name="b", shape=(1,))
            z = pt.dot(X, w) + b
            loss = pt.mean(pt.softplus(z) - z * Y)
            gw, gb = pytensor.grad(loss, [w, b])
            with keeping_x64():
                step = pytensor.function([], loss, updates=[(w, w - lr * gw), (b, b - lr * gb)], mode=mode)

            def pytensor_run(step=step, w=w, b=b):
                w.set_value(np.zeros(100, np.float32))
                b.set_value(np.zeros(1, np.float32))
                for _ in range(steps):
                    loss = step()
                return float(loss)

            finals[label] = pytensor_run()
            turns.whole(label, pytensor_run)

    def numpy_run():
        w, b = np.zeros(100, np.float32), np.zeros(1, np.float32)
        for _ in range(steps):
            z = X @ w + b
            loss = np.mean(np.logaddexp(z, 0) - z * Y)
            gz = (1 / (1 + np.exp(-z)) - Y) / len(Y)
            w, b = w - lr * (X.T @ gz), b - lr * gz.sum(keepdims=True)
        return float(loss)

    finals["numpy (by hand)"] = numpy_run()
    turns.whole("numpy (by hand)", numpy_run)
    _agree("W3 final loss", {k: (v,) for k, v in finals.items()})
    return turns.measure()


# ------------------------------------------------------------------------------- W4

FIRST_CALLS = 3  # a first call is one shot on a shared machine: the median of three, each from cold caches


def _symgrad_first_calls(call):
    """Median seconds of symgrad's first call, and the median of each part (SymPy, emit, XLA)
    and the program's size; every cache emptied first (codegen's programs, SymPy's own cache)."""
    runs = []
    for _ in range(FIRST_CALLS):
        codegen.cache.clear()
        codegen.stats.reset()
        sympy.core.cache.clear_cache()
        stats = codegen.stats
        runs.append((once(call), stats.sympy_seconds, stats.emit_seconds, stats.xla_seconds,
                     stats.ir_nodes[-1], stats.source_lines[-1]))
    return tuple(float(np.median(column)) if isinstance(column[0], float) else column[0]
                 for column in zip(*runs))


def _jax_first_calls(make):
    """Median seconds of the first call of a freshly jitted function, JAX's caches emptied first."""
    def first():
        jax.clear_caches()
        jitted = make()
        return once(lambda: jax.block_until_ready(jitted()))
    return float(np.median([first() for _ in range(FIRST_CALLS)]))


def w4_chain(depths=(10, 100, 1000)):
    rows, details = [], []
    H = np.linspace(-1, 1, 1000, dtype=np.float32)
    torch = torch_module()
    for depth in depths:
        name = f"W4 chain D={depth}"

        def symgrad_call(h=symgrad.tensor(H, requires_grad=True)):
            h.grad = None
            x = h
            for _ in range(depth):
                x = symgrad.sin(x) * x + 0.5
            x.sum().backward()
            return ready(h.grad)

        def jax_loss(h):
            for _ in range(depth):
                h = jnp.sin(h) * h + 0.5
            return jnp.sum(h)

        Hj = jnp.asarray(H)
        first, *parts = _symgrad_first_calls(symgrad_call)
        details.append((depth, first, *parts))
        rows.append((name, "symgrad torch-style, first call", first))
        rows.append((name, "jax.jit, first call",  # before any warm-up: this empties JAX's caches
                     _jax_first_calls(lambda: functools.partial(jax.jit(jax.value_and_grad(jax_loss)), Hj))))
        ours = np.asarray(symgrad_call())
        for _ in range(unrolled.HOT_AFTER):  # steady state: the straight-line program a hot loop earns,
            symgrad_call()                   # compiled in the background, ready before timing starts
        codegen.finish_compiles()
        turns = Turns(name)
        turns.per_call("symgrad torch-style", symgrad_call, warmup=1)
        jitted = jax.jit(jax.value_and_grad(jax_loss))
        np.testing.assert_allclose(ours, np.asarray(jitted(Hj)[1]), **F32)
        turns.per_call("jax.jit", lambda: jax.block_until_ready(jitted(Hj)), warmup=1)
        if torch:
            th = torch.tensor(H, requires_grad=True)

            def torch_call():
                th.grad = None
                x = th
                for _ in range(depth):
                    x = torch.sin(x) * x + 0.5
                x.sum().backward()
                return th.grad

            np.testing.assert_allclose(ours, torch_call().numpy(), **F32)
            _torch_turns(turns, torch, torch_call)
        rows += turns.measure()
    return rows, details


# ------------------------------------------------------------------------------- W5

def w5_loop(iterations: int = 1000, lr: float = 0.1, optimizer: bool = False):
    rng = np.random.default_rng(3)
    X, Y = np.ones(5, np.float32), np.zeros(3, np.float32)
    W0, B0 = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    finals = {}
    turns = Turns(f"W5 loop (per iteration, {iterations} iterations{', torch.optim.SGD' if optimizer else ''})")

    x, y = symgrad.tensor(X), symgrad.tensor(Y)

    def symgrad_run():
        return np.asarray(ready(_sgd_loop(symgrad, x, y, W0, B0, iterations, lr, optimizer)[1]))

    finals["symgrad torch-style"] = symgrad_run()
    turns.whole("symgrad torch-style", symgrad_run)

    @jax.jit
    def jax_step(w, b):
        def loss_fn(w, b):
            z = X @ w + b
            return jnp.mean(jax.nn.softplus(z) - z * Y)
        gw, gb = jax.grad(loss_fn, argnums=(0, 1))(w, b)
        return w - lr * gw, b - lr * gb

    def jax_run():
        w, b = jnp.asarray(W0), jnp.asarray(B0)
        for _ in range(iterations):
            w, b = jax_step(w, b)
        return np.asarray(jax.block_until_ready(w))

    finals["jax.jit (functional step)"] = jax_run()
    turns.whole("jax.jit (functional step)", jax_run)

    torch = torch_module()
    if torch:
        tx, ty = torch.tensor(X), torch.tensor(Y)

        def torch_run():
            return _sgd_loop(torch, tx, ty, W0, B0, iterations, lr, optimizer)[1].detach().numpy()

        finals["torch eager"] = torch_run()
        _torch_turns(turns, torch, torch_run, whole=True)

    pytensor, pt = pytensor_modules()
    if pytensor:
        for mode, label in ((None, "pytensor"), ("JAX", "pytensor (JAX mode)")):
            w, b = pytensor.shared(W0.copy(), name="w"), pytensor.shared(B0.copy(), name="b")
            z = pt.dot(X, w) + b
            loss = pt.mean(pt.softplus(z) - z * Y)
            gw, gb = pytensor.grad(loss, [w, b])
            with keeping_x64():
                step = pytensor.function([], [], updates=[(w, w - lr * gw), (b, b - lr * gb)], mode=mode)

            def pytensor_run(step=step, w=w, b=b):
                w.set_value(W0.copy())
                b.set_value(B0.copy())
                for _ in range(iterations):
                    step()
                return w.get_value()

            finals[label] = pytensor_run()
            turns.whole(label, pytensor_run)
    codegen.finish_compiles()  # symgrad's fused chains and donating programs, compiled while the warm-up ran
    rows = turns.measure(scale=1 / iterations)
    _agree("W5 final parameters", {k: (v,) for k, v in finals.items()})
    return rows


# ------------------------------------------------------------------------------- W6


def _trained(T, model, weights, optimizer, loss, X, Y, steps: int):
    """``model`` from ``weights`` (PyTorch's seeded init) trained as PyTorch's tutorials write it,
    ``zero_grad()``, ``loss(model(x), y).backward()``, ``step()``; its first layer's final weight."""
    model.load_state_dict({k: T.tensor(v) for k, v in weights.items()})
    optimizer = optimizer(model.parameters())
    x, y = T.tensor(X), T.tensor(Y)
    for _ in range(steps):
        optimizer.zero_grad()
        loss(model(x), y).backward()
        optimizer.step()
    return model[0].weight


def _mlp_loop(T, X, Y, weights, steps: int, lr: float):
    """A 784-512-512-10 MLP written with nn.Sequential, cross_entropy and optim.Adam."""
    model = T.nn.Sequential(T.nn.Linear(784, 512), T.nn.ReLU(), T.nn.Linear(512, 512), T.nn.ReLU(),
                            T.nn.Linear(512, 10))
    return _trained(T, model, weights, lambda p: T.optim.Adam(p, lr=lr), T.nn.functional.cross_entropy, X, Y, steps)


def w6_mlp(steps: int = 20, lr: float = 1e-3):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((128, 784)).astype(np.float32)
    Y = rng.integers(0, 10, 128)
    symgrad.manual_seed(0)
    init = symgrad.nn.Sequential(symgrad.nn.Linear(784, 512), symgrad.nn.ReLU(), symgrad.nn.Linear(512, 512),
                                 symgrad.nn.ReLU(), symgrad.nn.Linear(512, 10))
    weights = {k: v.numpy() for k, v in init.state_dict().items()}
    finals, turns = {}, Turns(f"W6 MLP 784-512-512-10, batch 128, Adam (per step, {steps} steps)")

    def symgrad_run():
        return np.asarray(ready(_mlp_loop(symgrad, X, Y, weights, steps, lr)))

    finals["symgrad torch-style"] = symgrad_run()
    turns.whole("symgrad torch-style", symgrad_run)

    names = list(weights)

    @jax.jit
    def jax_step(params, m, v, t):
        def loss_fn(params):
            h = X
            for i in range(0, len(params), 2):
                h = h @ params[i].T + params[i + 1]
                if i + 2 < len(params):
                    h = jax.nn.relu(h)
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(h), Y[:, None], axis=1))
        grads = jax.grad(loss_fn)(params)
        m = [0.9 * mi + 0.1 * g for mi, g in zip(m, grads)]
        v = [0.999 * vi + 0.001 * g * g for vi, g in zip(v, grads)]
        step_size = lr / (1 - 0.9 ** t)
        root = jnp.sqrt(1 - 0.999 ** t)
        params = [p - step_size * mi / (jnp.sqrt(vi) / root + 1e-8) for p, mi, vi in zip(params, m, v)]
        return params, m, v

    def jax_run():
        params = [jnp.asarray(weights[k]) for k in names]
        m, v = [jnp.zeros_like(p) for p in params], [jnp.zeros_like(p) for p in params]
        for t in range(1, steps + 1):
            params, m, v = jax_step(params, m, v, t)
        return np.asarray(jax.block_until_ready(params[0]))

    _whole_loop_references(turns, finals, jax_run, lambda torch: _mlp_loop(torch, X, Y, weights, steps, lr))
    rows = turns.measure(scale=1 / steps)
    # Adam divides by sqrt(v): where a gradient is a rounding error, its step is still about lr
    _agree("W6 final first-layer weights", {k: (v,) for k, v in finals.items()}, dict(rtol=2e-4, atol=steps * lr / 4))
    return rows


# ------------------------------------------------------------------------------- W7

def _batch_loop(T, X, Y, weights, epochs: int, batch: int, lr: float):
    """The nn tutorial's loop: ``nn.Linear`` and ``cross_entropy`` on the next ``batch`` rows each
    step (``x[i:i + batch]``, the last batch of an epoch shorter), the update by hand under
    ``no_grad``; the final weight."""
    model = T.nn.Linear(X.shape[1], 10)
    model.load_state_dict({k: T.tensor(v) for k, v in weights.items()})
    x, y = T.tensor(X), T.tensor(Y)
    for _ in range(epochs):
        for i in range(0, len(X), batch):
            loss = T.nn.functional.cross_entropy(model(x[i:i + batch]), y[i:i + batch])
            loss.backward()
            with T.no_grad():
                for p in model.parameters():
                    p -= p.grad * lr
                model.zero_grad()
    return model.weight


def w7_batches(rows: int = 5000, batch: int = 64, epochs: int = 2, lr: float = 0.5):
    rng = np.random.default_rng(7)
    X = (rng.standard_normal((rows, 784)) * 0.3).astype(np.float32)
    Y = rng.integers(0, 10, rows)
    symgrad.manual_seed(0)
    weights = {k: v.numpy() for k, v in symgrad.nn.Linear(784, 10).state_dict().items()}
    steps = epochs * -(-rows // batch)
    name = f"W7 nn tutorial loop, 784-10, batches of {batch} sliced from {rows} rows (per step, {steps} steps)"
    finals, turns = {}, Turns(name)

    def symgrad_run():
        return np.asarray(ready(_batch_loop(symgrad, X, Y, weights, epochs, batch, lr)))

    def cold():  # the first epoch from empty caches: what a tutorial's first run waits for
        codegen.cache.clear()
        engine._number_values.clear()
        sympy.core.cache.clear_cache()
        return once(lambda: ready(_batch_loop(symgrad, X, Y, weights, 1, batch, lr)))

    first = float(np.median([cold() for _ in range(FIRST_CALLS)]))
    finals["symgrad torch-style"] = symgrad_run()
    turns.whole("symgrad torch-style", symgrad_run)

    @jax.jit
    def jax_step(w, b, xb, yb):
        def loss_fn(w, b):
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(xb @ w.T + b), yb[:, None], axis=1))
        gw, gb = jax.grad(loss_fn, argnums=(0, 1))(w, b)
        return w - lr * gw, b - lr * gb

    def jax_run(epochs=epochs):
        w, b = jnp.asarray(weights["weight"]), jnp.asarray(weights["bias"])
        for _ in range(epochs):
            for i in range(0, rows, batch):
                w, b = jax_step(w, b, X[i:i + batch], Y[i:i + batch])
        return np.asarray(jax.block_until_ready(w))

    def jax_cold():
        jax.clear_caches()
        return once(lambda: jax_run(1))

    _whole_loop_references(turns, finals, jax_run, lambda torch: _batch_loop(torch, X, Y, weights, epochs, batch, lr))
    _agree("W7 final weights", {k: (v,) for k, v in finals.items()})
    rows_out = turns.measure(scale=1 / steps)
    rows_out.append((name, "symgrad torch-style, first call (the first epoch, per run)", first))
    rows_out.append((name, "jax.jit, first call", float(np.median([jax_cold() for _ in range(FIRST_CALLS)]))))
    return rows_out


# ------------------------------------------------------------------------------- W8

def _deep(T, layers: int):
    """``layers`` x (Linear 8-8, Tanh), then Linear 8-1: many small parameters."""
    modules = []
    for _ in range(layers):
        modules += [T.nn.Linear(8, 8), T.nn.Tanh()]
    return T.nn.Sequential(*modules, T.nn.Linear(8, 1))


def _deep_loop(T, X, Y, weights, layers: int, steps: int, lr: float):
    """The deep narrow model trained with ``optim.SGD`` and ``mse_loss``."""
    return _trained(T, _deep(T, layers), weights, lambda p: T.optim.SGD(p, lr=lr), T.nn.functional.mse_loss, X, Y,
                    steps)


def w8_deep(layers: int = 20, steps: int = 200, lr: float = 0.01):
    """Dispatch-bound with many parameters (42 tensors of at most 64 numbers): what a step costs
    per parameter (the backward's bookkeeping, each update and write), not the arithmetic."""
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((16, 1)).astype(np.float32)
    symgrad.manual_seed(0)
    weights = {k: v.numpy() for k, v in _deep(symgrad, layers).state_dict().items()}
    name = f"W8 deep MLP, {layers} x (Linear 8-8, Tanh), optim.SGD, batch 16 (per step, {steps} steps)"
    finals, turns = {}, Turns(name)

    def symgrad_run():
        return np.asarray(ready(_deep_loop(symgrad, X, Y, weights, layers, steps, lr)))

    finals["symgrad torch-style"] = symgrad_run()
    turns.whole("symgrad torch-style", symgrad_run)

    names = list(weights)

    @jax.jit
    def jax_step(params):
        def loss_fn(params):
            h = X
            for i in range(0, len(params), 2):
                h = h @ params[i].T + params[i + 1]
                if i + 2 < len(params):
                    h = jnp.tanh(h)
            return jnp.mean((h - Y) ** 2)
        return [p - lr * g for p, g in zip(params, jax.grad(loss_fn)(params))]

    def jax_run():
        params = [jnp.asarray(weights[k]) for k in names]
        for _ in range(steps):
            params = jax_step(params)
        return np.asarray(jax.block_until_ready(params[0]))

    # PyTorch with one thread only: with two, each of its tiny ops waits on the pool (~60 ms a step here)
    _whole_loop_references(turns, finals, jax_run, lambda torch: _deep_loop(torch, X, Y, weights, layers, steps, lr),
                           pools=(1,))
    _agree("W8 final first-layer weights", {k: (v,) for k, v in finals.items()})
    return turns.measure(scale=1 / steps)



# ------------------------------------------------------------------------------- W9

def _counting_loop(T, X, Y, weights, steps: int, lr: float):
    """A 4-16-3 MLP trained with ``optim.SGD`` and ``cross_entropy``, counting its correct
    predictions every step before the backward, as the tutorials do
    (``correct += (out.argmax(1) == y).sum().item()``): (the count, the first layer's weight)."""
    model = T.nn.Sequential(T.nn.Linear(4, 16), T.nn.ReLU(), T.nn.Linear(16, 3))
    model.load_state_dict({k: T.tensor(v) for k, v in weights.items()})
    optimizer = T.optim.SGD(model.parameters(), lr=lr)
    x, y, correct = T.tensor(X), T.tensor(Y), 0
    for _ in range(steps):
        optimizer.zero_grad()
        out = model(x)
        correct += (out.argmax(1) == y).sum().item()
        T.nn.functional.cross_entropy(out, y).backward()
        optimizer.step()
    return correct, model[0].weight


def w9_counting(steps: int = 500, lr: float = 0.05):
    """A step that reads a value before its backward, every step: the value is computed aside from
    what the replayed step saw (session 23), and every step waits for it, as PyTorch's does."""
    rng = np.random.default_rng(9)
    X, Y = rng.standard_normal((64, 4)).astype(np.float32), rng.integers(0, 3, 64)
    symgrad.manual_seed(0)
    weights = {k: v.numpy() for k, v in symgrad.nn.Sequential(
        symgrad.nn.Linear(4, 16), symgrad.nn.ReLU(), symgrad.nn.Linear(16, 3)).state_dict().items()}
    name = f"W9 a count read before every backward, 4-16-3 MLP, optim.SGD, batch 64 (per step, {steps} steps)"
    finals, counts, turns = {}, {}, Turns(name)

    def symgrad_run():
        counts["symgrad torch-style"], w = _counting_loop(symgrad, X, Y, weights, steps, lr)
        return np.asarray(ready(w))

    finals["symgrad torch-style"] = symgrad_run()
    turns.whole("symgrad torch-style", symgrad_run)

    names = list(weights)

    @jax.jit
    def jax_step(params):
        def loss_fn(params):
            h = jnp.maximum(X @ params[0].T + params[1], 0)
            out = h @ params[2].T + params[3]
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(out), Y[:, None], 1)), out
        grads, out = jax.grad(loss_fn, has_aux=True)(params)
        return [p - lr * g for p, g in zip(params, grads)], jnp.sum(jnp.argmax(out, 1) == Y)

    def jax_run():
        params, correct = [jnp.asarray(weights[k]) for k in names], 0
        for _ in range(steps):
            params, count = jax_step(params)
            correct += count.item()
        counts["jax.jit (functional step)"] = correct
        return np.asarray(params[0])

    def torch_loop(torch):
        counts["torch eager"], w = _counting_loop(torch, X, Y, weights, steps, lr)
        return w

    _whole_loop_references(turns, finals, jax_run, torch_loop, pools=(1,))
    _agree("W9 final first-layer weights", {k: (v,) for k, v in finals.items()})
    assert len(set(counts.values())) == 1, f"W9: the counts differ: {counts}"
    return turns.measure(scale=1 / steps)
