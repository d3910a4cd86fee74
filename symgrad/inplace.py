"""In-place operations: ``x += y``, ``x.mul_(2)``, ``x.zero_()``, ``x.copy_(y)``, ``x.data = y``.

A tensor is mutable only in which node it points at (symgrad.tensor): an in-place op records
its result out of place and moves the tensor to it.  Without history the new values replace the
old ones lazily; a tensor with history keeps its gradient path (``KEEP_HISTORY``).  Every write
goes through ``assign``, which counts it (the version counter) and shows it to every tensor that
shares the storage (symgrad.storage): up through the views it was made from, to the base, and
down again to the base's other views.
"""
from __future__ import annotations

from symgrad import dtypes
from symgrad.grad_mode import _state as _grad_state
from symgrad.grad_mode import is_grad_enabled, no_grad
from symgrad.kinds import exactly
from symgrad.nodes import (LEAF, NO_GRAD_VIEW_REBASED, Node, RefusedHistory, constant, lazy_leaf, not_aside,
                           piece_refusal, refuse_history)
from symgrad.ops.elementwise import FILL, KEEP_HISTORY
from symgrad.ops.shape import COPY_OVER, copy, expand, to_dtype
from symgrad.ops.views import RELAID_WRITTEN, VIEW_OF, WRITE_BACK
from symgrad.storage import (DATA, DETACH, laid_out_again, mark, mark_detached, note_detached, partly_shared,
                             storage_of, viewed)
from symgrad.tensor import Tensor, record


def _values(old: Node, values: Node) -> Node:
    """The node of a tensor that was ``old`` and takes ``values`` (without history): its own
    history, if any, stays."""
    if old.requires_grad and old.op is not LEAF:
        return Node(KEEP_HISTORY, (old, values), (), old.shape, old.dtype, True)
    return lazy_leaf(values, requires_grad=old.requires_grad)


def write_values(tensor: Tensor, values: Node) -> None:
    """``tensor`` takes ``values`` (computed without history); its own history, if any, stays."""
    old = tensor._node
    not_aside(values)
    if old.requires_grad and old.op is not LEAF:
        assign(tensor, Node(KEEP_HISTORY, (old, values), (), old.shape, old.dtype, True))
    else:
        assign(tensor, lazy_leaf(values, requires_grad=old.requires_grad))


def assign(tensor: Tensor, node: Node) -> None:
    """``tensor`` takes ``node``, its new values: the old ones are marked for the version counter,
    and the tensors sharing its storage see the write."""
    storage = tensor._storage or storage_of(tensor)
    mark(storage, tensor._node, node)
    if storage.detached:
        mark_detached(storage)
    tensor._rebind(node)
    if len(storage.members) > 1:
        written, recorded = _write_up(tensor)
        for member in storage.live():
            if member._view is None or id(member) in recorded:
                continue
            if not laid_out_again(member):
                _refresh(member, member is not tensor and id(member) not in written)
            elif member is not tensor and id(member) not in written:  # (written, it has its own node already)
                _rebase(member, bool(recorded))
    storage.version += 1


def _write_up(tensor: Tensor):
    """Write a view's new values into what it was made from, and so on up to the base.  Through a
    detach (or without grad mode) only values move.  The ids of the tensors written, and of those
    written with history (CopySlices): the others, views made again from their parents, take
    PyTorch's AsStridedBackward0 as a view whose base changed does."""
    written, recorded, child, history = set(), set(), tensor, _grad_state.enabled
    while child._view is not None:
        parent, step, _ = child._view
        old = parent._node
        if step in (DETACH, DATA):
            history = False
            new = _values(old, lazy_leaf(child._node))
        elif history:
            new = record(WRITE_BACK, (old, child._node), step)
            if new.requires_grad:
                recorded.add(id(parent))
            else:
                new = _values(old, new)
        else:
            with no_grad():
                new = _values(old, record(WRITE_BACK, (old, child._node), step))
        if step is not DATA:
            mark(parent._storage, old, new)
        parent._rebind(new)
        written.add(id(parent))
        child = parent
    return written, recorded


def _refresh(member: Tensor, replaced: bool) -> None:
    """A view made again from its parent's new node, in the grad mode it was made in; its old
    node is marked if it held the old values (not when it is the written tensor's new one)."""
    parent, step, made_with_grad = member._view
    old = member._node
    if step in (DETACH, DATA):
        new = _values(old, lazy_leaf(parent._node))
        if step is DETACH:
            note_detached(member._storage, new)
    else:
        refused = _refused(parent._node)
        # a view made without grad whose base now has history under grad mode: PyTorch's requires grad, and refuses
        # its history (as does a view made of it)
        rebased = (not made_with_grad and _grad_state.enabled and parent._node.requires_grad) or refused
        previous, _grad_state.enabled = _grad_state.enabled, made_with_grad and not refused
        try:
            new = record(VIEW_OF, (parent._node,), step)
        finally:
            _grad_state.enabled = previous
        if rebased:
            new = Node(VIEW_OF, (parent._node,), step, new.shape, new.dtype, True)
            refuse_history(new, refused or NO_GRAD_VIEW_REBASED)
        elif step[0].name == "piece" and new.requires_grad:
            refuse_history(new, piece_refusal(step[1]))
    if replaced:
        mark(member._storage, old, new)
    member._rebind(new)


def _rebase(member: Tensor, history: bool) -> None:
    """A base laid out again in place (``t_()``) whose storage was written through another alias:
    with ``history``, PyTorch's CopySlices; else its own history with the new values."""
    parent, step, _ = member._view
    old = member._node
    if history:
        new = record(RELAID_WRITTEN, (parent._node,), step)
    else:
        with no_grad():
            new = _values(old, record(VIEW_OF, (parent._node,), step))
    mark(member._storage, old, new)
    member._rebind(new)


def _refused(node: Node) -> str | None:
    """Why ``node``'s history is refused, if it is."""
    refusal = node.grad_fn_object
    return refusal.args[0] if refusal.__class__ is RefusedHistory else None


def check_writable(tensor: Tensor, name: str, alike: bool = False, brings_grad: bool = False) -> None:
    """PyTorch's refusals of an in-place write into an inference tensor or a view, made before
    anything is recorded (``brings_grad``: the values written have history).  A write that gives the copies of an element the same value (``alike``:
    ``fill_``, ``zero_``, ``x.copy_(x)``), without history, into a whole expanded view, whose
    elements share memory, goes through as PyTorch's does.  (Into a part of one, PyTorch writes the
    elements that part shares; symgrad refuses.)"""
    if tensor._inference and not _grad_state.inference:
        raise RuntimeError(f"Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
                           f"clone to get a normal tensor before doing inplace update.See "
                           f"https://github.com/pytorch/rfcs/pull/17 for more details. [{name}]")
    child, grad = tensor, _grad_state.enabled
    every_copy = alike and not (grad and tensor._node.requires_grad)  # written into every shared element
    while child._view is not None:
        parent, step, made_with_grad = child._view
        if step in (DETACH, DATA):  # history stops here, memory does not: only the overlap check goes on
            grad, child = False, parent
            continue
        op, attrs = step
        every_copy = every_copy and op.name not in ("index", "piece", "diagonal")
        if op.name == "expand" and not every_copy and tensor.numel() and any(  # nothing written, nothing shared
                n > 1 and (i < len(attrs[0]) - parent.ndim or parent.shape[i - len(attrs[0]) + parent.ndim] == 1)
                for i, n in enumerate(attrs[0])):
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                               "single memory location. Please clone() the tensor before performing the operation.")
        if grad and op.name == "piece" and child._node.requires_grad:
            fn = attrs[3].removesuffix("Backward0")
            raise RuntimeError(f"Output {attrs[2]} of {fn} is a view and is being modified inplace. This view is "
                               f"the output of a function that returns multiple views. Such functions do not allow "
                               f"the output views to be modified inplace. You should replace the inplace operation "
                               f"by an out-of-place one. [{name}]")
        if grad and not made_with_grad and (brings_grad or parent._node.requires_grad):
            raise RuntimeError(NO_GRAD_VIEW)
        child = parent
    if grad and child is not tensor and child._node.requires_grad and child._node.op is LEAF:
        raise RuntimeError(f"a view of a leaf Variable that requires grad is being used in an in-place operation. "
                           f"[{name} on shape {tuple(tensor.shape)}]")


OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
           "memory location. Please clone() the tensor before performing the operation.")


def refuse_overlap(tensor: Tensor, operands) -> None:
    """PyTorch's error for an input that shares part of the tensor an in-place op writes."""
    for other in operands:
        if isinstance(other, Tensor) and partly_shared(tensor, other):
            raise RuntimeError(OVERLAP)


NO_GRAD_VIEW = ("A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that "
                "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
                "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
                "tracked) or both outside (if you want the inplace to be tracked).")


def apply_inplace(tensor: Tensor, name: str, compute, operands=()) -> Tensor:
    """``tensor.add_(...)``, ``tensor += ...``: ``compute()`` records the result out of place, then
    ``tensor`` moves to it (cast back to its dtype; PyTorch's errors for a wider dtype or a shape
    that broadcasting changed, for a leaf that requires grad under grad mode, and for ``operands``
    that share some of its elements)."""
    cycle, result = _grad_state.cycle, None
    if cycle is not None and cycle.replaying:  # symgrad.replaying: checked against the trace first
        result = compute()
        if replayed_write(cycle, tensor, result):
            return tensor
        cycle = _grad_state.cycle  # fell back: the cycle recording the rest
    node = tensor._node
    if tensor._view is not None or tensor._inference:
        check_writable(tensor, name)
    if tensor._storage is not None:
        refuse_overlap(tensor, operands)
    if node.requires_grad and node.op is LEAF and _grad_state.enabled:
        raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place operation "
                           f"({name} on shape {tuple(node.shape)}, {node.dtype}); wrap it in "
                           f"torch.no_grad() to update it without recording.")
    if result is None:
        result = compute()
    result = result._node
    if result.requires_grad and tensor._view is not None and not node.requires_grad:
        check_writable(tensor, name, brings_grad=True)  # history into a view made under no_grad
    if result.dtype is not node.dtype:
        if result.dtype.category > node.dtype.category:
            raise RuntimeError(f"result type {dtypes.torch_name(result.dtype)} can't be cast to the desired output "
                               f"type {dtypes.torch_name(node.dtype)} [{name} on shape {tuple(node.shape)}]")
        result = to_dtype(Tensor(result), node.dtype)._node
    if result.shape != node.shape:
        raise RuntimeError(f"output with shape {list(node.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)} [{name}]")
    if result.requires_grad:
        assign(tensor, result)
        if cycle is not None:
            cycle.broken = True
    else:
        write_traced(tensor, result, cycle)
    return tensor


def fill_inplace(tensor: Tensor, value, name: str = "FillBackward2") -> Tensor:
    """``tensor.fill_(value)`` / ``zero_()``: the tensor becomes a constant, lazily.

    Under grad mode a tensor with history records the fill (its gradient is zero), as PyTorch.
    """
    cycle = _grad_state.cycle
    if cycle is not None and cycle.replaying:  # symgrad.replaying
        if cycle.fill(tensor, value):
            return tensor
        cycle = _grad_state.cycle  # fell back: the cycle recording the rest
    node = tensor._node
    value = dtypes.number_in(value, node.dtype)
    if tensor._view is not None or tensor._inference:
        check_writable(tensor, name, alike=True)
    if is_grad_enabled() and node.requires_grad:
        if node.op is LEAF:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        assign(tensor, Node(FILL, (node,), (exactly(value), name), node.shape, node.dtype, True))  # -0.0 is not 0.0
        return tensor
    write_values(tensor, constant(value, node.shape, node.dtype))
    if cycle is not None:
        cycle.filled(tensor, value, node, tensor._node)
    return tensor


def copy_(tensor: Tensor, src: Tensor) -> Tensor:
    """``copy_``: the tensor takes src's values (and, under grad mode, its history).  Without
    history it is a traced write (a running statistic moved each step: symgrad.cycles)."""
    check_writable(tensor, "copy_", alike=src is tensor, brings_grad=src.requires_grad)
    if tensor._storage is not None:
        refuse_overlap(tensor, (src,))
    if is_grad_enabled() and tensor.requires_grad and tensor.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if tuple(src.shape) != tuple(tensor.shape):
        src = expand(src, *tensor.shape)
    result = copy(to_dtype(src, tensor.dtype))
    if result.requires_grad:
        assign(tensor, result._node)
    elif is_grad_enabled() and tensor.requires_grad:  # recorded: the old values' history gets no gradient
        assign(tensor, record(COPY_OVER, (tensor._node, result._node)))
    else:
        write_result(tensor, result)
    return tensor


def replayed_write(cycle, tensor: Tensor, result: Tensor) -> bool:
    """``tensor`` takes ``result`` in a replayed step (``cycle``, symgrad.replaying), cast to its
    dtype first where the trace casts it (a float32 state updated with a float64 result, as PyTorch
    keeps the state's dtype); False when the cycle fell back (the usual path writes ``result``)."""
    if cycle.write(tensor, result, True):
        return True
    if _grad_state.cycle is not cycle:
        return False
    cast = to_dtype(result, tensor.dtype)  # the trace's cast, replayed (or off the trace: it falls back)
    return _grad_state.cycle is cycle and cycle.write(tensor, cast)


def write_result(tensor: Tensor, result: Tensor) -> None:
    """``tensor`` takes the values of ``result`` (computed without history), as a traced write; in
    its own dtype, as PyTorch's in-place ops keep it (a float32 momentum buffer of a parameter made
    float64 since stays float32)."""
    if result.dtype is not tensor.dtype:
        result = result.to(tensor.dtype)
    cycle = _grad_state.cycle
    if cycle is not None and cycle.replaying:
        if cycle.write(tensor, result):
            return
        cycle = _grad_state.cycle  # off the trace at the write: the cycle recording the rest
    write_traced(tensor, result._node, cycle)


def write_traced(tensor, node, cycle) -> None:
    """``tensor`` takes the values of ``node`` (without history); ``cycle``, recording, traces it."""
    old = tensor._node
    write_values(tensor, node)
    if cycle is not None:
        cycle.written(tensor, node, old, tensor._node)


def _data(tensor: Tensor) -> Tensor:
    """The values without history, sharing the storage (writes through it are not counted)."""
    return viewed(tensor, Tensor(lazy_leaf(tensor._node)), DATA)


def _set_data(tensor: Tensor, value: Tensor) -> None:
    """``x.data = y``: x takes y's values; as in PyTorch, x's views keep the old storage."""
    tensor._rebind(_values(tensor._node, lazy_leaf(value._node)))


data = property(_data, _set_data)
