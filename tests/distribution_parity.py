"""Helpers for the torch.distributions parity tests: the same parameters in symgrad and torch, all
of a test's outputs read in one concatenation and differentiated in one backward (one compiled
program each way), and the comparison with PyTorch's outputs."""
from __future__ import annotations

import numpy as np

F32 = np.float32
LOC = np.array([[0.3, -1.2, 2.0], [0.5, 0.0, -0.7]], F32)
SCALE = np.array([[0.5, 1.5, 2.0], [0.8, 1.0, 0.3]], F32)
CONC = np.array([[0.3, 1.0, 2.5], [9.0, 20.0, 0.05]], F32)  # below 1 (boosted), 1, above 8 (saddle point)
VALUE = np.array([[0.1, 0.4, 1.7], [2.0, 0.2, 0.3]], F32)
PROBS = np.array([[0.2, 0.5, 0.9], [0.05, 0.7, 1.0]], F32)
COUNTS = np.array([[0.0, 3.0, 1.0], [7.0, 0.0, 0.0]], F32)
SIMPLEX = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]], F32)
QUANTILES = np.array([[0.1, 0.5, 0.97], [0.3, 0.75, 0.02]], F32)


def D(T):
    return T.distributions


def leaves(T, arrays: dict) -> dict:
    return {k: T.tensor(np.ascontiguousarray(v), requires_grad=True) for k, v in arrays.items()}


def run(T, outputs: dict, differentiated, inputs: dict) -> dict:
    """The outputs (as float64 arrays, with their dtype), then the gradients of the sum of the
    differentiated ones with respect to ``inputs``."""
    flat = T.cat([v.detach().reshape(-1).double() for v in outputs.values()]).numpy()
    offsets = np.cumsum([0] + [v.numel() for v in outputs.values()])
    seen = {k: (flat[a:b].reshape(tuple(v.shape)), str(v.dtype)) for (k, v), a, b in
            zip(outputs.items(), offsets, offsets[1:])}
    sum(outputs[k].sum() for k in differentiated).backward()
    seen.update({"grad " + k: (p.grad.numpy(), str(p.grad.dtype)) for k, p in inputs.items() if p.grad is not None})
    return seen


def observe(T, families: dict):
    """Every family's methods, in one order (so draws line up), with validation off, and the
    gradients of the sum of the differentiable outputs.  ``families``: name -> (build(T, params),
    params, q's params (same build) for kl_divergence, value for log_prob/cdf, methods)."""
    T.manual_seed(7)
    outputs, inputs, info = {}, {}, []
    D(T).Distribution.set_default_validate_args(False)
    try:
        for name, (build, arrays, q_arrays, value, methods) in families.items():
            params, q_params = leaves(T, arrays), leaves(T, q_arrays)
            inputs.update({f"{name} {k}": v for k, v in params.items()})
            inputs.update({f"{name} q {k}": v for k, v in q_params.items()})
            p, q = build(T, params), build(T, q_params)
            value = T.tensor(value)
            calls = {"log_prob": lambda: p.log_prob(value), "entropy": p.entropy, "rsample": lambda: p.rsample((2,)),
                     "mean": lambda: p.mean, "mode": lambda: p.mode, "variance": lambda: p.variance,
                     "stddev": lambda: p.stddev, "cdf": lambda: p.cdf(value),
                     "icdf": lambda: p.icdf(T.tensor(QUANTILES)), "kl": lambda: D(T).kl_divergence(p, q)}
            outputs[f"{name} sample"], outputs[f"{name} sample()"] = p.sample((3,)), p.sample()
            outputs.update({f"{name} {m}": calls[m]() for m in methods.split()})
            info.append((name, tuple(p.batch_shape), tuple(p.event_shape), repr(p), p.has_rsample, str(p.support)))
        outputs["the generator after"] = T.rand(4)
        differentiated = [k for k in outputs if k.split()[-1] not in ("sample", "sample()", "mode", "after")]
        return run(T, outputs, differentiated, inputs), info
    finally:
        D(T).Distribution.set_default_validate_args(True)


def assert_matches(ours: dict, theirs: dict, loose=(), rtol=2e-6, atol=2e-6):
    """Every output and gradient PyTorch gave, with its dtype and shape; draws to the last rounding
    of the arithmetic after them, keys naming a ``loose`` family (lgamma, digamma and the
    reparameterized gamma gradients, approximated differently by XLA) to 5e-5."""
    assert sorted(ours) == sorted(theirs)
    for key, (expected, dtype) in theirs.items():
        got, got_dtype = ours[key]
        assert got_dtype == dtype and got.shape == expected.shape, key
        if "sample" in key or key.endswith("after"):
            np.testing.assert_allclose(got, expected, rtol=3e-7, atol=1e-7, err_msg=key)
        elif any(name in key.split() for name in loose):
            np.testing.assert_allclose(got, expected, rtol=5e-5, atol=5e-6, equal_nan=True, err_msg=key)
        else:
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=key)
