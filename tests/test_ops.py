"""Every registered op, generically: value and gradient against finite differences,
``jax.grad`` of the op's ``jax.numpy`` reference, and PyTorch.

Adding an op to the registry adds it here; no test code is written per op.
"""
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import symgrad
from op_cases import cases, invariant, make_inputs, symgrad_args
from symgrad.tensor import apply

CASES = list(cases())


def _run_symgrad(op, example, values, cotangent):
    args = symgrad_args(values)
    out = invariant(apply(op, *args, attrs=example.attrs), example)
    value = np.array(out.detach())
    if out.requires_grad:
        out.backward(symgrad.tensor(cotangent, dtype=out.dtype))
    grads = [a.grad.numpy() if isinstance(a, symgrad.Tensor) and a.grad is not None else None for a in args]
    return out, value, grads


def _differentiable(values):
    return [i for i, v in enumerate(values) if not np.isscalar(v) and v.dtype.kind == "f"]


def _reference_loss(op, example, values, cotangent):
    positions = _differentiable(values)

    def loss(*diff_values):
        full = list(values)
        for p, v in zip(positions, diff_values):
            full[p] = v
        return jnp.sum(invariant(op.reference(*full, *example.attrs), example) * cotangent)

    return loss, positions


def _finite_differences(loss, arrays, eps=1e-6):
    grads = []
    for k, x in enumerate(arrays):
        g = np.zeros_like(x)
        for index in np.ndindex(x.shape):
            shifted = [a.copy() for a in arrays]
            shifted[k][index] += eps
            up = float(loss(*shifted))
            shifted[k][index] -= 2 * eps
            down = float(loss(*shifted))
            g[index] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("name,op,example", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_finite_differences_and_jax(name, op, example):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    values = make_inputs(op, example, rng)
    reference_value = np.asarray(invariant(op.reference(*values, *example.attrs), example))
    cotangent = rng.standard_normal(reference_value.shape)
    out, value, grads = _run_symgrad(op, example, values, cotangent)
    assert tuple(out.shape) == reference_value.shape
    np.testing.assert_allclose(value, reference_value, rtol=1e-10, atol=1e-12)
    loss, positions = _reference_loss(op, example, values, cotangent)
    if not positions or not out.dtype.is_floating_point:  # comparisons: values only
        return
    arrays = [values[p] for p in positions]
    loss = jax.jit(loss)  # one compile: eagerly, each primitive compiles and dispatches on its own
    by_jax = jax.jit(jax.grad(loss, argnums=tuple(range(len(arrays)))))(*arrays)
    by_fd = _finite_differences(loss, arrays)
    for p, g_jax, g_fd in zip(positions, by_jax, by_fd):
        np.testing.assert_allclose(grads[p], np.asarray(g_jax), rtol=1e-9, atol=1e-12, err_msg=f"{name} vs jax.grad")
        np.testing.assert_allclose(grads[p], g_fd, rtol=1e-5, atol=1e-7, err_msg=f"{name} vs finite differences")


@pytest.mark.parametrize("name,op,example", CASES, ids=[c[0] for c in CASES])
def test_value_and_gradient_match_pytorch(name, op, example, torch):
    """Including edge values (0 for relu and abs, ties for max), in float32 as users run it."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    values = make_inputs(op, example, rng, at_kinks=True)
    values = [v.astype(np.float32) if not np.isscalar(v) and v.dtype.kind == "f" else v for v in values]
    t_args = [v if np.isscalar(v) else torch.tensor(v, requires_grad=v.dtype.kind == "f") for v in values]
    t_attrs = [getattr(torch, a.name) if isinstance(a, symgrad.dtype) else a for a in example.attrs]
    t_raw = op.torch_fn(torch, *t_args, *t_attrs)
    t_out = invariant(t_raw, example)
    cotangent = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    s_args = symgrad_args(values, dtype=symgrad.float32)
    s_raw = apply(op, *s_args, attrs=example.attrs)
    s_out = invariant(s_raw, example)
    assert type(s_raw.grad_fn).__name__ == type(t_raw.grad_fn).__name__
    assert repr(s_out.dtype) == repr(t_out.dtype)
    np.testing.assert_allclose(np.array(s_out.detach()), t_out.detach().numpy(), rtol=2e-6, atol=2e-6)
    assert s_out.requires_grad == t_out.requires_grad
    if not t_out.requires_grad:  # comparisons
        return
    t_out.backward(torch.tensor(cotangent))
    s_out.backward(symgrad.tensor(cotangent, dtype=s_out.dtype))
    for s, t in zip(s_args, t_args):
        if not np.isscalar(t) and t.requires_grad:
            np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=2e-5, atol=2e-6, err_msg=name)
