"""The recorded graph: light Python nodes, one per operation, and PyTorch's grad_fn view of them.

Recording an op must cost a few microseconds, so a node holds no SymPy: only its op, its
input nodes, its attributes, shape, dtype and whether it requires grad, and its interned
structural kind (symgrad.kinds) with the arrays and pending leaves that kind is a function of.
SymPy is built from these nodes only when a structure is compiled for the first time.

A node's ``value`` is its array once computed.  A *leaf* node stops gradients; its value is
either an array or, after an in-place update or a ``detach`` of something not yet computed,
the node it is computed from (its single input), evaluated lazily and then dropped.

Each node remembers how many programs had run when it was recorded (``born``): a result without
history that outlives the next program uncomputed is computed when it is used again
(``outlived``), so values carried from step to step never drag earlier steps along.
"""
from __future__ import annotations

import contextlib

import weakref

from symgrad import dtypes, kinds
from symgrad.ir import ieee
from symgrad.ops.registry import Op


class Node:
    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "requires_grad", "value", "owner",
                 "freed", "grad_fn_object", "retains_grad", "kind", "args", "pending", "born", "unkinded",
                 "written", "__weakref__")

    def __init__(self, op: Op, inputs: tuple, attrs: tuple, shape: tuple, dtype, requires_grad: bool,
                 value=None, kind=False, args=None, pending=None):
        """``kind``, ``args`` and ``pending`` (see symgrad.kinds) are worked out here unless the
        caller (``apply``, which looks the kind up first) passes them."""
        self.op, self.inputs, self.attrs, self.shape, self.dtype = op, inputs, attrs, shape, dtype
        self.requires_grad, self.value = requires_grad, value
        self.owner = self.grad_fn_object = None  # owner: weakref to the Tensor whose .grad this feeds
        self.freed = self.retains_grad = False
        self.written = None  # (storage, version, tensor) once an in-place write replaced these values
        self.born = _programs_run
        if kind is False:
            kind, args, pending = _describe(self)
        self.kind, self.args, self.pending = kind, args, pending

    def computed(self, value) -> None:
        """Take the value a program computed; a leaf, or a result without history, then forgets
        how (chains never grow) and becomes an argument of whatever uses it next."""
        self.value = value
        if self.op is LEAF or not (self.requires_grad or self.op is CONST):
            self.inputs = ()
            self.kind, self.args, self.pending = kinds.array(self.shape, self.dtype, self.requires_grad), None, ()

    @property
    def is_leaf(self) -> bool:
        return self.op is LEAF or not self.requires_grad


_programs_run = 0  # programs that have computed node values so far


def program_ran() -> None:
    """A program has computed node values: what was recorded before belongs to an earlier step."""
    global _programs_run
    _programs_run += 1


# Results without history of a graph with history (``out.argmax(1)``, and results of those) recorded since
# the last backward, which computes those someone still holds pending (``engine.compute_kept``): id -> weak ref
aside: dict = {}
MAX_ASIDE = 4096  # more, without a backward (an evaluation loop): the dead ones are dropped, then all


def set_aside(node: Node, inputs: tuple) -> None:
    """Remember ``node``, a result without history, if one of its ``inputs`` has history or was
    remembered."""
    for i in inputs:
        if i.requires_grad or _is_aside(i):
            break
    else:
        return
    if len(aside) >= MAX_ASIDE:
        for key, ref in list(aside.items()):
            if ref() is None:
                del aside[key]
        if len(aside) >= MAX_ASIDE:
            aside.clear()
    aside.pop(id(node), None)  # a dead node's id keeps its place in the dict: the new node goes last
    aside[id(node)] = weakref.ref(node)


def _is_aside(node: Node) -> bool:
    """Whether ``node`` itself was set aside (an id outlives its node: a new node can have a
    dead one's)."""
    ref = aside.get(id(node))
    return ref is not None and ref() is node


def not_aside(node: Node) -> None:
    """``node`` became a tensor's values (a parameter's update): it is computed when that tensor
    is next used, inside that program."""
    aside.pop(id(node), None)


def taken_aside() -> list:
    """The results set aside since the last call that are alive and still pending; forgotten here."""
    nodes = [ref() for ref in aside.values()]
    aside.clear()
    return [node for node in nodes if node is not None and node.value is None]


def outlived(node: Node) -> bool:
    """Whether ``node`` is a result without history (computed under ``no_grad``, or a leaf
    updated in place) that a program has run past without storing it.

    A loop that carries such a result to its next step (a hand-written momentum buffer, a
    running total) would otherwise compute every earlier step again inside each new program:
    the graph, and the programs, grow step by step.  PyTorch has computed it long since; used
    again, it is computed now.  A leaf filled with a constant never grows and waits.
    """
    if node.value is not None or node.born == _programs_run or node.op is CONST:
        return False
    if node.op is LEAF:
        return node.inputs[0].op is not CONST
    return not node.requires_grad


def _describe(node: Node):
    """(kind, args, pending) of a node made directly rather than by ``apply``."""
    if node.op is LEAF:
        if node.value is not None:
            return kinds.array(node.shape, node.dtype, node.requires_grad), None, ()
        # pending: computed from its source inside the next program
        key, args, pending = combine(LEAF, node.inputs, (), node.requires_grad)
        if key is None or len(pending) >= kinds.MAX_ARGS:
            return None, None, None
        return kinds.intern(key, node.shape, node.dtype, node.requires_grad), args, pending
    if node.op is CONST:
        return kinds.constant(node.attrs[0], node.shape, node.dtype), (), ()
    key, args, pending = combine(node.op, node.inputs, node.attrs, ("requires_grad", node.requires_grad))
    if key is None:
        return None, None, None
    return kinds.intern(key, node.shape, node.dtype, node.requires_grad), args, pending


# ----------------------------------------------------------------- kinds of nodes
#
# A node's ``args`` are the leaves with values it depends on, in order, and ``pending`` the
# leaves inside it whose values are still to be computed (updated in place under no_grad).
# Inputs that share their argument tuple (``sin(h) * h``) share it in the result instead of
# repeating it, so a chain over one array keeps one argument.  A node with more than
# ``kinds.MAX_ARGS`` of either (a graph that reuses values exponentially often) has no kind,
# and neither has anything computed from it: ``backward`` then walks the graph.

def as_input(node):
    """The (args, pending) a node brings to what uses it.

    A leaf holding an array is its own argument, and a pending leaf is one of its own pending
    leaves; nodes do not store themselves (no reference cycles: graphs are freed by counting).
    """
    args = node.args
    if args is None:
        return (node,), ()
    if node.value is None and node.op is LEAF:
        return args, node.pending + (node,)
    return args, node.pending


def combine(op, nodes, attrs, mode):
    """(key, args, pending) of ``op`` on ``nodes``; the key is None when there is no kind.

    ``mode`` is whatever else decides the result (grad mode, or an explicit requires_grad).
    """
    if len(nodes) == 1:
        (a,) = nodes
        if a.kind is None:
            return None, None, None
        return ((op, attrs, mode, a.kind), *as_input(a))
    if len(nodes) == 2:
        a, b = nodes
        if a.kind is None or b.kind is None:
            return None, None, None
        if a is b:
            args, pending = as_input(a)
            return (op, attrs, mode, a.kind, a.kind, True, True), args, pending
        a_args, a_pending = as_input(a)
        b_args, b_pending = as_input(b)
        shared_args, shared_pending = a_args is b_args, a_pending is b_pending
        args = a_args if shared_args or not b_args else a_args + b_args
        pending = a_pending if shared_pending or not b_pending else a_pending + b_pending
        if len(args) > kinds.MAX_ARGS or len(pending) > kinds.MAX_ARGS:
            return None, None, None
        return (op, attrs, mode, a.kind, b.kind, shared_args, shared_pending), args, pending
    return _combine_many(op, nodes, attrs, mode)


def _combine_many(op, nodes, attrs, mode):
    args, pending, layout = (), (), []
    seen_args, seen_pending = {}, {}  # id of an input's tuple -> (first input that brought it, the tuple)
    for i, n in enumerate(nodes):
        if n.kind is None:
            return None, None, None
        n_args, n_pending = as_input(n)
        same_args = seen_args.setdefault(id(n_args), (i, n_args))[0]  # the tuple is kept: ids stay unique
        same_pending = seen_pending.setdefault(id(n_pending), (i, n_pending))[0]
        if same_args == i:
            args += n_args
        if same_pending == i:
            pending += n_pending
        layout.append((n.kind, same_args, same_pending))
    if len(args) > kinds.MAX_ARGS or len(pending) > kinds.MAX_ARGS:
        return None, None, None
    return (op, attrs, mode, tuple(layout)), args, pending


def _no_infer(nodes, *attrs):
    raise AssertionError("leaf and constant nodes are made directly")


def _build_leaf(p, node, source):
    """A pending leaf is its source's value; one that requires grad is a target of its own."""
    return p.assign(source, node.shape, node.dtype.name, "leaf", fold=not node.requires_grad)


def _build_const(p, node):
    return ieee.constant(node.attrs[0])


LEAF = Op("leaf", None, _no_infer, _build_leaf, saves=False)
CONST = Op("const", None, _no_infer, _build_const, saves=False)


def leaf(value, dtype, requires_grad: bool = False, shape=None) -> Node:
    """A leaf holding an array (``shape`` is needed when it is a deferred result)."""
    shape = tuple(value.shape) if shape is None else shape
    return Node(LEAF, (), (), shape, dtype, requires_grad, value, kinds.array(shape, dtype, requires_grad), None, ())


def lazy_leaf(source: Node, requires_grad: bool = False) -> Node:
    """A leaf whose value is ``source``'s, computed when first needed; gradients stop here."""
    if source.value is not None:
        return Node(LEAF, (), (), source.shape, source.dtype, requires_grad, source.value)
    return Node(LEAF, (source,), (), source.shape, source.dtype, requires_grad)


@contextlib.contextmanager
def standing_for_inputs(leaves):
    """``leaves`` (a custom Function's detached arguments) require grad, their kinds too, while its
    backward is recorded on them and its graphs are kept (symgrad.autograd.function), as PyTorch's
    saved inputs do; then they are detached leaves again, to a user who kept one from the forward.
    The forward was recorded before: its results were not set aside as results without history."""
    for leaf in leaves:
        _relabel(leaf, True)
    try:
        yield
    finally:
        for leaf in leaves:
            _relabel(leaf, False)


def _relabel(leaf: Node, requires_grad: bool) -> None:
    leaf.requires_grad = requires_grad
    leaf.kind, leaf.args, leaf.pending = _describe(leaf)


def priority(node) -> int:
    """PyTorch's promotion priority: 0 for a Python number, 1 for a 0-dim tensor, 2 otherwise."""
    if not node.shape:
        return 0 if node.op is CONST else 1
    return 2


_constants: dict = {}


def constant(value, shape=(), dtype=None) -> Node:
    """A Python number (shape ``()``) or an array filled with it; baked into programs.

    Shared (up to a bound) per value, sign of zero, shape and dtype; NaNs are never equal, so new.
    """
    dtype = dtype or dtypes.default_for(value)
    value = bool(value) if dtype is dtypes.bool_ else int(value) if dtype.is_integer else float(value)
    shape = tuple(shape)
    key = (*kinds.exactly(value), shape, dtype)
    node = _constants.get(key)
    if node is None:
        node = Node(CONST, (), (value,), shape, dtype, False)
        if value == value and len(_constants) < 4096:
            _constants[key] = node
    return node


def own_constant(value: float, dtype) -> Node:
    """A Python float's constant node, shared with no other: a program that takes it as an input
    (symgrad.replaying's peeks) takes nothing else with it."""
    return Node(CONST, (), (float(value),), (), dtype, False)


_scalars: dict = {}
_default_float = dtypes._default_float  # set_default_dtype's setting, read on every scalar (the hot path)


def scalar(value) -> Node:
    """The constant node of a Python number, shared: ``lr * grad`` records no new constant per step.

    Float zeros (whose sign the key cannot tell) and NaNs (unequal to themselves) are not shared;
    an integer or bool zero is (``x > 0`` each step: a replayed step finds its constant here).
    """
    key = (value.__class__, value, _default_float[0])  # a float's dtype is the default one's
    node = _scalars.get(key)
    if node is None:
        node = constant(value)
        if value == value and (value != 0 or key[0] is int or key[0] is bool) and len(_scalars) < 4096:
            _scalars[key] = node
    return node


def is_zero_fill(node: Node) -> bool:
    """A leaf that ``zero_()`` left: adding to it is replacing it."""
    return node.op is LEAF and node.value is None and node.inputs[0].op is CONST and node.inputs[0].attrs[0] == 0


def owners_of(targets):
    """The tensors whose ``.grad`` the target nodes fill, each once; one target node of each
    (for its shape and dtype); and each target's owner number.  A tensor whose leaf was
    replaced between two uses (updated in place) owns two targets: their gradients add up."""
    numbers: dict = {}
    owners, owned, groups = [], [], []
    for target in targets:
        owner = target.owner()
        number = numbers.setdefault(id(owner), len(owners))
        if number == len(owners):
            owners.append(owner)
            owned.append(target)
        groups.append(number)
    return owners, owned, tuple(groups)


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
        shown = self._node.op.shown_inputs
        return _next_functions(self._node.inputs if shown is None else shown(self._node.inputs))


def _next_functions(inputs) -> tuple:
    return tuple((n.grad_fn() if n.__class__ is Folded else
                  grad_fn_of(n) if not n.is_leaf else AccumulateGrad(n) if n.requires_grad else None, 0)
                 for n in inputs)


class Folded:
    """A node PyTorch records that symgrad folds into its consumer (the ``TBackward0`` of the
    weight under ``nn.Linear``'s ``AddmmBackward0``), shown in ``next_functions`` as PyTorch shows it."""

    def __init__(self, name: str, inputs: tuple):
        self.name, self.inputs = name, inputs

    @property
    def requires_grad(self) -> bool:
        return any(n.requires_grad for n in self.inputs)

    def grad_fn(self):
        """PyTorch's node, or None where none of its inputs requires grad (PyTorch records none)."""
        if not self.requires_grad:
            return None
        cls = _folded_classes.get(self.name)
        if cls is None:
            cls = _folded_classes[self.name] = type(self.name, (FoldedBackward,), {})
        return cls(self.inputs)


_folded_classes: dict[str, type] = {}


class FoldedBackward:
    """What ``next_functions`` gives for a ``Folded`` node: its name, and its own inputs' functions."""

    def __init__(self, inputs: tuple):
        self.next_functions = _next_functions(inputs)

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"


class AccumulateGrad:
    """The end of a gradient path: a leaf that requires grad; ``variable`` is its tensor."""

    def __init__(self, node):
        self.variable = node.owner() if node.owner is not None else None
        self.next_functions = ()

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    def __repr__(self):
        return f"<AccumulateGrad object at {id(self):#x}>"


class RefusedHistory(RuntimeError):
    """Kept as a node's ``grad_fn_object`` where PyTorch refuses the node's history (a piece of split or
    unbind whose base was written); wherever that history would be used, its words are raised as
    PyTorch's ``RuntimeError`` (``check_history``)."""


def refuse_history(node: Node, message: str) -> None:
    """``node``, a view made again after its base was written where PyTorch then refuses its history:
    its ``grad_fn`` and any op recording history from it raise PyTorch's error (``message``).  Without a
    kind it reaches ``record``'s slow path, the one place that checks (symgrad.tensor)."""
    node.kind = None
    node.grad_fn_object = RefusedHistory(message)


def piece_refusal(piece_attrs) -> str:
    """Why a piece of split/unbind whose base was written has no history."""
    fn = piece_attrs[3].removesuffix("Backward0")
    return (f"Output {piece_attrs[2]} of {fn} is a view and its base or another view of its base has been modified "
            f"inplace. This view is the output of a function that returns multiple views. Such functions do not allow "
            f"the output views to be modified inplace. You should replace the inplace operation by an out-of-place one.")


NO_GRAD_VIEW_REBASED = (
    "A view was created in no_grad mode and its base or another view of its base has been modified inplace with grad "
    "mode enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
    "moving both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
    "tracked) or both outside (if you want the inplace to be tracked).")


def check_history(node: Node) -> None:
    """Raise PyTorch's error if ``node``'s history was refused (refuse_history)."""
    refusal = node.grad_fn_object
    if refusal.__class__ is RefusedHistory:
        raise RuntimeError(*refusal.args)  # PyTorch's class, not the marker's (random-programs fuzzer)


def grad_fn_of(node: Node):
    if node.is_leaf:
        return None
    check_history(node)
    if node.grad_fn_object is None:
        name = node.op.backward_name(node.inputs, node.attrs)
        if name is None:  # a placeholder with no backward of its own (a custom Function's grad_output)
            return None
        cls = _backward_classes.get(name)
        if cls is None:
            cls = _backward_classes[name] = type(name, (BackwardFunction,), {"__slots__": ()})
        node.grad_fn_object = cls(node)
    return node.grad_fn_object
