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

from symgrad import engine
from symgrad.autodiff import reverse_mode
from symgrad.grad_mode import is_grad_enabled
from symgrad.nodes import CONST, LEAF, Node
from symgrad.ops.registry import Op
from symgrad.tracing import Walk


def _infer(nodes, root, target, seeded):
    return target.shape, target.dtype


def _build(p, node, *args):
    """Lower ``root``'s graph again from this node's inputs, then reverse mode to ``target``."""
    root, target, seeded = node.attrs
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


GRADIENT = Op("gradient", "GradientBackward", _infer, _build, saves=True)


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
    inputs = [node for node, entry in zip(walk.order, walk.entries) if entry[0] is None]
    if seed is not None:
        inputs.append(seed)
    requires_grad = is_grad_enabled() and any(n.requires_grad for n in inputs)
    return Node(GRADIENT, tuple(inputs), (root, target, seed is not None), target.shape, target.dtype,
                requires_grad, None, None, None, None)
