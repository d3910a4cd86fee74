"""A module's backward hooks (``register_full_backward_hook``, ``register_full_backward_pre_hook``),
wired as PyTorch wires them, so the hooks see the same tensors at the same moments.

A call passes its tensor arguments, and then its results, through an identity Function
(``BackwardHookFunction``, the grad_fn PyTorch's callers see), and one hook on the gradients of
each identity's outputs together (a symgrad.hooks.Group) runs the user's hooks in the middle of
the symbolic backward, as tensor hooks run.  The gradients at the results come first: the
pre-hooks see them and may replace them, and they are kept for the full hooks.  The gradients at
the arguments come once everything below the results has added to them: the full hooks see both
and may replace the arguments' gradients.
"""
from __future__ import annotations

import warnings

from symgrad import engine, hooks
from symgrad.autograd.function import Function
from symgrad.creation import zeros
from symgrad.grad_mode import is_grad_enabled
from symgrad.nodes import leaf
from symgrad.tensor import Tensor

OUTPUTS_ONLY = ("Full backward hook is firing when gradients are computed with respect to module outputs since no "
                "inputs require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                "#torch.nn.Module.register_full_backward_hook for more details.")


class BackwardHookFunction(Function):
    """The identity on a call's tensors: its outputs are the nodes the module's hooks stop at."""

    @staticmethod
    def forward(ctx, *tensors):
        ctx.mark_non_differentiable(*[t for t, needed in zip(tensors, ctx.needs_input_grad) if not needed])
        return tensors

    @staticmethod
    def backward(ctx, *gradients):
        return gradients


class BackwardHook:
    """One call's backward hooks: the lists as they were at the call (hooks added or removed later
    do not change its backward, as in PyTorch), and the gradients at its results, kept from the
    moment they arrive until the full hooks have seen them."""

    def __init__(self, module, full_hooks: list, pre_hooks: list):
        self.module, self.full_hooks, self.pre_hooks = module, full_hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = -1
        self.input_positions = self.output_positions = None
        self.input_kinds = ()

    def wrap_inputs(self, args: tuple) -> tuple:
        args, self.input_positions, self.input_kinds = _wrapped(args, self._on_inputs)
        self.n_inputs = len(args)
        return args

    def wrap_outputs(self, result):
        if not isinstance(result, (Tensor, tuple)):
            warnings.warn(f"For backward hooks to be called, module output should be a Tensor or a tuple of Tensors "
                          f"but received {type(result)}", UserWarning, stacklevel=3)
        single = not isinstance(result, tuple)
        outputs, self.output_positions, _ = _wrapped((result,) if single else result, self._on_outputs)
        self.n_outputs = len(outputs)
        return outputs[0] if single else outputs

    def _on_outputs(self, gradients: list) -> list:
        """At the results: the pre-hooks, and the full hooks too when no argument needs a gradient."""
        self.grad_outputs = _packed(self.output_positions, gradients, self.n_outputs)
        for hook in self.pre_hooks:
            returned = hook(self.module, self.grad_outputs)
            if returned is None:
                continue
            if len(returned) != len(self.grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                   f"{len(returned)}, but expected {len(self.grad_outputs)}")
            self.grad_outputs = returned
        grad_outputs = self.grad_outputs
        if self.input_positions is None:
            warnings.warn(OUTPUTS_ONLY, UserWarning, stacklevel=2)
            for hook in self.full_hooks:
                returned = hook(self.module, (None,) * self.n_inputs, self.grad_outputs)
                if returned is not None and not (isinstance(returned, tuple) and all(g is None for g in returned)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
            self.grad_outputs = None
        return [grad_outputs[k] for k in self.output_positions]

    def _on_inputs(self, gradients: list):
        """At the arguments: the full hooks, given zeros for a tensor no gradient reached (PyTorch
        materializes them); nothing when the results' gradients never came (a double backward)."""
        if self.grad_outputs is None:
            return None
        gradients = [zeros(shape, dtype=dtype) if g is None else g for g, (shape, dtype) in
                     zip(gradients, self.input_kinds)]
        grad_inputs = _packed(self.input_positions, gradients, self.n_inputs)
        for hook in self.full_hooks:
            returned = hook(self.module, grad_inputs, self.grad_outputs)
            if returned is None:
                continue
            if len(returned) != len(grad_inputs):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(returned)}, "
                                   f"but expected {len(grad_inputs)}")
            grad_inputs = returned
        self.grad_outputs = None
        return [grad_inputs[k] for k in self.input_positions]


def _packed(positions, values, size: int) -> tuple:
    """One entry per argument (or result): the tensors' values in place, None elsewhere."""
    packed = [None] * size
    for position, value in zip(positions, values):
        packed[position] = value
    return tuple(packed)


def _wrapped(values: tuple, callback):
    """``values`` with their tensors passed through the identity, the tensors' positions, and their
    shapes and dtypes; ``callback`` (one gradient per tensor in, one per tensor or None out) hooked
    on the gradients of those that need one.  Unchanged, and None, when none needs a gradient."""
    positions = [k for k, v in enumerate(values) if isinstance(v, Tensor)]
    tensors = [values[k] for k in positions]
    if not (is_grad_enabled() and any(t.requires_grad for t in tensors)):
        return values, None, ()
    results = BackwardHookFunction.apply(*tensors)
    members = [r._node for r in results if r.requires_grad]
    hooks.Group(members, _on_members(callback, results))
    values = list(values)
    for k, result in zip(positions, results):
        values[k] = result
    return tuple(values), positions, [(tuple(t.shape), t.dtype) for t in tensors]


def _on_members(callback, results):
    """``callback`` as the hook of a Group on the results that need a gradient: one gradient per
    member in and out (arrays for the engine, ``on_tensors`` for recorded gradients), PyTorch's
    error for a replacement of another size.  Only kinds are kept: a Group must not hold its nodes."""
    needed = [k for k, r in enumerate(results) if r.requires_grad]
    kinds = [(tuple(r.shape), r.dtype) for r in results]
    count = len(results)

    def on_tensors(gradients):
        returned = callback(list(_packed(needed, gradients, count)))
        if returned is None:
            return None
        chosen = [returned[k] for k in needed]
        for g, k in zip(chosen, needed):
            if g is not None and tuple(g.shape) != kinds[k][0]:
                raise RuntimeError("hook 'hook' has changed the size of value")
        return chosen

    def on_arrays(arrays):
        returned = on_tensors([None if a is None else Tensor(leaf(a, kinds[k][1], shape=kinds[k][0]))
                               for a, k in zip(arrays, needed)])
        return None if returned is None else [None if g is None else engine.array(g._node) for g in returned]
    on_arrays.on_tensors = on_tensors
    return on_arrays
