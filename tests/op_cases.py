"""Inputs for the generic op tests, drawn from each op's registered domain."""
from __future__ import annotations

import numpy as np

import symgrad
from symgrad.ops.registry import REGISTRY

LABEL_CLASSES = 5


def draw(domain: str, shape, rng, at_kinks: bool = False) -> np.ndarray:
    """Values for one input: float64 unless the domain is integer labels."""
    if domain == "label":
        return rng.integers(0, LABEL_CLASSES, size=shape)
    if domain == "bool":
        return rng.random(size=shape) > 0.5
    if domain == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    if domain == "nonzero":
        return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 2.0, size=shape)
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
