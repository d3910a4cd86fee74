"""A Python float operand that changes value: the same structure with another float compiles one program
that takes its floats as inputs (symgrad.engine._compiled), so an op whose form reads a number's value
keeps it baked (``Op.reads_numbers``: pow at 0.5 is sqrt, xlogy's mask).  Every op example with a float
operand runs again with other values in a row, against PyTorch: values and gradients."""
import math
import zlib

import numpy as np
import pytest

import symgrad
from op_cases import cases, invariant, make_inputs, symgrad_args
from symgrad.tensor import apply

OTHER_VALUES = (0.5, -0.5, -1.0, 0.0, -0.0, 2.0, math.inf, math.nan)
CASES = [(name, op, example, position) for name, op, example in cases()
         for position, value in example.scalars.items() if isinstance(value, float) and op.torch_fn is not None]


def _run(T, op, example, values):
    """The op's output and the gradients of its float tensors (None where PyTorch raises)."""
    if T is symgrad:
        args = symgrad_args(values, dtype=symgrad.float32)
        raw = apply(op, *args, attrs=example.attrs)
    else:
        args = [v if np.isscalar(v) else T.tensor(v, requires_grad=v.dtype.kind == "f") for v in values]
        raw = op.torch_fn(T, *args, *[getattr(T, a.name) if isinstance(a, symgrad.dtype) else a for a in example.attrs])
    out = invariant(raw, example)
    grads = []
    if out.requires_grad:
        out.sum().backward()
        grads = [a.grad.numpy() for a in args if not np.isscalar(a) and a.requires_grad]
    return [out.detach().numpy(), *grads]


@pytest.mark.parametrize("name,op,example,position", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_a_float_operand_that_changes_gives_pytorchs_numbers(name, op, example, position, torch):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    values = [_with_edges(v.astype(np.float32)) if not np.isscalar(v) and v.dtype.kind == "f" else v
              for v in make_inputs(op, example, rng)]
    for value in (example.scalars[position], *OTHER_VALUES):
        if op.name == "clamp" and math.isinf(value):
            continue  # the registry's torch_fn reads an infinite bound as None
        values[position] = value
        try:
            theirs = _run(torch, op, example, values)
        except (RuntimeError, ValueError, TypeError):
            continue  # PyTorch refuses this value (or this mix of a tensor and a number)
        _compare(_run(symgrad, op, example, values), theirs, name, value)


def _with_edges(array):
    """The array with IEEE's edge values first (a value read by the op's form shows there: sqrt(-inf))."""
    flat = array.reshape(-1).copy()
    edges = np.array([0.0, -0.0, -np.inf, np.inf, np.nan, -1.0], np.float32)[:flat.size]
    flat[:edges.size] = edges
    return flat.reshape(array.shape)


def _compare(ours, theirs, name, value):
    for s, t in zip(ours, theirs):
        np.testing.assert_allclose(s, t, rtol=2e-5, atol=2e-6, equal_nan=True, err_msg=f"{name} at {value}")
