"""Kinds: what a node computes, up to the arrays it is given, interned when it is recorded.

A node's *kind* stands for its computation as a function of its *arguments* (``node.args``:
the leaves that had values when they were used; ``symgrad.nodes.combine`` works them out).
Kinds are interned, so equal structures are one object, compared by identity: two roots of
the same kind whose arguments repeat at the same positions compute the same function of
them, and ``backward`` finds its compiled program from the root's kind without walking the
graph (``symgrad.replay``).  Interning also makes recording cheaper: a kind seen before knows
its shape, dtype and ``requires_grad``, so they are not inferred again.
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
    """The kind for ``key``, made if it is new."""
    kind = _kinds.get(key)
    if kind is None:
        if len(_kinds) >= MAX_KINDS:  # forgetting kinds only makes later structures new ones
            _kinds.clear()
        kind = _kinds[key] = Kind(shape, dtype, requires_grad)
    return kind


def array(shape, dtype, requires_grad) -> Kind:
    """The kind of a leaf holding an array: all it says is the array's type."""
    return intern((shape, dtype, requires_grad), shape, dtype, requires_grad)


def constant(value, shape, dtype) -> Kind:
    """The kind of a constant: its value (with the sign of a zero) is part of the structure."""
    return intern(("constant", *exactly(value), shape, dtype), shape, dtype, False)


def exactly(value) -> tuple:
    """``value`` with what ``==`` ignores: ``0.0 == -0.0`` and ``1 == 1.0 == True``."""
    return value, value.__class__, math.copysign(1.0, value) if value.__class__ is float else 0
