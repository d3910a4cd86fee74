"""Compiled value-and-gradient functions, for export and for speed.

    f = symgrad.value_and_grad(loss_fn, argnums=(0, 1))
    value, (dw, db) = f(w, b)        # arrays in, arrays out; one XLA call per step

The function is traced with symgrad once per input signature (shapes, dtypes, grad mode,
which tensor arguments are detached): its gradient is derived symbolically and the emitted
JAX program is what ``jax.jit`` compiles, so after that a call is exactly a jitted call.
Tensors the function reads from its closure are compiled in as constants with the values
they had when it was traced, as ``jax.jit`` does with closures.  Called under ``no_grad``,
it runs the forward program only and returns ``(value, None)``; an argument given as a
tensor that does not require grad (``x.detach()``) gets ``None`` for its gradient.  Given a
tensor that requires grad (a parameter, or the argument of an outer compiled function), it
records instead: the value and gradients are tensors with history, the gradients
differentiable, so the chain from the arguments goes on (``create_graph``, as torch.func does).
"""
from __future__ import annotations

import functools

import jax

from symgrad import dtypes, engine
from symgrad.autograd.gradients import differentiable_gradients
from symgrad.creation import zeros_like
from symgrad.grad_mode import _state as _grad_state
from symgrad.grad_mode import is_grad_enabled, no_grad
from symgrad.nodes import leaf
from symgrad.tensor import Tensor
from symgrad.tracing import Trace, walk_of


class ValueAndGrad:
    """``fn`` compiled to return ``(value, gradients w.r.t. argnums)``; ``call`` is the function
    users get (a plain function: calling an instance's ``__call__`` costs 0.3 µs more)."""

    def __init__(self, fn, argnums=0):
        self.fn = fn
        self.single = isinstance(argnums, int)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        self._jitted: dict = {}
        self._last = None  # the CompiledProgram of the latest trace
        arrays_only = self._arrays_only = [None, None]  # the jitted function for arrays, by grad mode

        def call(*args):
            grad_mode = _grad_state.enabled
            for a in args:
                if isinstance(a, Tensor):
                    if grad_mode and any(isinstance(t, Tensor) and t._node.requires_grad for t in args):
                        return self._call_recording(args)
                    return self._call_with_tensors(args, grad_mode)
            return (arrays_only[grad_mode] or self._jit(grad_mode, None))(*args)

        self.call = functools.update_wrapper(call, fn)
        call.source = self.source

    def _call_with_tensors(self, args, grad_mode):
        """Tensors in, Tensors out (a few µs of wrapping around the jitted call: keep it lean)."""
        detached = tuple([isinstance(a, Tensor) and not a._node.requires_grad for a in args])
        jitted = self._jitted.get((grad_mode, detached)) or self._jit(grad_mode, detached)
        value, grads = jitted(*[a._value() if isinstance(a, Tensor) else a for a in args])
        if grads is None:
            return _as_tensor(value), None
        grads = _as_tensor(grads) if self.single else tuple([_as_tensor(g) for g in grads])
        return _as_tensor(value), grads

    def _call_recording(self, args):
        """Arguments with history (an outer function being differentiated, or a tensor the caller
        will call backward through): the value and gradients are recorded tensors, the gradients
        differentiable (create_graph), so the chain from the arguments is not cut."""
        tensors = [a if isinstance(a, Tensor) else Tensor(leaf(a, dtypes.from_numpy(a.dtype), k in self.argnums))
                   for k, a in enumerate(args)]
        out = self.fn(*tensors)
        wanted = [tensors[k] for k in self.argnums]
        found = differentiable_gradients([out], [None], wanted) if out.requires_grad else [None] * len(wanted)
        grads = tuple(None if not t.requires_grad else zeros_like(t) if g is None else g  # detached: None
                      for g, t in zip(found, wanted))
        return out, grads[0] if self.single else grads

    def _jit(self, grad_mode, detached):
        jitted = self._jitted[(grad_mode, detached)] = jax.jit(functools.partial(self._trace, grad_mode, detached))
        if detached is None:
            self._arrays_only[grad_mode] = jitted
        return jitted

    def _trace(self, grad_mode, detached, *arrays):
        """Runs under jax.jit's tracing, once per signature: symgrad trace, symbolic gradient, program."""
        leaves = []
        for k, a in enumerate(arrays):
            dtype = dtypes.from_numpy(a.dtype)
            wants = grad_mode and k in self.argnums and dtype.is_floating_point and not (detached and detached[k])
            leaves.append(Tensor(leaf(a, dtype, wants)))
        with (_nothing() if grad_mode else no_grad()):
            out = self.fn(*leaves)
        if not isinstance(out, Tensor):
            raise TypeError(f"value_and_grad: {getattr(self.fn, '__name__', 'fn')} must return a Tensor, "
                            f"got {type(out).__name__}")
        if grad_mode and out._node.shape not in ((), (1,)):
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                               f"(value_and_grad of a function returning shape {tuple(out._node.shape)})")
        walk, _ = walk_of((), [t._node for t in leaves])
        root = walk.add(out._node, grad_mode)
        differentiated = tuple(k for k in self.argnums if leaves[k].requires_grad)
        key = ("value_and_grad", tuple(walk.entries), root, differentiated, grad_mode)
        compiled = engine.program_for(key, lambda: _program(walk, root, differentiated, grad_mode))
        self._last = compiled
        outputs = compiled.python_fn(*engine.arrays(walk.inputs))
        if not grad_mode:
            return outputs[0], None
        grads = dict(zip(differentiated, outputs[1:]))
        result = tuple(grads.get(k) for k in self.argnums)
        return outputs[0], result[0] if self.single else result

    def source(self, *args) -> str:
        """The JAX source this function runs for arguments like ``args``."""
        arrays = [a._value() if isinstance(a, Tensor) else a for a in args]
        jax.jit(functools.partial(self._trace, is_grad_enabled(), None)).lower(*arrays)
        return self._last.source


def value_and_grad(fn, argnums=0):
    """``fn`` compiled to return ``(value, gradients)``; ``.source(*args)`` shows its JAX program."""
    return ValueAndGrad(fn, argnums).call


def grad(fn, argnums=0):
    """Like ``value_and_grad`` but returns only the gradients."""
    compiled = value_and_grad(fn, argnums)

    @functools.wraps(fn)
    def gradient(*args):
        return compiled(*args)[1]

    gradient.value_and_grad = compiled
    return gradient


def _program(walk, root, differentiated, grad_mode):
    """The value (and, in grad mode, the gradients w.r.t. the arguments ``differentiated``, which
    are the walk's first positions)."""
    trace = Trace(walk, "value_and_grad" if grad_mode else "value")
    trace.output(root, "value")
    if grad_mode:
        for k, g in zip(differentiated, trace.gradients(root, differentiated)):
            node = walk.order[k]
            trace.program.output(g, node.shape, node.dtype.name, f"gradient of argument {k}")
    return trace.program


def _as_tensor(array):
    return None if array is None else Tensor(leaf(array, dtypes.from_numpy(array.dtype)))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
