"""``torch.autograd.functional``: vjp, jvp, jacobian, hessian, hvp, vhp with PyTorch's signatures,
all built on differentiable gradients (``create_graph``): a Jacobian is one gradient program run
once per output entry with a one-hot cotangent (one compile), a jvp is the derivative of a vjp
with respect to its cotangent, a Hessian is the Jacobian of the gradient."""
from __future__ import annotations

import numpy as np

from symgrad.autograd.gradients import grad
from symgrad.creation import tensor, zeros_like
from symgrad.grad_mode import enable_grad
from symgrad.ops.shape import stack
from symgrad.tensor import Tensor


def _as_tuple(x):
    return (x, False) if isinstance(x, tuple) else ((x,), True)


def _prepared(inputs):
    """The inputs as fresh leaves that require grad (the user's tensors are left as they are)."""
    inputs, single = _as_tuple(inputs)
    return tuple(t.detach().requires_grad_(True) for t in inputs), single


def _outputs(func, inputs, strict: bool):
    with enable_grad():
        outputs = func(*inputs)
    outputs, single = _as_tuple(outputs)
    if strict and any(not o.requires_grad for o in outputs):
        raise RuntimeError("The output of the user-provided function is independent of its input. "
                           "This is not allowed in strict mode.")
    return outputs, single


def _gradients(outputs, inputs, cotangents, create_graph: bool, strict: bool):
    found = grad(outputs, inputs, cotangents, create_graph=True, allow_unused=True)
    if strict and any(g is None for g in found):
        raise RuntimeError("The output of the user-provided function is independent of input "
                           f"{[g is None for g in found].index(True)}. This is not allowed in strict mode.")
    return tuple(zeros_like(t) if g is None else (g if create_graph else g.detach()) for g, t in zip(found, inputs))


def _result(values, single: bool):
    return values[0] if single else tuple(values)


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    inputs, single_in = _prepared(inputs)
    outputs, single_out = _outputs(func, inputs, strict)
    v = None if v is None else _as_tuple(v)[0]
    if v is None and any(o.numel() != 1 for o in outputs):
        raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                           "Tensor with a single element.")
    gradients = _gradients(outputs, inputs, list(v) if v is not None else None, create_graph, strict)
    detached = tuple(o if create_graph else o.detach() for o in outputs)
    return _result(detached, single_out), _result(gradients, single_in)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """J v as the derivative of the vjp ``u -> u^T J`` with respect to ``u`` (PyTorch's trick)."""
    inputs, single_in = _prepared(inputs)
    outputs, single_out = _outputs(func, inputs, strict)
    v = _as_tuple(v)[0] if v is not None else tuple(zeros_like(t) + 1 for t in inputs)
    dummies = [zeros_like(o).requires_grad_(True) for o in outputs]
    transposed = grad(outputs, inputs, dummies, create_graph=True, allow_unused=True)
    used = [(g, w) for g, w in zip(transposed, v) if g is not None]
    products = grad([g for g, _ in used], dummies, [w for _, w in used], create_graph=True, allow_unused=True) \
        if used else [None] * len(dummies)
    result = tuple(zeros_like(o) if p is None else (p if create_graph else p.detach()) for p, o in zip(products, outputs))
    detached = tuple(o if create_graph else o.detach() for o in outputs)
    return _result(detached, single_out), _result(result, single_out)


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """Rows by reverse mode: one gradient per output entry, seeded one-hot (the same program each
    time).  ``vectorize`` and ``strategy`` are accepted; the result is the same."""
    inputs, single_in = _prepared(inputs)
    outputs, single_out = _outputs(func, inputs, strict)
    blocks = []
    for output in outputs:
        flat = output.reshape(-1)
        rows = [[] for _ in inputs]
        for k in range(flat.numel()):
            seed = tensor(np.eye(1, flat.numel(), k, dtype=flat.dtype.numpy)[0])  # a new value, the same program
            for row, g in zip(rows, _gradients([flat], inputs, [seed], create_graph, strict)):
                row.append(g)
        blocks.append(tuple(stack(row).reshape(*output.shape, *t.shape) if row else
                            zeros_like(t).reshape(*output.shape, *t.shape) for row, t in zip(rows, inputs)))
    per_output = [_result(block, single_in) for block in blocks]
    return _result(per_output, single_out)


def hessian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    inputs, single_in = _as_tuple(inputs)

    def gradient(*xs):
        output = func(*xs)
        if not isinstance(output, Tensor) or output.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return grad(output.reshape(()), xs, create_graph=True, allow_unused=True, materialize_grads=True)

    result = jacobian(gradient, inputs, create_graph, strict)
    return result[0][0] if single_in else result


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """H v, as the gradient of (grad f) . v."""
    inputs, single_in = _prepared(inputs)
    outputs, _ = _outputs(func, inputs, strict)
    if outputs[0].numel() != 1:
        raise RuntimeError("The function given to hvp should return a single Tensor with a single element")
    gradients = grad(outputs[0].reshape(()), inputs, create_graph=True, allow_unused=True, materialize_grads=True)
    v = _as_tuple(v)[0]
    dot = sum((g * w).sum() for g, w in zip(gradients, v))
    products = _gradients([dot], inputs, None, create_graph, strict)
    value = outputs[0] if create_graph else outputs[0].detach()
    return value, _result(products, single_in)


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """v^T H; equal to H v, as the Hessian is symmetric."""
    return hvp(func, inputs, v, create_graph, strict)
