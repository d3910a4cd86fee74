"""Compiled value-and-gradient functions: same numbers as jax.grad, traced once per signature."""
import jax
import jax.numpy as jnp
import numpy as np

import codegen
import symgrad as torch
import symgrad.nn.functional as F

X = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)


def mlp_loss(w1, b1, w2):
    hidden = F.relu(torch.tensor(X) @ w1 + b1)
    return (torch.tanh(hidden @ w2) ** 2).mean()


def jax_mlp_loss(w1, b1, w2):
    hidden = jax.nn.relu(X @ w1 + b1)
    return jnp.mean(jnp.tanh(hidden @ w2) ** 2)


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal(6).astype(np.float32),
            rng.standard_normal((6, 2)).astype(np.float32))


def test_value_and_grad_matches_jax():
    f = torch.value_and_grad(mlp_loss, argnums=(0, 1, 2))
    params = _params()
    value, grads = f(*params)
    expected_value, expected = jax.value_and_grad(jax_mlp_loss, argnums=(0, 1, 2))(*params)
    np.testing.assert_allclose(value, expected_value, rtol=1e-6)
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_traced_once_per_signature():
    traces = []

    def counted(*params):
        traces.append(1)
        return mlp_loss(*params)

    f = torch.value_and_grad(counted, argnums=0)
    f(*_params(0))
    compiles = codegen.stats.compiles
    for seed in range(1, 6):
        value, grad = f(*_params(seed))
        assert grad.shape == (5, 6)
    assert codegen.stats.compiles == compiles and len(traces) == 1


def test_no_grad_runs_forward_only_and_detached_gets_none():
    f = torch.value_and_grad(mlp_loss, argnums=(0, 1, 2))
    params = _params()
    with torch.no_grad():
        value, grads = f(*params)
    assert grads is None
    np.testing.assert_allclose(value, jax_mlp_loss(*params), rtol=1e-6)
    w1 = torch.tensor(params[0], requires_grad=True)
    value, (g1, g2, g3) = f(w1, torch.tensor(params[1]).detach(), torch.tensor(params[2], requires_grad=True))
    assert g2 is None and isinstance(g1, torch.Tensor) and g1.requires_grad  # w1's chain goes on through g1
    np.testing.assert_allclose(g1.detach().numpy(), jax.grad(jax_mlp_loss)(*params), rtol=1e-5, atol=1e-6)


def test_composes_with_jax_vmap_and_jit():
    f = torch.grad(mlp_loss, argnums=2)
    params = _params()
    batched = jax.vmap(f, in_axes=(None, None, 0))(params[0], params[1], np.stack([params[2], 2 * params[2]]))
    np.testing.assert_allclose(batched[1], jax.grad(jax_mlp_loss, argnums=2)(params[0], params[1], 2 * params[2]),
                               rtol=1e-5, atol=1e-6)


def test_source_is_the_emitted_program():
    f = torch.value_and_grad(mlp_loss, argnums=(0, 1, 2))
    source = f.source(*_params())
    assert source.startswith("import jax") and "def value_and_grad(" in source and "jax.nn.relu" in source


def test_a_value_first_computed_inside_a_trace_keeps_an_array():
    """A tensor captured by a function being traced, computed there for the first time (an inner
    compiled call reads it), gets an array: it belongs to no trace and prints afterwards."""
    captured = torch.tensor(np.ones(3, np.float32)) * 2.0  # not computed yet
    inner = torch.value_and_grad(lambda t: (t * t).sum())

    def outer(v):
        value, _ = inner(captured)
        return (v * value).sum()

    value, grad = torch.value_and_grad(outer)(np.ones(3, np.float32))
    np.testing.assert_allclose(float(value), 36.0)
    np.testing.assert_allclose(np.asarray(grad), [12.0, 12.0, 12.0])
    assert not isinstance(captured._node.value, jax.core.Tracer)
    np.testing.assert_allclose(captured.numpy(), [2.0, 2.0, 2.0])
