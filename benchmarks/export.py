"""Exported artifacts (issue 13): a loaded artifact's call against ``jax.jit(jax.value_and_grad)``
on W1 and W2, and ``lower`` of W4's chain as its depth grows (it should grow linearly).

Rows are ``(workload, system, seconds)``: per call for W1/W2, per ``lower`` for W4.
"""
from __future__ import annotations

import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import sympy

import symgrad
import symgrad.nn.functional as SF
from benchmarks.timing import Turns, once
from benchmarks.workloads import F32, w2_data


def _against_jax(name, loss_fn, jax_loss, args):
    """The loaded artifact of ``loss_fn`` against jax.jit(jax.value_and_grad(jax_loss)), timed in turns."""
    argnums = tuple(range(len(args)))
    compiled = symgrad.value_and_grad(loss_fn, argnums=argnums)
    with tempfile.TemporaryDirectory() as directory:
        compiled.lower(*args).save(f"{directory}/artifact")
        loaded = symgrad.load(f"{directory}/artifact")
    jitted = jax.jit(jax.value_and_grad(jax_loss, argnums=argnums))
    args = [jnp.asarray(a) for a in args]
    ours, theirs = loaded(*args), jitted(*args)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **F32, err_msg=name)
    turns = Turns(name)
    turns.per_call("symgrad loaded artifact", lambda: jax.block_until_ready(loaded(*args)))
    turns.per_call("jax.jit", lambda: jax.block_until_ready(jitted(*args)))
    turns.per_call("symgrad value_and_grad (in process)", lambda: jax.block_until_ready(compiled(*args)))
    return turns.measure()


def w1_loaded():
    rng = np.random.default_rng(0)
    X, Y = np.ones(5, np.float32), np.zeros(3, np.float32)
    x, y = symgrad.tensor(X), symgrad.tensor(Y)

    def loss_fn(w, b):
        return SF.binary_cross_entropy_with_logits(symgrad.matmul(x, w) + b, y)

    def jax_loss(w, b):
        z = X @ w + b
        return jnp.mean(jax.nn.softplus(z) - z * Y)

    args = (rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32))
    return _against_jax("export W1 seed", loss_fn, jax_loss, args)


def w2_loaded():
    X, labels, params = w2_data()
    x, t = symgrad.tensor(X), symgrad.tensor(labels)

    def loss_fn(*ps):
        h = x
        for i in range(0, 6, 2):
            h = h @ ps[i] + ps[i + 1]
            h = SF.relu(h) if i < 4 else h
        return SF.cross_entropy(h, t)

    def jax_loss(*ps):
        h = X
        for i in range(0, 6, 2):
            h = h @ ps[i] + ps[i + 1]
            h = jax.nn.relu(h) if i < 4 else h
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(h, axis=1), labels[:, None], axis=1))

    return _against_jax("export W2 mlp", loss_fn, jax_loss, params)


def w4_lower(depths=(100, 1000)):
    """Seconds of ``lower`` (trace, symbolic gradient, emitted module; SymPy's cache cleared first)."""
    H = np.linspace(-1, 1, 1000, dtype=np.float32)
    rows = []
    for depth in depths:
        def chain(h):
            for _ in range(depth):
                h = symgrad.sin(h) * h + 0.5
            return h.sum()

        g = symgrad.value_and_grad(chain)

        def lower():
            sympy.core.cache.clear_cache()
            return g.lower(H)

        seconds = float(np.median([once(lower) for _ in range(3)]))
        rows.append((f"export W4 lower D={depth}", "symgrad lower", seconds))
    return rows


def export_rows():
    return w1_loaded() + w2_loaded() + w4_lower()
