"""Inputs for the generic op tests, drawn from each op's registered domain."""
from __future__ import annotations

import numpy as np

import symgrad
from symgrad.ops.registry import REGISTRY

LABEL_CLASSES = 5


def draw(domain: str, shape, rng, at_kinks: bool = False) -> np.ndarray:
    """Values for one input: float64 unless the domain is integer labels."""
    if domain in MATRIX_DOMAINS:
        return np.stack([MATRIX_DOMAINS[domain](shape[-2:], rng) for _ in np.ndindex(shape[:-2])]).reshape(shape)
    if domain == "label":
        return rng.integers(0, LABEL_CLASSES, size=shape)
    if domain == "bool":
        return rng.random(size=shape) > 0.5
    if domain == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    if domain == "nonzero":
        return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 2.0, size=shape)
    if domain == "above_one":
        return rng.uniform(1.1, 3.0, size=shape)
    if domain == "unit":
        return rng.uniform(0.1, 0.9, size=shape)
    if domain == "kinked" and at_kinks:
        return rng.choice([-1.5, -0.5, 0.0, 0.5, 1.5], size=shape)
    if domain == "ties" and at_kinks:
        return rng.choice([0.0, 1.0, 2.0], size=shape)
    values = rng.standard_normal(size=shape)
    if domain in ("kinked", "ties"):  # keep finite differences away from the kink
        values = np.where(np.abs(values) < 0.1, values + 0.3, values)
    return values


def _orthonormal(m, k, rng):
    return np.linalg.qr(rng.standard_normal((m, k)))[0]


def _invertible(shape, rng):
    """Diagonally dominant, the diagonal's signs random (so is the determinant's)."""
    a = rng.standard_normal(shape)
    dominance = np.abs(a).sum(-1) + 1.0
    return a + np.diag(rng.choice([-1.0, 1.0], size=shape[-1]) * dominance)


def _spd(shape, rng):
    """Q diag(L) Q^T, exactly symmetric, its eigenvalues at least 0.5 apart (eigenvectors stay smooth)."""
    n = shape[-1]
    q = _orthonormal(n, n, rng)
    a = (q * (1.0 + np.arange(n) + rng.uniform(0, 0.5, size=n))) @ q.T
    return (a + a.T) / 2


def _spread(shape, rng):
    """U diag(S) V^T with singular values at least 0.5 apart: well-conditioned, smooth singular vectors."""
    m, n = shape
    k = min(m, n)
    s = 1.0 + np.arange(k)[::-1] + rng.uniform(0, 0.5, size=k)
    return (_orthonormal(m, k, rng) * s) @ _orthonormal(n, k, rng).T


# Matrix inputs a factorization needs to be well-conditioned (the last two axes; batches drawn one by one).
MATRIX_DOMAINS = {"invertible": _invertible, "spd": _spd, "spread": _spread}


def invariant(out, example):
    """What the generic tests compare and differentiate: ``out``, or ``out * out`` where the op's
    vectors are defined up to sign (eigenvectors, singular vectors, QR's), as PyTorch's own gradcheck
    of eigh compares a function the sign cannot change."""
    return out * out if example.up_to_sign else out


def cases():
    """(id, op, example) for every registered op and each of its examples."""
    for name, op in sorted(REGISTRY.items()):
        for i, example in enumerate(op.examples):
            yield pytest_id(name, i), op, example


def pytest_id(name, i):
    return f"{name}-{i}"


def make_inputs(op, example, rng, at_kinks=False):
    """NumPy arrays (or Python numbers) per op argument."""
    values = []
    shapes = iter(example.shapes)
    for position, domain in enumerate(op.domain or ("real",) * len(example.shapes)):
        shape = next(shapes)
        if position in example.scalars:
            values.append(example.scalars[position])
        else:
            values.append(draw(domain, shape, rng, at_kinks))
    return values


def symgrad_args(values, dtype=symgrad.float64):
    return [v if np.isscalar(v) else symgrad.tensor(v, dtype=None if v.dtype.kind in "ib" else dtype,
                                                   requires_grad=v.dtype.kind == "f")
            for v in values]
