"""The node of a custom Function's output (symgrad.autograd.function), and its lowering.

A call's recorded forward and backward are keyed by their structure (``Structure``, interned as
kinds are): calls with the same structure share one compiled program, whatever values they carry.
The node's inputs are the call's tensor arguments, then the values its graphs captured (a tensor
read from a closure, an array made with ``numpy()``), detached.  Lowering the node lowers the
recorded forward from those inputs (once per program) and wraps output ``j`` in a ``CustomVJP``
head: the identity, printed as its value, whose VJP lowers the recorded backward from the same
inputs and the cotangent reaching it.
"""
from __future__ import annotations

import weakref

import sympy as sp

from symgrad.ir.functions import StopGradient
from symgrad.nodes import Node, grad_fn_of, lazy_leaf
from symgrad.ops.registry import Op
from symgrad.tensor import Tensor
from symgrad.tracing import Walk

SYMBOLIC_BACKWARD = ("the backward of a custom autograd.Function is traced symbolically when apply() runs: it can "
                     "compute with grad_output in symgrad ops but not read its values (item(), numpy(), print)")


class CustomVJP(StopGradient):
    """The identity on output ``output`` of a custom Function, ``args = (value, *inputs)``; its
    gradient is the user's backward (``structure``).  Printed as its value, as StopGradient is."""

    structure = None
    output = 0

    @property
    def arity(self):
        return len(self.args)

    def vjp(self, p, g, out):
        return self.structure.cotangents(p, self.args[1:], self.output, g, out)


_lowered = weakref.WeakKeyDictionary()  # program -> {(structure, inputs): (forward exprs, {output: symbol})}


class Structure:
    """One recorded forward and backward, up to the values they carry: what lowering needs."""

    def __init__(self, name, forward, outputs, differentiable, arguments, count, backward, gradients, error):
        self.name, self.hint = name, name.lower()
        self.forward, self.outputs = forward.owned(), outputs  # the forward walk; each output's position in it
        self.differentiable = differentiable  # per output: whether it has a node of its own (``head``)
        self.arguments, self.count = arguments, count  # which of the ``count`` tensor arguments it declares
        self.captured = sum(e[0] is None for e in forward.entries) - len(arguments)
        self.backward = backward.owned() if backward is not None else None
        self.gradients, self.error = gradients, error
        self._heads = {}

    def head(self, output: int):
        head = self._heads.get(output)
        if head is None:
            # named as its base: SymPy's printers skip the base of a subclass of another name
            head = self._heads[output] = type("StopGradient", (CustomVJP,),
                                              {"structure": self, "output": output, "display": self.hint})
        return head

    def gradient_name(self, k: int) -> str:
        """The grad_fn name of the recorded gradient for tensor argument ``k`` (as PyTorch names a
        create_graph gradient: after the last op of the user's backward)."""
        position = self.gradients[k] if k < len(self.gradients) else -1
        if position < 0 or self.backward.entries[position][0] is None:
            return "GradientBackward"
        node = self.backward.order[position]
        if node.op.name == "custom_function":  # another Function's output: its context names it
            return f"{node.attrs[0].name}Backward"
        grad_fn = grad_fn_of(node)
        return type(grad_fn).__name__ if grad_fn is not None else "GradientBackward"

    def lower_forward(self, p, inputs):
        """The forward walk's expressions in ``p`` from the node's input expressions (memoized per
        program: the outputs of one call, and its backward, share one lowering)."""
        memo = _lowered.setdefault(p, {})
        key = (self, tuple(inputs))
        found = memo.get(key)
        if found is None:
            count = self.count
            given = [inputs[k] for k in self.arguments] + list(inputs[count:count + self.captured])
            found = memo[key] = (self.forward.lower(p, given=given), {})
        return found

    def output(self, p, inputs, k: int):
        """Output ``k``'s symbol in ``p``: its value wrapped in its ``head`` (memoized per program)."""
        exprs, symbols = self.lower_forward(p, inputs)
        symbol = symbols.get(k)
        if symbol is None:
            node = self.forward.order[self.outputs[k]]
            value = exprs[self.outputs[k]]
            if not isinstance(value, sp.Symbol):
                value = p.assign(value, node.shape, node.dtype.name, "value", fold=False)
            symbol = symbols[k] = p.assign(self.head(k)(value, *inputs), node.shape, node.dtype.name, self.hint)
        return symbol

    def cotangents(self, p, inputs, output: int, g, out):
        """``[(input, cotangent)]``: the recorded backward lowered with ``g`` for output ``output``
        (zeros for the others).  Where it reads a saved output it reads the output itself, whose
        gradient is this backward again; the forward's other results are constants to it, as in
        PyTorch (``Walk.lower`` stops their gradient: the arguments require grad by now).  An
        argument ``forward`` returned as it is stays the argument where the backward reads it
        (PyTorch's output is then a new tensor, and what was saved is the input)."""
        if self.error is not None:
            raise self.error
        exprs, _ = self.lower_forward(p, inputs)
        given = list(exprs)
        entries = self.forward.entries
        for k, position in enumerate(self.outputs):
            if position >= 0 and self.differentiable[k] and entries[position][0] is not None:
                given[position] = out if k == output else self.output(p, inputs, k)
        for k, position in enumerate(self.outputs):
            if position >= 0:
                node = self.forward.order[position]
                given.append(_full(p, g, node) if k == output else sp.S.Zero)
        given += inputs[self.count + self.captured:]
        lowered = self.backward.lower(p, given=given)
        return [(inputs[k], lowered[position]) for k, position in enumerate(self.gradients)
                if position >= 0 and isinstance(inputs[k], sp.Symbol)]


def _full(p, g, node):
    """The cotangent as an array of the output's shape (reverse mode may hand a folded number)."""
    return p.materialize(g, node.shape, node.dtype.name) if g.is_Number and node.shape else g


def _captured(walk, start: int) -> list:
    """The nodes with values that a walk reached past its declared inputs."""
    return [walk.order[i] for i in range(start, len(walk.order)) if walk.entries[i][0] is None]


_structures: dict = {}


def _interned(key, make) -> Structure:
    structure = _structures.get(key)
    if structure is None:
        structure = make()
        if len(_structures) < 4096:
            _structures[key] = structure
    return structure


def _build_cotangent(p, node):
    raise RuntimeError(SYMBOLIC_BACKWARD)


def _no_infer(nodes, *attrs):
    raise AssertionError("custom Function nodes are made directly")


COTANGENT = Op("cotangent", None, _no_infer, _build_cotangent, saves=False)


def cotangent_placeholders(outputs) -> list:
    """What the user's backward gets for ``grad_outputs``: a tensor standing for each output's
    cotangent, with no value (it is a symbol when the backward is lowered)."""
    return [Tensor(Node(COTANGENT, (), (), o._node.shape, o._node.dtype, True, None, None, None, None))
            if isinstance(o, Tensor) else None for o in outputs]


def _build(p, node, *inputs):
    structure, output = node.attrs
    inputs = [a if isinstance(a, sp.Symbol) or a.is_Number else p.assign(a, i.shape, i.dtype.name, "x")
              for a, i in zip(inputs, node.inputs)]
    return structure.output(p, inputs, output)


CUSTOM = Op("custom_function", None, _no_infer, _build, saves=True)
CUSTOM_SAVING_NOTHING = Op("custom_function", None, _no_infer, _build, saves=False)  # a second backward is fine


def custom_outputs(cls, ctx, args, declared, given, outputs, cotangents, returned) -> tuple:
    """The outputs of ``cls.apply(*args)`` as the user gets them: a node per differentiable one
    (its grad_fn the context), the others detached, non-tensors as they are.  ``declared``: the
    nodes ``forward`` got, per tensor argument; ``given``: the nodes the call's node takes for them
    (both as they were before ``forward``, which may have written into its inputs: ``mark_dirty``)."""
    name = type(ctx).__name__
    arguments = [k for k, a in enumerate(args) if isinstance(a, Tensor)]
    forward, firsts = Walk.declaring(list(declared))
    positions = tuple(forward.add(o._node, False) if isinstance(o, Tensor) else -1 for o in outputs)
    marked = {id(t._node) for t in ctx.non_differentiable if isinstance(t, Tensor)}
    differentiable = tuple(isinstance(o, Tensor) and o.dtype.is_floating_point and id(o._node) not in marked
                           for o in outputs)
    captured = _captured(forward, len(firsts))
    try:
        gradients = _checked(name, args, returned, ctx.needs_input_grad)
    except Exception as error:  # kept for the backward that reaches this call
        key = (cls, tuple(forward.entries), positions, differentiable, type(error), str(error))
        structure = _interned(key, lambda: Structure(cls.__name__, forward, positions, differentiable, firsts,
                                                     len(arguments), None, (), error))
    else:
        declared = list(forward.order) + [c._node for c in cotangents if c is not None]
        backward, _ = Walk.declaring(declared)
        targets = tuple(-1 if g is None else backward.add(g, False)  # per tensor argument, as the node's inputs
                        for g, a in zip(gradients, args) if isinstance(a, Tensor))
        captured += _captured(backward, len(declared))
        key = (cls, tuple(forward.entries), positions, differentiable, tuple(backward.entries), targets)
        structure = _interned(key, lambda: Structure(cls.__name__, forward, positions, differentiable, firsts,
                                                     len(arguments), backward, targets, None))
    inputs = tuple(given) + tuple(lazy_leaf(n) for n in captured)
    op = CUSTOM if ctx.to_save else CUSTOM_SAVING_NOTHING
    results = []
    for output, (o, wanted) in enumerate(zip(outputs, differentiable)):
        if wanted:
            node = Node(op, inputs, (structure, output), o._node.shape, o._node.dtype, True)
            node.grad_fn_object = ctx
            results.append(Tensor(node))
        else:
            results.append(Tensor(lazy_leaf(o._node)) if isinstance(o, Tensor) else o)
    return tuple(results)


def _checked(name: str, args, returned, needed) -> list:
    """The gradient node per argument (None where there is none or none is ``needed``) from what
    backward returned, with PyTorch's errors; a gradient that broadcasts to its input is summed
    down to it."""
    if isinstance(returned, Exception):
        raise returned
    grads = returned if isinstance(returned, tuple) else (returned,)
    if len(grads) > len(args) and all(g is None for g in grads[len(args):]):
        grads = grads[:len(args)]
    if len(grads) != len(args):
        raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                           f"(expected {len(args)}, got {len(grads)})")
    nodes = []
    for k, (g, a, wanted) in enumerate(zip(grads, args, needed)):
        if not isinstance(a, Tensor):
            if g is not None:
                raise RuntimeError(f"function {name} returned a gradient different than None at position {k + 1}, "
                                   f"but the corresponding forward input was not a Variable")
            nodes.append(None)
            continue
        if g is None or not wanted:
            nodes.append(None)
            continue
        if not isinstance(g, Tensor):
            raise TypeError(f"function {name} returned a gradient of type {type(g).__name__} at position {k + 1}; "
                            f"expected a Tensor or None")
        if tuple(g.shape) != tuple(a.shape):
            if not _expandable(tuple(a.shape), tuple(g.shape)):
                raise RuntimeError(f"Function {name} returned an invalid gradient at index {k} - got "
                                   f"{list(g.shape)} but expected shape compatible with {list(a.shape)}")
            g = _sum_to(g, tuple(a.shape))
        nodes.append((g if g.dtype is a.dtype else g.to(a.dtype))._node)
    return nodes


def _expandable(shape, to) -> bool:
    if len(shape) > len(to):
        return False
    return all(n == m or n == 1 for n, m in zip(shape[::-1], to[::-1]))


def _sum_to(g, shape):
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return (g.sum(dim=dims, keepdim=True) if dims else g).reshape(shape)
