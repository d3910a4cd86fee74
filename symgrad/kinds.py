"""Kinds: what a node computes, up to the arrays it is given, named when it is recorded.

A node's *kind* stands for its computation as a function of its *arguments* (``node.args``:
the leaves that had values when they were used), and ``node.pending`` lists the leaves inside
it whose values are still to be computed.  Kinds are interned, so equal structures are one
object: two roots of the same kind whose arguments repeat at the same positions compute the
same function of them, and ``backward`` finds its compiled program from the root's kind
without walking the graph (``engine.replay``).  Interning also makes recording cheaper: a
kind seen before knows its shape, dtype and ``requires_grad``, so they are not inferred again.

Inputs that share their argument tuple (``sin(h) * h``) share it in the result instead of
repeating it, so a chain over one array keeps one argument.  A node with more than
``MAX_ARGS`` arguments (a graph that reuses its values exponentially often) has no kind, and
neither has anything computed from it: ``backward`` then walks the graph.
"""
from __future__ import annotations

import math

MAX_ARGS = 64
MAX_KINDS = 1 << 17


class Kind:
    """One interned structure, with the shape, dtype and requires_grad of its result."""

    __slots__ = ("shape", "dtype", "requires_grad")

    def __init__(self, shape, dtype, requires_grad):
        self.shape, self.dtype, self.requires_grad = shape, dtype, requires_grad


_kinds: dict = {}


def known(key):
    """The kind interned for ``key``, or None."""
    return _kinds.get(key)


def intern(key, shape, dtype, requires_grad) -> Kind:
    if len(_kinds) >= MAX_KINDS:  # forgetting kinds only makes later structures new ones
        _kinds.clear()
    kind = _kinds[key] = Kind(shape, dtype, requires_grad)
    return kind


def array(shape, dtype, requires_grad) -> Kind:
    """The kind of a leaf holding an array: all it says is the array's type."""
    key = ("array", shape, dtype, requires_grad)
    return _kinds.get(key) or intern(key, shape, dtype, requires_grad)


def constant(value, shape, dtype) -> Kind:
    """The kind of a constant: its value (with the sign of a zero) is part of the structure."""
    key = ("constant", value, math.copysign(1.0, value) if value.__class__ is float else 0, shape, dtype)
    return _kinds.get(key) or intern(key, shape, dtype, False)


def as_input(node):
    """The (args, pending) a node brings to what uses it.

    A leaf holding an array is its own argument, and a pending leaf is one of its own pending
    leaves; nodes do not store themselves (no reference cycles: graphs are freed by counting).
    """
    args = node.args
    if args is None:
        return (node,), ()
    if node.value is None and node.op.name == "leaf":
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
        if len(args) > MAX_ARGS or len(pending) > MAX_ARGS:
            return None, None, None
        return (op, attrs, mode, a.kind, b.kind, shared_args, shared_pending), args, pending
    return _combine_many(op, nodes, attrs, mode)


def _combine_many(op, nodes, attrs, mode):
    args, pending, layout, seen = (), (), [], []
    for i, n in enumerate(nodes):
        if n.kind is None:
            return None, None, None
        n_args, n_pending = as_input(n)
        same_args = next((j for j, (a, _) in enumerate(seen) if a is n_args), -1)
        same_pending = next((j for j, (_, p) in enumerate(seen) if p is n_pending), -1)
        seen.append((n_args, n_pending))
        args = args if same_args >= 0 else args + n_args
        pending = pending if same_pending >= 0 else pending + n_pending
        layout.append((n.kind, same_args, same_pending))
    if len(args) > MAX_ARGS or len(pending) > MAX_ARGS:
        return None, None, None
    return (op, attrs, mode, tuple(layout)), args, pending
