"""The recorded graph: light Python nodes, one per operation, and PyTorch's grad_fn view of them.

Recording an op must cost a few microseconds, so a node holds no SymPy: only its op, its
input nodes, its attributes, shape, dtype and whether it requires grad.  SymPy is built
from these nodes only when a structure is compiled for the first time.

A node's ``value`` is its array once computed.  A *leaf* node stops gradients; its value is
either an array or, after an in-place update or a ``detach`` of something not yet computed,
the node it is computed from (its single input), evaluated lazily and then dropped.
"""
from __future__ import annotations

import sympy as sp

from symgrad import dtypes, kinds
from symgrad.ops.registry import Op


class Node:
    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "requires_grad", "value", "owner",
                 "freed", "grad_fn_object", "retains_grad", "kind", "args", "pending", "__weakref__")

    def __init__(self, op: Op, inputs: tuple, attrs: tuple, shape: tuple, dtype, requires_grad: bool,
                 value=None, kind=False, args=None, pending=None):
        """``kind``, ``args`` and ``pending`` (see symgrad.kinds) are worked out here unless the
        caller (``apply``, which looks the kind up first) passes them."""
        self.op, self.inputs, self.attrs, self.shape, self.dtype = op, inputs, attrs, shape, dtype
        self.requires_grad, self.value = requires_grad, value
        self.owner = self.grad_fn_object = None  # owner: weakref to the Tensor whose .grad this feeds
        self.freed = self.retains_grad = False
        if kind is False:
            kind, args, pending = _describe(self)
        self.kind, self.args, self.pending = kind, args, pending

    def computed(self, value) -> None:
        """Take the value a program computed; a leaf then forgets how (chains never grow) and
        becomes an argument of whatever uses it next."""
        self.value = value
        if self.op is LEAF:
            self.inputs = ()
            self.kind, self.args, self.pending = kinds.array(self.shape, self.dtype, self.requires_grad), None, ()

    @property
    def is_leaf(self) -> bool:
        return self.op is LEAF or not self.requires_grad


def _describe(node: Node):
    """(kind, args, pending) of a node made directly rather than by ``apply``."""
    if node.op is LEAF:
        if node.value is not None:
            return kinds.array(node.shape, node.dtype, node.requires_grad), None, ()
        # pending: computed from its source inside the next program
        key, args, pending = kinds.combine(LEAF, node.inputs, (), node.requires_grad)
        if key is None or len(pending) >= kinds.MAX_ARGS:
            return None, None, None
        return kinds.known(key) or kinds.intern(key, node.shape, node.dtype, node.requires_grad), args, pending
    if node.op is CONST:
        return kinds.constant(node.attrs[0], node.shape, node.dtype), (), ()
    key, args, pending = kinds.combine(node.op, node.inputs, node.attrs, ("requires_grad", node.requires_grad))
    if key is None:
        return None, None, None
    return kinds.known(key) or kinds.intern(key, node.shape, node.dtype, node.requires_grad), args, pending


def _no_infer(nodes, *attrs):
    raise AssertionError("leaf and constant nodes are made directly")


def _build_leaf(p, node, source):
    """A pending leaf is its source's value; one that requires grad is a target of its own."""
    return p.assign(source, node.shape, node.dtype.name, "leaf", fold=not node.requires_grad)


def _build_const(p, node):
    (value,) = node.attrs
    return sp.Float(value) if isinstance(value, float) else sp.Integer(int(value))


LEAF = Op("leaf", None, _no_infer, _build_leaf, saves=False)
CONST = Op("const", None, _no_infer, _build_const, saves=False)


def leaf(value, dtype, requires_grad: bool = False) -> Node:
    """A leaf holding an array."""
    return Node(LEAF, (), (), tuple(value.shape), dtype, requires_grad, value)


def lazy_leaf(source: Node, requires_grad: bool = False) -> Node:
    """A leaf whose value is ``source``'s, computed when first needed; gradients stop here."""
    if source.value is not None:
        return Node(LEAF, (), (), source.shape, source.dtype, requires_grad, source.value)
    return Node(LEAF, (source,), (), source.shape, source.dtype, requires_grad)


def constant(value, shape=(), dtype=None) -> Node:
    """A Python number (shape ``()``) or an array filled with it; baked into programs."""
    dtype = dtype or dtypes.default_for(value)
    value = bool(value) if dtype is dtypes.bool_ else int(value) if dtype.kind == 1 else float(value)
    return Node(CONST, (), (value,), tuple(shape), dtype, False)


_scalars: dict = {}


def scalar(value) -> Node:
    """The constant node of a Python number, shared: ``lr * grad`` records no new constant per step.

    Zeros (whose sign matters) and NaNs (unequal to themselves) are not shared.
    """
    key = (value.__class__, value)
    node = _scalars.get(key)
    if node is None:
        node = constant(value)
        if value == value and value != 0 and len(_scalars) < 4096:
            _scalars[key] = node
    return node


def is_zero_fill(node: Node) -> bool:
    """A leaf that ``zero_()`` left: adding to it is replacing it."""
    return node.op is LEAF and node.value is None and node.inputs[0].op is CONST and node.inputs[0].attrs[0] == 0


_backward_classes: dict[str, type] = {}


class BackwardFunction:
    """What ``tensor.grad_fn`` returns: named as PyTorch names it (``AddBackward0``)."""

    __slots__ = ("_node",)

    def __init__(self, node: Node):
        self._node = node

    def name(self) -> str:
        name = type(self).__name__
        return f"torch::autograd::{name}" if name == "CopyBackwards" else name  # a C++ node in PyTorch

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    @property
    def next_functions(self):
        return tuple((grad_fn_of(n) if not n.is_leaf else (AccumulateGrad(n) if n.requires_grad else None), 0)
                     for n in self._node.inputs)


class AccumulateGrad:
    """The end of a gradient path: a leaf that requires grad."""

    def __init__(self, node):
        self.variable_shape = node.shape

    def __repr__(self):
        return f"<AccumulateGrad object at {id(self):#x}>"


def grad_fn_of(node: Node):
    if node.is_leaf:
        return None
    if node.grad_fn_object is None:
        name = node.op.backward_name(node.inputs, node.attrs)
        cls = _backward_classes.get(name)
        if cls is None:
            cls = _backward_classes[name] = type(name, (BackwardFunction,), {"__slots__": ()})
        node.grad_fn_object = cls(node)
    return node.grad_fn_object
