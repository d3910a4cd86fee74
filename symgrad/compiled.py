"""Compiled value-and-gradient functions, for export and for speed.

    f = symgrad.value_and_grad(loss_fn, argnums=(0, 1))
    value, (dw, db) = f(w, b)        # arrays in, arrays out; one XLA call per step

The function is traced with symgrad once per input signature (shapes, dtypes, grad mode,
which tensor arguments are detached): its gradient is derived symbolically and the emitted
JAX program is what ``jax.jit`` compiles, so after that a call is exactly a jitted call.
Arguments are what JAX's ``value_and_grad`` takes: pytrees of arrays (a dict of parameters, lists,
tuples) and keyword arguments (never differentiated); ``has_aux=True`` when ``fn`` returns
``(value, aux)``.  Tensors the function reads from its closure are compiled in as constants with
the values they had when it was traced, as ``jax.jit`` does with closures.  Called under
``no_grad``, it runs the forward program only and returns ``(value, None)``; an argument given as
a tensor that does not require grad (``x.detach()``) gets ``None`` for its gradient.  Given a
tensor that requires grad (a parameter, or the argument of an outer compiled function), it
records instead: the value and gradients are tensors with history, the gradients
differentiable, so the chain from the arguments goes on (``create_graph``, as torch.func does).
``f.lower(*args)`` is the function lowered for export (symgrad.exporting).
"""
from __future__ import annotations

import functools

import jax

from symgrad import dtypes, engine, exporting
from symgrad.autograd.gradients import differentiable_gradients
from symgrad.creation import zeros_like
from symgrad.grad_mode import _state as _grad_state
from symgrad.grad_mode import is_grad_enabled, no_grad
from symgrad.nodes import leaf
from symgrad.tensor import Tensor
from symgrad.tracing import Trace, walk_of


# What JAX raises when Python asks a traced value for a number (``if loss > 0``, ``.item()``).
_READS_A_TRACED_VALUE = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                         jax.errors.TracerIntegerConversionError)


class ValueAndGrad:
    """``fn`` compiled to return ``(value, gradients w.r.t. argnums)``; ``call`` is the function
    users get (a plain function: calling an instance's ``__call__`` costs 0.3 µs more)."""

    def __init__(self, fn, argnums=0, has_aux=False):
        self.fn = fn
        self.single = isinstance(argnums, int)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        self.has_aux = has_aux
        self._jitted: dict = {}
        self._last = None  # the CompiledProgram of the latest trace
        arrays_only = self._arrays_only = [None, None]  # the jitted function for arrays, by grad mode

        def call(*args, **kwargs):
            grad_mode = _grad_state.enabled
            for a in args:
                if isinstance(a, Tensor):
                    if grad_mode and any(isinstance(t, Tensor) and t._node.requires_grad for t in args):
                        return self._call_recording(args, kwargs)
                    return self._call_with_tensors(args, kwargs, grad_mode)
            return (arrays_only[grad_mode] or self._jit(grad_mode, None))(*args, **kwargs)

        self.call = functools.update_wrapper(call, fn)
        call.source = self.source
        call.lower = self.lower

    def _call_with_tensors(self, args, kwargs, grad_mode):
        """Tensors in, Tensors out (a few µs of wrapping around the jitted call: keep it lean)."""
        detached = tuple([isinstance(a, Tensor) and not a._node.requires_grad for a in args])
        jitted = self._jitted.get((grad_mode, detached)) or self._jit(grad_mode, detached)
        result = jitted(*[a._value() if isinstance(a, Tensor) else a for a in args], **_arrays(kwargs))
        return jax.tree_util.tree_map(_as_tensor, result)

    def _call_recording(self, args, kwargs):
        """Arguments with history (an outer function being differentiated, or a tensor the caller
        will call backward through): the value and gradients are recorded tensors, the gradients
        differentiable (create_graph), so the chain from the arguments is not cut."""
        tensors = [a if isinstance(a, Tensor) else Tensor(leaf(a, dtypes.from_numpy(a.dtype), k in self.argnums))
                   for k, a in enumerate(args)]
        out = self.fn(*tensors, **kwargs)
        value = out[0] if self.has_aux else out
        wanted = [tensors[k] for k in self.argnums]
        found = differentiable_gradients([value], [None], wanted) if value.requires_grad else [None] * len(wanted)
        grads = tuple(None if not t.requires_grad else zeros_like(t) if g is None else g  # detached: None
                      for g, t in zip(found, wanted))
        return out, grads[0] if self.single else grads

    def _jit(self, grad_mode, detached):
        jitted = self._jitted[(grad_mode, detached)] = jax.jit(functools.partial(self._trace, grad_mode, detached))
        if detached is None:
            self._arrays_only[grad_mode] = jitted
        return jitted

    def trace(self, grad_mode, detached, args, kwargs, leaf_names=None) -> "Traced":
        """``fn`` run once on leaves made from the arrays in ``args`` and ``kwargs`` (pytrees):
        the walk of what it computed.  ``leaf_names`` name the leaves' inputs, in order (export)."""
        flat, tree = jax.tree_util.tree_flatten((args, kwargs))
        arg_trees = [jax.tree_util.tree_structure(a) for a in args]
        arg_leaves = [t.num_leaves for t in arg_trees]
        starts = [sum(arg_leaves[:k]) for k in range(len(args))]
        wanted = {starts[k] + i for k in self.argnums if k < len(args) and not (detached and detached[k])
                  for i in range(arg_leaves[k])} if grad_mode else set()
        leaves = []
        for i, a in enumerate(flat):
            dtype = dtypes.from_numpy(a.dtype)
            leaves.append(Tensor(leaf(a, dtype, i in wanted and dtype.is_floating_point)))
        targs, tkwargs = jax.tree_util.tree_unflatten(tree, leaves)
        name = getattr(self.fn, "__name__", "fn")
        with (_nothing() if grad_mode else no_grad()):
            try:
                out = self.fn(*targs, **tkwargs)
            except _READS_A_TRACED_VALUE as error:
                raise TypeError(f"value_and_grad: {name} branches on or reads the value of a traced tensor "
                                f"(Python control flow on data, .item(), .tolist()); a compiled function must "
                                f"be one program for every value: use torch.where, or compute the decision "
                                f"outside") from error
        value, aux = out if self.has_aux else (out, None)
        if not isinstance(value, Tensor):
            raise TypeError(f"value_and_grad: {name} must return a Tensor"
                            f"{' as the first of (value, aux)' if self.has_aux else ''}, got {type(value).__name__}")
        if grad_mode and value._node.shape not in ((), (1,)):
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs (value_and_grad of {name}, "
                               f"which returns shape {tuple(value._node.shape)})")
        aux_leaves, aux_tree = jax.tree_util.tree_flatten(aux)
        if any(not isinstance(t, Tensor) for t in aux_leaves):
            raise TypeError(f"value_and_grad: the aux output of {name} must be a pytree of Tensors")
        walk, _ = walk_of((), [t._node for t in leaves])
        root = walk.add(value._node, grad_mode)
        aux_positions = tuple(walk.add(t._node, grad_mode) for t in aux_leaves)
        differentiated = tuple(i for i in sorted(wanted) if leaves[i].requires_grad)
        names = {id(t._node): n for t, n in zip(leaves, leaf_names)} if leaf_names else None
        return Traced(walk, root, aux_positions, differentiated, grad_mode, names,
                      (starts, arg_trees, aux_tree))

    def _trace(self, grad_mode, detached, *args, **kwargs):
        """Runs under jax.jit's tracing, once per signature: symgrad trace, symbolic gradient, program."""
        traced = self.trace(grad_mode, detached, args, kwargs)
        compiled = engine.program_for(traced.key, traced.program)
        self._last = compiled
        return self.results(traced, compiled.python_fn(*engine.arrays(traced.walk.inputs)))

    def results(self, traced, outputs, grad_mode=None):
        """The program's flat outputs as JAX's ``value_and_grad`` returns them (``grad_mode=False``:
        the forward program's, as ``(value, None)``)."""
        starts, arg_trees, aux_tree = traced.structure
        naux = len(traced.aux)
        value = outputs[0]
        if self.has_aux:
            value = (value, jax.tree_util.tree_unflatten(aux_tree, outputs[1:1 + naux]))
        if not (traced.grad_mode if grad_mode is None else grad_mode):
            return value, None
        grads = dict(zip(traced.differentiated, outputs[1 + naux:]))
        per_arg = []
        for k in self.argnums:
            found = [grads.get(starts[k] + i) for i in range(arg_trees[k].num_leaves)]
            per_arg.append(None if all(g is None for g in found) else jax.tree_util.tree_unflatten(arg_trees[k], found))
        return value, per_arg[0] if self.single else tuple(per_arg)

    def source(self, *args, **kwargs) -> str:
        """The JAX source this function runs for arguments like ``args``."""
        jax.jit(functools.partial(self._trace, is_grad_enabled(), None)).lower(*_arrays(args), **_arrays(kwargs))
        return self._last.source

    def lower(self, *args, platforms=("cpu",), **kwargs) -> "exporting.Lowered":
        """This function lowered for export, for arguments like ``args``: arrays, Tensors,
        ``jax.ShapeDtypeStruct``s or ``symgrad.spec("f32[b,5]")`` (a symbolic batch dimension)."""
        return exporting.lower(self, _arrays(args), _arrays(kwargs), platforms)


class Traced:
    """What one run of ``fn`` computed: the walk, where its value, aux outputs and differentiated
    leaves are in it, and the pytree structure to put the results back into."""

    def __init__(self, walk, root, aux, differentiated, grad_mode, names, structure):
        self.walk, self.root, self.aux, self.differentiated = walk, root, aux, differentiated
        self.grad_mode, self.names, self.structure = grad_mode, names, structure
        self.key = ("value_and_grad", tuple(walk.entries), root, aux, differentiated, grad_mode)

    def program(self, grad_mode=None):
        """The value, the aux outputs and (in grad mode) the gradients w.r.t. the differentiated
        leaves, which are the walk's first positions.  ``grad_mode=False``: the forward only."""
        grad_mode = self.grad_mode if grad_mode is None else grad_mode
        names = self.names or {}
        trace = Trace(self.walk, "value_and_grad" if grad_mode else "value", names)
        trace.output(self.root, "value")
        for k, position in enumerate(self.aux):
            trace.output(position, f"aux {k}")
        if grad_mode:
            for p, g in zip(self.differentiated, trace.gradients(self.root, self.differentiated)):
                node = self.walk.order[p]
                label = f"grad_{names[id(node)]}" if id(node) in names else f"gradient of input {p}"
                trace.program.output(g, node.shape, node.dtype.name, label)
        return trace.program


def value_and_grad(fn, argnums=0, has_aux=False):
    """``fn`` compiled to return ``(value, gradients)``; ``.source(*args)`` shows its JAX program,
    ``.lower(*args)`` lowers it for export."""
    return ValueAndGrad(fn, argnums, has_aux).call


def grad(fn, argnums=0, has_aux=False):
    """Like ``value_and_grad`` but returns only the gradients (and aux: ``(grads, aux)``)."""
    compiled = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def gradient(*args, **kwargs):
        value, grads = compiled(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    gradient.value_and_grad = compiled
    gradient.lower = compiled.lower
    return gradient


def _arrays(tree):
    """Tensors in a pytree as their arrays."""
    if not tree:
        return tree
    return jax.tree_util.tree_map(lambda a: a._value() if isinstance(a, Tensor) else a, tree)


def _as_tensor(array):
    return Tensor(leaf(array, dtypes.from_numpy(array.dtype)))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
