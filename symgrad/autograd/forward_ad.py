"""``torch.autograd.forward_ad``: dual tensors, whose tangents come out as Jacobian-vector products.

PyTorch carries a tangent beside each value as it computes.  symgrad keeps its one kind of
derivative, the symbolic reverse mode: while a dual level is open, an op on a dual tensor is
recorded a second time, privately, on the duals' *shadows* (``symgrad.tensor.apply`` calls
``_recorded``): leaves that require grad, so the shadow graph says what was computed from which
dual while the user's tensors keep their own ``requires_grad`` and ``grad_fn``.  ``unpack_dual``
derives the tangent from that graph when asked, as ``symgrad.func.jvp`` does: J t is the
derivative of the vjp ``u -> J^T u`` along t, with respect to u, summed over the duals involved.
Leaving the level forgets every shadow, so results are plain tensors again.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import NamedTuple, Optional

from symgrad import tensor as tensors
from symgrad.autograd.gradients import grad
from symgrad.creation import zeros_like
from symgrad.grad_mode import _state as _grad_state
from symgrad.grad_mode import enable_grad
from symgrad.nodes import CONST, lazy_leaf
from symgrad.ops.shape import CLONE
from symgrad.tensor import Tensor, record

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "dual_level"]

_current_level = -1  # one level at a time, process-wide, as PyTorch's


class _Shadow:
    """A visible tensor's private double: its node in the shadow graph, the duals it depends on
    (``(shadow leaf, tangent)`` pairs) and its tangent once derived."""

    __slots__ = ("node", "duals", "tangent")

    def __init__(self, node, duals: tuple, tangent=None):
        self.node, self.duals, self.tangent = node, duals, tangent


_shadows: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # visible node -> _Shadow


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal and the tangent (None for a tensor that is not dual)."""

    primal: Tensor
    tangent: Optional[Tensor]


def enter_dual_level() -> int:
    """Open the (single) level that dual tensors live in; its number."""
    global _current_level
    if _current_level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _current_level = 0
    tensors.dual_ops.append(_recorded)
    return _current_level


def exit_dual_level(*, level=None) -> None:
    """Close the level: every tangent made in it is forgotten."""
    global _current_level
    level = _current_level if level is None else level
    if level != _current_level:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. "
                           "This is not supported.")
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    tensors.dual_ops.clear()
    _shadows.clear()
    _current_level = -1


class dual_level(contextlib.ContextDecorator):
    """``with dual_level():`` (or as a decorator): forward AD inside, plain tensors after."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> bool:
        exit_dual_level()
        return False


def make_dual(tensor: Tensor, tangent: Tensor, *, level=None) -> Tensor:
    """A view of ``tensor`` whose tangent is ``tangent`` (kept as it is when both are laid out
    alike, else copied into ``tensor``'s layout and dtype, as PyTorch does)."""
    level = _current_level if level is None else level
    if level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not tensor.is_floating_point():
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not tangent.is_floating_point():
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if tensor._node in _shadows:
        raise RuntimeError(f"Making a dual Tensor based on a Tensor that already has a forward gradient at the same "
                           f"level {level} is not supported.")
    cycle = _grad_state.cycle
    if cycle is not None and cycle.replaying:  # a replayed step records nothing: the ops on duals must be seen
        cycle.fall_back()
    if not (tangent.is_contiguous() and tensor.is_contiguous()):
        tangent = tangent.clone().to(tensor.dtype)
    dual = tensor.view(tensor.shape)
    node = dual._node
    with enable_grad():  # a primal with history keeps it in the shadow graph (tangents are differentiable)
        leaf = Tensor(_private(tensor._node) if tensor.requires_grad else lazy_leaf(tensor._node, requires_grad=True))
    _shadows[node] = _Shadow(leaf._node, ((leaf, tangent),), tangent)
    return dual


def unpack_dual(tensor: Tensor, *, level=None) -> UnpackedDualTensor:
    """``(primal, tangent)``: inside the level the primal is a view of ``tensor`` that is not dual,
    and the tangent J t is derived from the shadow graph (once: asked again, the same tensor)."""
    level = _current_level if level is None else level
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    shadow = _shadows.get(tensor._node)
    primal = tensor.view(tensor.shape)
    _shadows.pop(primal._node, None)
    if shadow is None:
        return UnpackedDualTensor(primal, None)
    if shadow.tangent is None:
        shadow.tangent = _jacobian_times_tangents(tensor, shadow)
    return UnpackedDualTensor(primal, shadow.tangent)


def _jacobian_times_tangents(tensor: Tensor, shadow: _Shadow) -> Tensor:
    """Sum over the duals of J_i t_i = d/du <J_i^T u, t_i>: two symbolic reverse passes (the second
    from a scalar root).  The result has history only where PyTorch's would (the primals' or the
    tangents' own)."""
    leaves = [leaf for leaf, _ in shadow.duals]
    nested = tensor.requires_grad or any(t.requires_grad for _, t in shadow.duals)
    with enable_grad():
        out = Tensor(shadow.node)
        cotangent = zeros_like(out).requires_grad_(True)
        transposed = grad([out], leaves, [cotangent], create_graph=True, allow_unused=True)
        inner = [(g * t).sum() for g, (_, t) in zip(transposed, shadow.duals) if g is not None and g.requires_grad]
        if not inner:
            return zeros_like(tensor)
        (product,) = grad([sum(inner[1:], inner[0])], [cotangent], create_graph=nested, allow_unused=True)
    return zeros_like(tensor) if product is None else product if nested else product.detach()


def _recorded(op, nodes: tuple, attrs: tuple, node) -> None:
    """``symgrad.tensor.apply`` recorded ``op`` on ``nodes`` as ``node``: when some input is dual
    and the result can carry a tangent, record the op again on the inputs' shadows (in grad mode:
    forward AD works under ``no_grad`` too).  A step holding such ops is never replayed."""
    found = [_shadows.get(n) for n in nodes]
    if not any(found) or not node.dtype.is_floating_point:
        return
    with enable_grad():
        double = record(op, tuple([s.node if s is not None else _private(n) for s, n in zip(found, nodes)]), attrs)
    if not double.requires_grad:
        return
    duals = ()
    for s in found:
        if s is not None and s.duals is not duals:
            known = {id(d) for d in duals}
            duals = s.duals if not duals else duals + tuple(d for d in s.duals if id(d) not in known)
    _shadows[node] = _Shadow(double, duals)
    cycle = _grad_state.cycle
    if cycle is not None and not cycle.replaying:
        cycle.broken = True


def _private(node):
    """The shadow graph's own copy of a tensor's values (its history kept): PyTorch computed the
    tangent before any later in-place write to that tensor (an optimizer step), so such a write
    must not make the tangent refuse the values it was computed from."""
    return node if node.op is CONST else record(CLONE, (node,))
