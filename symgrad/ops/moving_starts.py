"""The starts of a basic indexing that a program may take as int inputs: each integer, and each slice
of step 1 narrower than its axis.  A batch sliced at a moving offset (``X[i:i + 32]``), or a one-hot
written at a moving position (``x[0][letter] = 1``), is then one program bound to each start
(symgrad.engine), not one program compiled per start.

An op declares them through ``Op.starts``: ``SpecStarts`` for an op whose first attribute is the
indexing's spec (``x[key]``, ``x[key] = v``), ``StepStarts`` for an op whose attributes are a view's
step (the view made again from its base, the base with the view written back).
"""
from __future__ import annotations

from symgrad.nodes import Node


def _erased(spec, shape) -> tuple:
    """(``spec`` with its moving starts erased, their values)."""
    erased, values, d = [], [], 0
    for item in spec:
        if item[0] == 0:
            erased.append((0, None))
            values.append(item[1])
        elif item[0] == 1 and item[3] == 1 and 0 < item[2] - item[1] < shape[d]:
            erased.append((1, None, item[2] - item[1], 1))
            values.append(item[1])
        else:
            erased.append(item)
        d += item[0] != 2
    return tuple(erased), tuple(values)


def _placed(spec, shape, starts) -> tuple:
    """``spec`` with ``starts`` (int inputs) in place of its moving starts: an index's start an
    input is item kind 4, a slice's kind 3 (its width kept)."""
    starts, placed = iter(starts), []
    for item, erased in zip(spec, _erased(spec, shape)[0]):
        placed.append(item if erased is item else (4, next(starts)) if item[0] == 0 else (3, next(starts), erased[2]))
    return tuple(placed)


class SpecStarts:
    """An op whose ``attrs[0]`` is a basic indexing spec of its first input."""

    @staticmethod
    def erase(attrs, shape):
        """(``attrs`` with the starts erased, their values), or None when it has none; ``shape``:
        the indexed tensor's."""
        erased, values = _erased(attrs[0], shape)
        return ((erased, *attrs[1:]), values) if values else None

    @staticmethod
    def placed(attrs, shape, starts) -> tuple:
        return (_placed(attrs[0], shape, starts), *attrs[1:])

    @classmethod
    def build(cls, p, node, *args):
        """The op built with ``args[-1]`` (the starts' int inputs) in the spec: through a stand-in
        node with those attributes, so the op's own build serves both."""
        *inputs, starts = args
        attrs = cls.placed(node.attrs, node.inputs[0].shape, starts)
        return node.op.build(p, Node(node.op, node.inputs, attrs, node.shape, node.dtype, False, None, None), *inputs)


class StepStarts(SpecStarts):
    """An op whose ``attrs`` are a view's step ``(op, attrs)`` on its first input: the step's
    indexing starts, if it has any."""

    @staticmethod
    def erase(attrs, shape):
        op, step = attrs
        moving = op.starts.erase(step, shape) if op.starts is not None else None
        return ((op, moving[0]), moving[1]) if moving else None

    @staticmethod
    def placed(attrs, shape, starts) -> tuple:
        op, step = attrs
        return op, op.starts.placed(step, shape, starts)
