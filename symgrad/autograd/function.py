"""``torch.autograd.Function``: a user's forward and backward, written in symgrad ops, traced into
the symbolic program like any op.

``apply`` runs ``forward`` under no_grad on detached inputs and then, at once, ``backward`` on
placeholder cotangents with grad enabled: both are recorded graphs, not values.  Each
differentiable output becomes one node (symgrad.autograd.custom_node) whose lowering lowers the
recorded forward from the node's inputs and whose VJP lowers the recorded backward with the
cotangent reaching it, so the user's backward becomes ordinary assignments of the same program (one
XLA call) and differentiating them again is reverse mode again (double backward).

A ``forward`` that writes into an input and returns it (``ctx.mark_dirty``) writes, through the
detached alias, into the caller's tensor; that tensor is then the output, its node the call's, as
PyTorch's: the call takes the input's values from before the write.

Recording the backward at ``apply`` is what lets the graphs' structure key the program (a training
loop compiles once, whatever ``ctx`` holds): its Python runs during the forward, and its errors (a
wrong number of gradients, a wrong shape, an exception of its own) are kept and raised by the
backward that reaches the node, as PyTorch raises them.
"""
from __future__ import annotations

import functools
import weakref

from symgrad.autograd.custom_node import cotangent_placeholders, custom_outputs
from symgrad.engine import FREED_MESSAGE
from symgrad.grad_mode import enable_grad, is_grad_enabled, no_grad
from symgrad.inplace import assign
from symgrad.nodes import AccumulateGrad, grad_fn_of, standing_for_inputs
from symgrad.ops.shape import clone
from symgrad.storage import storage_of
from symgrad.tensor import Tensor


class FunctionCtx:
    """``ctx``: what ``forward`` leaves for ``backward``.  The context of a call whose outputs
    require grad is also their ``grad_fn`` (an instance of ``<Name>Backward``), as in PyTorch."""

    def __init__(self, inputs=()):
        self.to_save = ()
        self.non_differentiable = ()
        self.dirty_tensors = ()
        self.materialize_grads = True
        self.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in inputs)
        self._inputs = tuple(a._node for a in inputs if isinstance(a, Tensor))
        self._outputs = ()  # weak references to the output nodes, to know when backward freed them

    def save_for_backward(self, *tensors) -> None:
        for k, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {k} is of type "
                                f"{type(t).__name__}")
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        if any(ref() is None or ref().freed for ref in self._outputs) and self.to_save:
            raise RuntimeError(FREED_MESSAGE)
        return tuple(self.to_save)

    def mark_dirty(self, *tensors) -> None:
        """The inputs ``forward`` wrote into in place (and returns)."""
        if not all(isinstance(t, Tensor) for t in tensors):
            raise RuntimeError("mark_dirty can only accept variables, but argument ")  # (PyTorch's text, cut short)
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Accepted: the cotangent of an output that receives none is always zeros here (symbolic
        zeros cost nothing), which is what a backward that handles ``None`` computes anyway."""
        self.materialize_grads = value

    # --------------------------------------------------------------- as a grad_fn

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self):
        return tuple((grad_fn_of(n) or (AccumulateGrad(n) if n.requires_grad else None), 0) for n in self._inputs)

    def __repr__(self):
        return f"<torch.autograd.function.{type(self).__name__} object at {id(self):#x}>"  # PyTorch's text


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)`` (or
    ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``), and call ``apply``."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._backward_cls = type(f"{cls.__name__}Backward", (FunctionCtx,), {"_forward_cls": cls})

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        if cls is Function:
            raise RuntimeError("apply() is called on a subclass of torch.autograd.Function that defines forward "
                               "and backward, not on Function itself")
        ctx = cls._backward_cls(args)
        detached = tuple(a.detach() if isinstance(a, Tensor) else a for a in args)
        before = [(a._node, d._node) for a, d in zip(args, detached) if isinstance(a, Tensor)]
        with no_grad():
            if cls.setup_context is not Function.setup_context:
                output = cls.forward(*detached, **kwargs)
                cls.setup_context(ctx, detached, output)
            else:
                output = cls.forward(ctx, *detached, **kwargs)
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        dirty = _dirty(ctx, args, detached, outputs)
        if not (is_grad_enabled() and any(ctx.needs_input_grad)):
            for k in dirty.values():
                storage_of(args[k]).version += 1
            if not is_grad_enabled():  # PyTorch's result is then a new alias, as the detached input is
                return output
            results = tuple(args[dirty[id(o)]] if id(o) in dirty else o for o in outputs)
            return results[0] if single else results
        cotangents = cotangent_placeholders(outputs)
        positions = [k for k, a in enumerate(args) if isinstance(a, Tensor)]
        with standing_for_inputs([inside for k, (_, inside) in zip(positions, before) if args[k].requires_grad]):
            returned = _run_backward(cls, ctx, cotangents)
            given = [clone(Tensor(node))._node if k in dirty.values() else node  # a copy no write marks
                     for k, (node, _) in zip(positions, before)]  # (symgrad.storage)
            results = custom_outputs(cls, ctx, args, [d for _, d in before], given, outputs, cotangents, returned)
        results = tuple(_rebound(args[dirty[id(o)]], r) if id(o) in dirty else r for o, r in zip(outputs, results))
        ctx._outputs = tuple(weakref.ref(r._node) for r in results if isinstance(r, Tensor) and r.requires_grad)
        return results[0] if single else results


def _dirty(ctx, args, detached, outputs) -> dict:
    """id of each output ``forward`` wrote into -> the position of its argument, with PyTorch's
    errors for one not returned, or a leaf that requires grad (its version counting the call)."""
    positions = {id(d): k for k, d in enumerate(detached) if isinstance(d, Tensor)}
    dirty = {id(t): positions[id(t)] for t in ctx.dirty_tensors if id(t) in positions}
    returned = {id(o) for o in outputs}
    if len(dirty) != len(ctx.dirty_tensors) or not all(key in returned for key in dirty):
        raise RuntimeError("Some elements marked as dirty during the forward method were not returned as output. "
                           "The inputs that are modified inplace must all be outputs of the Function.")
    for k in dirty.values():
        if is_grad_enabled() and args[k].requires_grad and args[k].is_leaf:
            storage_of(args[k]).version += 1
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
    return dirty


def _rebound(tensor: Tensor, result: Tensor) -> Tensor:
    """The argument ``forward`` wrote into, made the call's output (its views see it); its version
    counts the call, as PyTorch's."""
    if result.requires_grad:
        assign(tensor, result._node)
    else:
        storage_of(tensor).version += 1
    return tensor


def _run_backward(cls, ctx, cotangents):
    """The user's backward on placeholder cotangents, recorded with grad enabled (so it can be
    differentiated again); what it returned, or the exception it raised.  The detached arguments
    require grad meanwhile where the caller's do, as PyTorch's saved inputs: what the backward
    computes from them in grad mode is differentiated again, what it computes under no_grad is a
    constant (``Walk.lower`` stops the gradient there), as are the forward's own intermediates."""
    try:
        with enable_grad():
            return cls.backward(ctx, *cotangents)
    except Exception as error:  # raised by the backward that reaches this call, not by the forward
        return error


def once_differentiable(backward):
    """A backward that PyTorch runs under no_grad: its result is not differentiated again."""
    @functools.wraps(backward)
    def wrapped(ctx, *grad_outputs):
        with no_grad():
            return backward(ctx, *grad_outputs)
    return wrapped
