"""One call, several gradient engines, one report.

``fn`` is written against the torch-style API.  Each engine differentiates the same scalar,
``sum(fn(inputs) * r)`` for a fixed random ``r`` (just ``fn(inputs)`` when it is a scalar),
at the same float64 inputs:

* ``symgrad``: symbolic reverse mode, compiled (the engine being checked);
* ``finite_differences``: five-point central differences of symgrad's compiled forward,
  with a step scaled to each input's magnitude;
* ``jax``: ``jax.grad`` of symgrad's emitted forward program (JAX's own autodiff, which
  honours the program's stop_gradient for detached values);
* ``torch``: the real PyTorch running ``fn`` itself;
* ``claimed``: gradients the caller already has.
"""
from __future__ import annotations

import itertools

import numpy as np

from symgrad.check.model import ModelFunction
from symgrad.check.report import CrossCheckReport, compare
from symgrad.check.torch_bridge import on_torch
from symgrad.check.traced import as_float64, input_names, trace
from symgrad.nn.module import Module
from symgrad.tensor import Tensor

ENGINES = ("finite_differences", "jax", "torch")


def _projections(function, seed):
    rng = np.random.default_rng(seed)
    return [None if not shape else rng.standard_normal(shape) for shape in function.output_shapes]


def _symgrad(function, arrays, wrt, projections):
    total = {k: np.zeros_like(arrays[k]) for k in wrt}
    for output, r in enumerate(projections):
        cotangent = np.ones(()) if r is None else r
        for k, g in zip(wrt, function.vjp(output, wrt, arrays, cotangent)):
            total[k] = total[k] + np.broadcast_to(g, arrays[k].shape)
    return total


def _finite_differences(function, arrays, wrt, projections, eps):
    result = {}
    for k in wrt:
        columns = [function.numerical_jacobian(o, k, arrays, eps, refined=True) for o in range(len(projections))]
        flat = sum((r.reshape(-1) if r is not None else np.ones(1)) @ j for r, j in zip(projections, columns))
        result[k] = np.asarray(flat).reshape(arrays[k].shape)
    return result


def _jax(function, arrays, wrt, projections):
    import jax
    import jax.numpy as jnp

    forward = function._forward.python_fn
    constants = function.constants

    def scalar(*diff):
        full = list(arrays)
        for k, v in zip(wrt, diff):
            full[k] = v
        outputs = forward(*full, *constants)
        return sum(jnp.sum(o * r) if r is not None else jnp.sum(o) for o, r in zip(outputs, projections))

    grads = jax.grad(scalar, argnums=tuple(range(len(wrt))))(*[jnp.asarray(arrays[k]) for k in wrt])
    return {k: np.asarray(g) for k, g in zip(wrt, grads)}


def _torch(fn, arrays, wrt, projections):
    import torch
    tensors = [torch.tensor(a, requires_grad=k in wrt) for k, a in enumerate(arrays)]
    result = (fn.on_torch(torch) if isinstance(fn, ModelFunction) else on_torch(fn, torch))(*tensors)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    total = sum((o * torch.tensor(r)).sum() if r is not None else o.sum() for o, r in zip(outputs, projections))
    total.backward()
    return {k: (tensors[k].grad.numpy() if tensors[k].grad is not None else np.zeros_like(arrays[k])) for k in wrt}


def crosscheck(fn, inputs, against=ENGINES, *, claimed=None, atol: float = 1e-5, rtol: float = 1e-3,
               eps: float = 1e-6, seed: int = 0) -> CrossCheckReport:
    """Compare symgrad's gradient of ``fn`` at ``inputs`` with other engines'.

    ``inputs``: a list of arrays/tensors or a dict name -> array.  Float inputs are
    differentiated (tensors only when they require grad); all run in float64.
    ``fn`` may be an ``nn.Module``: ``inputs`` are its forward's, and its parameters that
    require grad are checked too, by their ``named_parameters`` names.
    ``claimed``: gradients to check, a list (one per differentiated input) or a dict by name.
    An engine that cannot run (PyTorch not installed) is listed in ``report.skipped``.
    """
    if isinstance(fn, Module):
        fn = ModelFunction(fn, inputs)
        inputs = fn.inputs
    names = input_names(fn, inputs)
    values = list(inputs.values()) if isinstance(inputs, dict) else list(inputs)
    arrays = [as_float64(v) for v in values]
    wrt = [k for k, v in enumerate(values)
           if (v.requires_grad if isinstance(v, Tensor) else arrays[k].dtype.kind == "f")]
    function = trace(fn, arrays, wrt)
    projections = _projections(function, seed)
    gradients = {"symgrad": _symgrad(function, arrays, wrt, projections)}
    skipped = {}
    runners = {"finite_differences": lambda: _finite_differences(function, arrays, wrt, projections, eps),
               "jax": lambda: _jax(function, arrays, wrt, projections),
               "torch": lambda: _torch(fn, arrays, wrt, projections)}
    for engine in against:
        if engine not in runners:
            raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(runners)}")
        try:
            gradients[engine] = runners[engine]()
        except ImportError as error:
            skipped[engine] = f"not installed: {error.name}"
    if claimed is not None:
        claims = [claimed[names[k]] for k in wrt] if isinstance(claimed, dict) else list(claimed)
        gradients["claimed"] = {k: np.asarray(c, dtype=np.float64) for k, c in zip(wrt, claims)}
    comparisons = [compare(names[k], (a, b), gradients[a][k], gradients[b][k], atol, rtol)
                   for k in wrt for a, b in itertools.combinations(gradients, 2)]
    named = {engine: {names[k]: g for k, g in grads.items()} for engine, grads in gradients.items()}
    return CrossCheckReport(comparisons, list(gradients), atol, rtol, named, skipped)
