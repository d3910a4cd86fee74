"""``torch.autograd``: ``backward`` and ``grad`` as functions."""
from __future__ import annotations

from symgrad.grad_mode import enable_grad, no_grad, set_grad_enabled  # noqa: F401  (PyTorch exposes them here)


def backward(tensors, grad_tensors=None, retain_graph=None, inputs=None):
    tensors = [tensors] if not isinstance(tensors, (list, tuple)) else list(tensors)
    grads = grad_tensors if isinstance(grad_tensors, (list, tuple)) else [grad_tensors] * len(tensors)
    for k, (tensor, grad) in enumerate(zip(tensors, grads)):  # the graphs may share nodes: free them after the last
        last = k == len(tensors) - 1
        tensor.backward(grad, retain_graph=bool(retain_graph) or not last, inputs=inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, allow_unused=False):
    """Gradients of ``outputs`` (one tensor or several, summed) w.r.t. ``inputs``, returned and
    not accumulated into ``.grad``."""
    inputs = [inputs] if not isinstance(inputs, (list, tuple)) else list(inputs)
    outputs = [outputs] if not isinstance(outputs, (list, tuple)) else list(outputs)
    seeds = grad_outputs if isinstance(grad_outputs, (list, tuple)) else [grad_outputs] * len(outputs)
    saved = [t._grad for t in inputs]
    for t in inputs:
        t._grad = None
    try:
        for k, (output, seed) in enumerate(zip(outputs, seeds)):
            last = k == len(outputs) - 1
            output.backward(seed, retain_graph=bool(retain_graph) or not last, inputs=inputs)
        result = [t._grad for t in inputs]
    finally:
        for t, g in zip(inputs, saved):
            t._grad = g
    if not allow_unused and any(r is None for r in result):
        raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                           "Set allow_unused=True if this is the desired behavior.")
    return tuple(result)
