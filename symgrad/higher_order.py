"""``create_graph=True``: a gradient that is itself a node of the graph, so it can be differentiated.

No tape of tapes: the gradient of ``root`` w.r.t. ``target`` is one node whose inputs are the
inputs of ``root``'s graph (its leaves and the values it was cut at).  Lowering the node lowers
that graph again, from those inputs, into whatever program is being built, and runs reverse mode
there; the result is ordinary SSA assignments of that program.  Differentiating a program that
holds them is reverse mode again, over the same expressions, so the k-th derivative of an N-node
graph is O(k N) assignments, never an expanded tree.
"""
from __future__ import annotations

import sympy as sp

from symgrad import engine, storage
from symgrad.autodiff import reverse_mode
from symgrad.grad_mode import is_grad_enabled
from symgrad.ir import Program
from symgrad.nodes import CONST, LEAF, Node, lazy_leaf
from symgrad.ops.registry import Op
from symgrad.tracing import Walk


class Derivative:
    """What a gradient node differentiates, compared by structure (the walk of ``root``'s graph and
    the positions of ``root`` and ``target`` in it): a loop that makes the same gradient every step
    finds its compiled program, and any of the equal instances lowers to that program."""

    __slots__ = ("root", "target", "key", "hash", "read_again", "history")

    def __init__(self, root: Node, target: Node, walk: Walk, read_again=(), history=()):
        """``read_again``: what a second backward through the gradient unpacks; ``history``: the nodes
        of the graph it goes through (symgrad.storage.check_saved refuses it where one was written)."""
        self.root, self.target, self.read_again, self.history = root, target, read_again, history
        self.key = (tuple(walk.entries), walk.index[root], walk.index.get(target, -1))
        self.hash = hash(self.key)

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        return self is other or (isinstance(other, Derivative) and self.hash == other.hash and self.key == other.key)


def _infer(nodes, derivative, seeded):
    return derivative.target.shape, derivative.target.dtype


def _build(p, node, *args):
    """Lower ``root``'s graph again from this node's inputs, then reverse mode to ``target``."""
    derivative, seeded = node.attrs
    root, target = derivative.root, derivative.target
    walk = Walk()
    position = walk.add(root, True)
    seed = args[-1] if seeded else sp.S.One
    given = [p.assign(a, i.shape, i.dtype.name, "x", fold=False) if not isinstance(a, sp.Symbol) else a
             for a, i in zip(args[:-1] if seeded else args, node.inputs)]
    if len(walk.inputs) != len(given):
        raise AssertionError("a gradient's graph changed its inputs since it was recorded")
    exprs = walk.lower(p, given=given)
    if target not in walk.index:
        return sp.S.Zero
    wrt = exprs[walk.index[target]]
    if not isinstance(wrt, sp.Symbol):  # a target folded to a number: nothing depends on it
        return sp.S.Zero
    (gradient,) = reverse_mode(p, exprs[position], seed, [wrt])
    return gradient


# The node PyTorch's backward of the op that uses the target ends with (its create_graph gradient's
# grad_fn), for the common ops whose backward formula reads their input.
_LAST_BACKWARD = {"pow": "MulBackward0", "mul": "MulBackward0", "exp": "MulBackward0", "sin": "MulBackward0",
                  "cos": "MulBackward0", "abs": "MulBackward0", "log": "DivBackward0", "sqrt": "DivBackward0",
                  "tanh": "TanhBackwardBackward0", "sigmoid": "SigmoidBackwardBackward0",
                  "relu": "ThresholdBackwardBackward0", "softplus": "SoftplusBackwardBackward0"}


def _backward_name(nodes, derivative, seeded) -> str:
    """PyTorch's grad_fn name for this gradient where it is known: ``AddBackward0`` for a target used
    twice (two contributions added), else by the op that uses it; ``GradientBackward`` otherwise."""
    walk = Walk()
    walk.add(derivative.root, True)
    uses = [(n, k) for n in walk.order if walk.entries[walk.index[n]][0] is not None
            for k, i in enumerate(n.inputs) if i is derivative.target]
    if len(uses) > 1:
        return "AddBackward0"
    if uses:
        node, position = uses[0]
        if node.op.name == "div":
            return "DivBackward0" if position == 0 else "MulBackward0"
        if node.op.name == "custom_function":  # the last op of the user's backward
            return node.attrs[0].gradient_name(position)
        return _LAST_BACKWARD.get(node.op.name, "GradientBackward")
    return "GradientBackward"


GRADIENT = Op("gradient", _backward_name, _infer, _build, saves=True, keeps_history=True)


def gradient_node(root: Node, target: Node, seed: Node | None) -> Node:
    """The differentiable gradient of ``root`` (weighted by ``seed``) w.r.t. ``target``.

    Values the graph is still waiting for (pending leaves, results without history) are computed
    first: the node's inputs must be the inputs of the same walk whenever it is lowered again."""
    walk = Walk()
    walk.add(root, True)
    waiting = [n for n, e in zip(walk.order, walk.entries)
               if e[0] is not None and n.value is None and (n.op is LEAF or not n.requires_grad) and n.op is not CONST]
    if waiting:
        engine.realize(waiting)
        walk = Walk()
        walk.add(root, True)
    connected, read_again = _history(walk, root, target, seed)
    inputs = [node for node, entry in zip(walk.order, walk.entries) if entry[0] is None]
    if seed is not None:
        inputs.append(seed)
    inputs = [node if node in connected or not node.requires_grad else lazy_leaf(node) for node in inputs]
    requires_grad = is_grad_enabled() and any(n.requires_grad for n in inputs)
    history = [n for n, entry in zip(walk.order, walk.entries)
               if n in connected and entry[0] is not None and n.requires_grad]
    node = Node(GRADIENT, tuple(inputs), (Derivative(root, target, walk, read_again, history), seed is not None),
                target.shape, target.dtype, requires_grad, None, None, None, None)
    _refuse_now(node)
    return node


_BUILT: set = set()  # the structures of gradients lowered once already (``_refuse_now``)


def _refuse_now(node: Node) -> None:
    """Raise here what lowering the gradient will raise (an op on the way whose backward PyTorch
    refuses: ``addr`` of vectors of two dtypes, ``vander``), at the call, as PyTorch's backward
    raises; the values are computed later.  Once per structure: a loop makes the same gradients."""
    derivative, seeded = node.attrs
    key = (derivative.key, seeded)  # (not the Derivative: it holds the graph)
    if key in _BUILT:
        return
    p = Program("refusals")
    _build(p, node, *[p.input(i.shape, i.dtype.name) for i in node.inputs])
    if len(_BUILT) > 1024:
        _BUILT.clear()
    _BUILT.add(key)


def _history(walk: Walk, root: Node, target: Node, seed: Node | None) -> tuple:
    """The inputs (and the seed) that PyTorch's gradient toward ``target`` is connected to: the history
    of the tensors that require grad which its backwards read on the way from the root (an input or a
    result of theirs), and of the seed, down to the first backward that drops the cotangent (``sign``'s
    zeros).  Where there are none (``x * 2``, ``x.sum()``, a custom Function that saves nothing) the
    gradient is a constant, whatever it is mathematically, and a second derivative through it raises,
    as PyTorch's does; an input on no such way gets no ``.grad`` from it.  Also what a second backward
    through the gradient unpacks again (``storage.read_again``)."""
    reached, on_the_way = {target}, []
    for node, entry in zip(walk.order, walk.entries):  # inputs before the nodes that use them
        if entry[0] is None or not node.requires_grad:
            continue
        ways = [k for k, i in enumerate(node.inputs) if i in reached]
        if ways:
            reached.add(node)
            on_the_way.append((node, ways))
    read = {root: {seed} if seed is not None and seed.requires_grad else set()}  # what each cotangent's history holds
    read_again = []
    for node, ways in reversed(on_the_way):  # from the root down
        passed = read.get(node, set()) if node.op.name not in storage.DROPS_THE_COTANGENT else set()
        for k in ways:
            read.setdefault(node.inputs[k], set()).update(passed, storage.gradient_reads(node, k))
            read_again += storage.read_again(node, k, bool(passed))
    needed = set(read.get(target, ()))
    for node, entry in zip(reversed(walk.order), reversed(walk.entries)):  # and their own history
        if node in needed and entry[0] is not None:
            needed.update(node.inputs)
    return needed, read_again
