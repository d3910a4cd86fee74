"""Emitted program size per op, and the constant-cotangent path (``op(...).sum().backward()``).

For every registered op and example, the backward program of ``op(...).sum()`` has at most ten
more assignments than its forward (today's worst is 10, a batched matmul with a 1-D operand), and
its gradients match ``jax.grad``: a constant cotangent reaches the op's rule as a SymPy number,
not an array, and every rule must handle that.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codegen.emit import live_assignments
from op_cases import cases, make_inputs, symgrad_args
from symgrad.tracing import BackwardPlan, Walk, forward_program
from symgrad.tensor import apply

CASES = [c for c in cases()]
MAX_EXTRA_ASSIGNMENTS = 10
# Ops whose PyTorch backward is several steps (zeros in a product, a transposed convolution, a
# normalization's three terms, a factorization's sibling outputs and spectral gaps, det's cofactors through
# the SVD at a singular matrix): their measured extra assignments, which must not grow.
BACKWARD_BUDGETS = {"prod": 15, "cumprod": 19, "convolution": 12, "convolution_bias": 16, "cross": 31, "pad": 14,
                    "conv_transpose_bias": 12, "addr": 11,  # (addr: beta and alpha scale two terms)
                    "layer_norm": 31, "group_norm": 31, "batch_norm": 32, "adaptive_avg_pool2d": 32,
                    "det": 36, "eigh": 15, "qr": 16, "svd": 23, "pinv": 20, "lstsq": 24, "lu_factor": 21,
                    "householder_product": 52,  # (a product of reflectors, each with its own terms)
                    "windows": 11}  # (Tensor.unfold: the windows' cotangents added back where they overlap)


@pytest.mark.parametrize("name,op,example", CASES, ids=[c[0] for c in CASES])
def test_backward_size_and_constant_cotangent(name, op, example):
    values = make_inputs(op, example, np.random.default_rng(7))
    args = symgrad_args(values)
    out = apply(op, *args, attrs=example.attrs)
    if not out.requires_grad:
        return
    loss = out.sum()
    walk = Walk()
    forward = len(live_assignments(forward_program(walk, (walk.add(loss._node, False),))))
    backward = len(live_assignments(BackwardPlan(loss._node, None).program()))
    assert backward - forward <= BACKWARD_BUDGETS.get(op.name, MAX_EXTRA_ASSIGNMENTS), (forward, backward)
    loss.backward()
    positions = [i for i, v in enumerate(values) if not np.isscalar(v) and v.dtype.kind == "f"]

    def reference(*diff):
        full = list(values)
        for p, v in zip(positions, diff):
            full[p] = v
        return jnp.sum(op.reference(*full, *example.attrs))

    # one compiled program: eagerly, jax.grad compiles each primitive it meets (most of this file's time)
    expected = jax.jit(jax.grad(reference, argnums=tuple(range(len(positions)))))(*[values[p] for p in positions])
    for p, e in zip(positions, expected):
        np.testing.assert_allclose(args[p].grad.numpy(), np.asarray(e), rtol=1e-9, atol=1e-12, err_msg=name)
