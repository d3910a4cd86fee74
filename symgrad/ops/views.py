"""The two ops behind shared storage (symgrad.storage): a view made again from its base, and the base
with a view's region written back.

A view op (reshape, permute, basic indexing, a piece of split, diagonal, ...) is a step: the op and
its attributes.  After an in-place write, PyTorch's base has the backward ``CopySlices`` and its
views ``AsStridedBackward0``; these two ops carry a step as their attributes, so each stays one
node whose form is the step's own op, or its inverse, built in the IR.

What a user sees of the layout follows from the steps too: ``is_contiguous`` (where a view's
elements sit in its storage, symgrad.storage.in_order), ``contiguous`` (a copy when they are not in
order) and ``t_``, ``squeeze_``, ``unsqueeze_``, ``transpose_`` (a tensor laid out again in place,
symgrad.storage.relaid).
"""
from __future__ import annotations

import sympy as sp

from symgrad.grad_mode import _state as _grad_state
from symgrad.ir import index_shape
from symgrad.ir import indexing as IX
from symgrad.ir.functions import equal, select
from symgrad.nodes import LEAF, Node, lazy_leaf
from symgrad.ops.moving_starts import StepStarts
from symgrad.ops.registry import Names, Op
from symgrad.ops.shape import (CLONE, RESHAPE_INPLACE, T_INPLACE, TRANSPOSE_INPLACE, _piece_spec, clone, squeezed,
                                swapped, unsqueezed_shape, window_spec)
from symgrad.storage import in_order, mark, relaid, root_of, storage_of
from symgrad.tensor import record


def _like(node: Node, step) -> Node:
    """A stand-in for the node the step's op would have recorded (its build reads attrs, shape, inputs)."""
    op, attrs = step
    return Node(op, node.inputs, attrs, node.shape, node.dtype, False, None, None)


def _build_view(p, node, base):
    op, _ = node.attrs
    return op.build(p, _like(node, node.attrs), base)


def _infer_view(nodes, op, attrs):
    return op.infer(nodes, *attrs)


VIEW_OF = Op("view_of", "AsStridedBackward0", _infer_view, _build_view, saves=False, starts=StepStarts)
# the same, for a tensor laid out again in place (``t_()``) whose storage was written through another
# alias: PyTorch's tensor is no view but the base, written through a view of it
RELAID_WRITTEN = Op("relaid_written", "CopySlices", _infer_view, _build_view, saves=False, starts=StepStarts)


def _diagonal_set(p, old, new, offset, axis1, axis2):
    """``old`` with diagonal ``offset`` of ``axis1``, ``axis2`` replaced by ``new``."""
    shape, dtype = p.shape_of(old), p.dtype_of(old)
    rank, others = len(shape), [d for d in range(len(shape)) if d not in (axis1, axis2)]
    perm = [rank - 2 if d == axis1 else rank - 1 if d == axis2 else others.index(d) for d in range(rank)]
    n, m = sp.Integer(shape[axis1]), sp.Integer(shape[axis2])

    def placed(values):
        embed = IX.DiagEmbed(values, sp.Integer(offset), n, m)
        return p.permute(p.assign(embed, embed.shape(p.shape_of), dtype, "diag_embed"), perm)

    ones = p.materialize(sp.S.One, p.shape_of(new), dtype)
    on_diagonal = equal(placed(ones), sp.S.One)
    return p.assign(select(on_diagonal, placed(new), old), shape, dtype, "diagonal_set")


def _windows_set(p, old, new, dim, size, step):
    """``old`` with the elements of ``unfold``'s windows replaced by ``new`` (one strided slice per
    position in the window; where windows overlap, the later position's value is kept)."""
    shape, view_shape = p.shape_of(old), p.shape_of(new)
    if not shape or not size:
        return p.reshape(new, shape) if size else old
    count = view_shape[dim]
    for j in range(size):
        piece = p.index(new, tuple((1, 0, n, 1) for n in view_shape[:-1]) + ((1, j, j + 1, 1),))
        old = IX.index_set(p, old, p.reshape(piece, view_shape[:-1]), window_spec(shape, dim, count, step, j))
    return old


def _build_write_back(p, node, old, new):
    """The base (``old``) with the view's values replaced by ``new``."""
    op, attrs = node.attrs
    view_shape = op.infer(node.inputs[:1], *attrs)[0]
    new = p.materialize(new, view_shape, node.dtype.name)
    if op.name == "expand":  # one copy of each element: a write through elements that share memory gave
        # every copy the same value (``inplace.check_writable``)
        lead = len(view_shape) - len(node.shape)
        spec = [(1, 0, 1 if i < lead or node.shape[i - lead] == 1 else n, 1) for i, n in enumerate(view_shape)]
        if any(item[2] != n for item, n in zip(spec, view_shape)):
            new = p.index(new, spec)
        return p.reshape(new, node.shape)
    if op.name in ("reshape", "reshape_alias", "unsqueeze", "squeeze", "reshape_"):
        return p.reshape(new, node.shape)
    if op.name in ("permute", "transpose", "t", "t_", "transpose_"):
        perm = attrs[0]
        return p.permute(new, [perm.index(d) for d in range(len(perm))])
    if op.name == "index":
        return IX.index_set(p, old, new, attrs[0])
    if op.name == "piece":
        dim, sizes, piece, _ = attrs
        spec = _piece_spec(node.shape, dim, sizes, piece)
        return IX.index_set(p, old, p.reshape(new, index_shape(node.shape, spec)), spec)
    if op.name == "diagonal":
        return _diagonal_set(p, old, new, *attrs[:3])
    if op.name == "windows":
        return _windows_set(p, old, new, *attrs)
    raise AssertionError(f"no write-back for the view op {op.name}")


WRITE_BACK = Op("write_back", "CopySlices", lambda nodes, op, attrs: (nodes[0].shape, nodes[0].dtype),
                _build_write_back, saves=False, starts=StepStarts)


# ------------------------------------------------------------------ layout


@CLONE.publish(Names(method=("is_contiguous",)))
def is_contiguous(input, memory_format=None) -> bool:
    """Whether the elements sit in their storage in order, one after another (a transpose, an expand or
    a step slice does not; a fresh tensor, a narrow of the first dim and a result of any op do)."""
    return in_order(input)


@CLONE.publish(Names(method=("contiguous",)))
def contiguous(input, memory_format=None):
    """The tensor itself when it is contiguous, else a copy laid out in order (``CloneBackward0``)."""
    return input if is_contiguous(input) else clone(input)


@T_INPLACE.publish(Names(method=("t_",)))
def t_(input):
    """``t()`` in place: the tensor keeps its identity and its storage (its views still see its
    writes); its version counts the change, as PyTorch's does."""
    if input.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return _relaid_in_place(input, T_INPLACE, (tuple(reversed(range(input.ndim))),))


@RESHAPE_INPLACE.publish(Names(method=("squeeze_",)))
def squeeze_(input, dim=None):
    kept, given = squeezed(input, dim)
    variant = 3 if given is None else 4 if isinstance(given, int) else 5
    return _relaid_in_place(input, RESHAPE_INPLACE, (kept, f"SqueezeBackward{variant}"))


@RESHAPE_INPLACE.publish(Names(method=("unsqueeze_",)))
def unsqueeze_(input, dim: int):
    return _relaid_in_place(input, RESHAPE_INPLACE, (unsqueezed_shape(input, dim), "UnsqueezeBackward1"))


@TRANSPOSE_INPLACE.publish(Names(method=("transpose_", "swapaxes_", "swapdims_")))
def transpose_(input, dim0: int, dim1: int):
    return _relaid_in_place(input, TRANSPOSE_INPLACE, (swapped(input, dim0, dim1),))


def _relaid_in_place(input, op, attrs):
    """``input`` seen through the view ``op``, in place: it keeps its identity and its storage (its
    views still see its writes); its version counts the change, as PyTorch's does."""
    node, grad = input._node, _grad_state.enabled
    root = root_of(input)
    if grad and node.requires_grad and node.op is LEAF:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if grad and root is not None and root._node.requires_grad and root._node.op is LEAF:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    cycle = _grad_state.cycle
    if cycle is not None and cycle.replaying:  # a change of layout is no traced write: the step runs unreplayed
        cycle.fall_back()
        cycle = _grad_state.cycle
    if cycle is not None:
        cycle.broken = True
    new = record(op, (node,), attrs)
    if not grad and node.requires_grad and node.op is LEAF:  # a parameter transposed under no_grad stays one
        new = lazy_leaf(new, requires_grad=True)
    storage = storage_of(input)
    relaid(input, (op, attrs))
    mark(storage, node, new)
    input._rebind(new)
    storage.version += 1
    return input
