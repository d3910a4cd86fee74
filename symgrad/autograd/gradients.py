"""``torch.autograd.backward`` and ``torch.autograd.grad``."""
from __future__ import annotations

import warnings
from collections.abc import Mapping

from symgrad import hooks
from symgrad.creation import zeros_like
from symgrad.higher_order import gradient_node
from symgrad.tensor import Tensor, as_node
from symgrad.tracing import Walk, gradient_path


def backward(tensors, grad_tensors=None, retain_graph=None, inputs=None):
    tensors = [tensors] if not isinstance(tensors, (list, tuple)) else list(tensors)
    grads = grad_tensors if isinstance(grad_tensors, (list, tuple)) else [grad_tensors] * len(tensors)
    for k, (tensor, grad) in enumerate(zip(tensors, grads)):  # the graphs may share nodes: free them after the last
        last = k == len(tensors) - 1
        tensor.backward(grad, retain_graph=bool(retain_graph) or not last, inputs=inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of ``outputs`` (one tensor or several, summed) w.r.t. ``inputs``, returned and
    not accumulated into ``.grad``; with ``create_graph``, gradients that can be differentiated.
    ``inputs`` may be a dict (``dict(model.named_parameters())``): the gradients come back by key."""
    if type(inputs) is dict:
        return dict(zip(inputs, grad(outputs, tuple(inputs.values()), grad_outputs, retain_graph, create_graph,
                                     only_inputs, allow_unused, is_grads_batched, materialize_grads)))
    if isinstance(inputs, Mapping):
        raise TypeError(f"`inputs` argument to `grad()` must be a dict, not {type(inputs).__name__}. "
                        "Other Mapping types are not supported.")
    inputs = [inputs] if not isinstance(inputs, (list, tuple)) else list(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use torch.autograd.backward.", FutureWarning,
                      stacklevel=2)
    outputs = [outputs] if not isinstance(outputs, (list, tuple)) else list(outputs)
    seeds = grad_outputs if isinstance(grad_outputs, (list, tuple)) else [grad_outputs] * len(outputs)
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if create_graph:
        result = differentiable_gradients(outputs, seeds, inputs)
    else:
        result = _gradients(outputs, seeds, inputs, retain_graph)
    unused = next((k for k, r in enumerate(result) if r is None), None)  # (``index`` would compare tensors)
    if not allow_unused and unused is not None:
        raise RuntimeError(f"The differentiated Tensor at index {unused} appears to not have been used in the graph. "
                           "Set allow_unused=True if this is the desired behavior.")
    if materialize_grads:
        result = [zeros_like(t) if r is None else r for r, t in zip(result, inputs)]
    return tuple(result)


def _gradients(outputs, seeds, inputs, retain_graph) -> list:
    saved = [t._grad for t in inputs]
    for t in inputs:
        t._grad = None
    hooks.accumulating[0] = False
    try:
        for k, (output, seed) in enumerate(zip(outputs, seeds)):
            last = k == len(outputs) - 1
            output.backward(seed, retain_graph=bool(retain_graph) or not last, inputs=inputs)
        return [t._grad for t in inputs]
    finally:
        hooks.accumulating[0] = True
        for t, g in zip(inputs, saved):
            t._grad = g


def differentiable_gradients(outputs, seeds, inputs) -> list:
    """The gradients of ``outputs`` w.r.t. ``inputs`` as recorded tensors (None where unused)."""
    result = [None] * len(inputs)
    for output, seed in zip(outputs, seeds):
        if not output.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        if seed is None and output.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        path, leaves = gradient_path(output._node, inputs)
        reached = set(path) | {output._node}
        used = [(k, t, n) for k, t in enumerate(inputs) for n in _nodes_of(t, leaves)
                if n is output._node or any(n in m.inputs for m in reached)]
        terms = hooked_gradients(output._node, None if seed is None else as_node(seed), [t for _, t, _ in used],
                                 [n for _, _, n in used])
        for (k, _, _), term in zip(used, terms):
            result[k] = term if result[k] is None else result[k] + term
    return result


def _nodes_of(tensor, leaves) -> list:
    """The tensor's node, and the leaves of a graph it owned before an in-place write under no_grad
    (PyTorch's leaf is one variable before and after: every use of it gets a gradient)."""
    return [tensor._node] + [n for n in leaves if n is not tensor._node and n.owner() is tensor]


def hooked_gradients(root, seed, tensors, nodes=None) -> list:
    """The differentiable gradients of ``root`` (weighted by ``seed``) w.r.t. ``tensors``, with the
    hooks on the way run on recorded gradients, as PyTorch runs them under ``create_graph``.

    A hook that replaces the gradient at ``h`` by ``g'`` changes every gradient below it by the
    vector-Jacobian product of ``g' - g`` from ``h``: hooked nodes are taken nearest the root first,
    each correction is one more gradient node, and a graph without hooks is one gradient node."""
    order = Walk()
    order.add(root, True)
    corrections = []  # (hooked node, the nodes below it, the change its hooks made)

    def gradient_at(node):
        total = Tensor(gradient_node(root, node, seed))
        for hooked, below, change in corrections:
            if node in below:
                total = total + Tensor(gradient_node(hooked, node, change._node))
        return total

    for unit in hooks.units(hooks.cuts(list(order.order)), order.index):
        given = {node: gradient_at(node) for node in unit}
        _, onward = hooks.run(unit, given, on_tensors=True)
        for node, changed in onward.items():
            before = given.get(node)
            if changed is not before:
                below = Walk()
                below.add(node, True)
                corrections.append((node, below.index, _change(before, changed)))
    return [_hooked(hooks.of_leaf(t, "grad") if t._node.is_leaf else (), gradient_at(n))
            for t, n in zip(tensors, nodes or [t._node for t in tensors])]


def _change(before, after):
    """What a hook added to a gradient (None: there was none, or there is none now)."""
    if before is None:
        return after
    return -before if after is None else after - before


def _hooked(functions, gradient):
    """The gradient after each of the user's hooks in turn (None leaves it as it is)."""
    for function in list(functions):
        result = function.on_tensor(gradient)
        if result is not None:
            gradient = result
    return gradient
