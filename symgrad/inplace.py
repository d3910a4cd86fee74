"""In-place operations: ``x += y``, ``x.mul_(2)``, ``x.zero_()``, ``x.copy_(y)``, ``x.data = y``.

A tensor is mutable only in which node it points at (symgrad.tensor): an in-place op records
its result out of place and moves the tensor to it.  Without history the new values replace the
old ones lazily; a tensor with history keeps its gradient path (``KEEP_HISTORY``); a view made by
``.data`` writes through to its base.
"""
from __future__ import annotations

from symgrad.grad_mode import _state as _grad_state
from symgrad.grad_mode import is_grad_enabled
from symgrad.kinds import exactly
from symgrad.nodes import LEAF, Node, constant, lazy_leaf
from symgrad.ops.elementwise import FILL, KEEP_HISTORY
from symgrad.ops.shape import COPY_OVER, copy, expand, to_dtype
from symgrad.tensor import Tensor, record


def write_values(tensor: Tensor, values: Node) -> None:
    """``tensor`` takes ``values`` (computed without history); its own history, if any, stays."""
    node = tensor._node
    if node.requires_grad and node.op is not LEAF:
        tensor._rebind(Node(KEEP_HISTORY, (node, values), (), node.shape, node.dtype, True))
    else:
        tensor._rebind(lazy_leaf(values, requires_grad=node.requires_grad))
    if tensor._base is not None:
        write_values(tensor._base, lazy_leaf(values))


def apply_inplace(tensor: Tensor, name: str, compute) -> Tensor:
    """``tensor.add_(...)``, ``tensor += ...``: ``compute()`` records the result out of place, then
    ``tensor`` moves to it (cast back to its dtype; PyTorch's errors for a wider dtype or a shape
    that broadcasting changed, and for a leaf that requires grad under grad mode)."""
    node = tensor._node
    if node.requires_grad and node.op is LEAF and _grad_state.enabled:
        raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place operation "
                           f"({name} on shape {tuple(node.shape)}, {node.dtype}); wrap it in "
                           f"torch.no_grad() to update it without recording.")
    result = compute()._node
    if result.dtype is not node.dtype:
        if result.dtype.category > node.dtype.category:
            raise RuntimeError(f"result type {result.dtype} can't be cast to the desired output type "
                               f"{node.dtype} [{name} on shape {tuple(node.shape)}]")
        result = to_dtype(Tensor(result), node.dtype)._node
    if result.shape != node.shape:
        raise RuntimeError(f"output with shape {list(node.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)} [{name}]")
    if result.requires_grad:
        tensor._rebind(result)
        if tensor._base is not None:
            write_values(tensor._base, lazy_leaf(result))
    else:
        write_values(tensor, result)
    return tensor


def fill_inplace(tensor: Tensor, value, name: str = "FillBackward2") -> Tensor:
    """``tensor.fill_(value)`` / ``zero_()``: the tensor becomes a constant, lazily.

    Under grad mode a tensor with history records the fill (its gradient is zero), as PyTorch.
    """
    node = tensor._node
    if is_grad_enabled() and node.requires_grad:
        if node.op is LEAF:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        tensor._rebind(Node(FILL, (node,), (exactly(value), name), node.shape, node.dtype, True))  # -0.0 is not 0.0
        return tensor
    write_values(tensor, constant(value, node.shape, node.dtype))
    return tensor


def copy_(tensor: Tensor, src: Tensor) -> Tensor:
    """``copy_``: the tensor takes src's values (and, under grad mode, its history)."""
    node = tensor._node
    if is_grad_enabled() and node.requires_grad and node.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if tuple(src.shape) != tuple(tensor.shape):
        src = expand(src, *tensor.shape)
    new = copy(to_dtype(src, tensor.dtype))._node
    if new.requires_grad:
        tensor._rebind(new)
    elif is_grad_enabled() and node.requires_grad:  # recorded: the old values' history gets no gradient
        tensor._rebind(record(COPY_OVER, (node, new)))
    else:
        write_values(tensor, new)
    return tensor


def _data(tensor: Tensor) -> Tensor:
    """The values without history; in-place changes to it change the tensor (as PyTorch's view)."""
    view = tensor.detach()
    view._base = tensor
    return view


def _set_data(tensor: Tensor, value: Tensor) -> None:
    write_values(tensor, lazy_leaf(value._node))


data = property(_data, _set_data)
