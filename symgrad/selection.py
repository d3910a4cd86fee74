"""Checks PyTorch makes on values (labels in range, indices in bounds), made on the array the
values are drawn from.

A batch of a dataset's labels (``y[i:i + 32]``, ``y[perm[i:i + 32]]``) is a selection of the
dataset's: when every value of that array passes, so does every selection of it, and nothing is
computed mid-step for the check (a replayed step stays on its trace: symgrad.replaying).  An array
checked is remembered, so a loop's labels are copied to the host once, not every step.
"""
from __future__ import annotations

import weakref

import jax
import numpy as np

from symgrad import engine, replaying

_passed: dict = {}  # (id of an array, low, high, allowed) -> a weak reference to the array that passed


def drawn_from(tensor):
    """The node with values whose elements ``tensor``'s are, through views and indexing, or None."""
    node = replaying.selected_from(tensor) if tensor.__class__ is replaying.Traced else tensor._node
    while node is not None and node.value is None and (node.op.view or node.op.selects):
        node = node.inputs[0]
    return node if node is not None and node.value is not None else None


def outside(values, low: int, high: int, allowed=None) -> np.ndarray:
    """The values not in [low, high) nor ``allowed``, in order (on the host)."""
    host = np.asarray(values)
    mask = (host < low) | (host >= high)
    if allowed is not None:
        mask &= host != allowed
    return host[mask]


def all_within(tensor, low: int, high: int, allowed=None) -> bool:
    """Whether every value of the array ``tensor``'s are drawn from is in [low, high) or is
    ``allowed``; False when that array is not known (then the values themselves need checking)."""
    source = drawn_from(tensor)
    values = None if source is None else engine.known_array(source)
    if values is None or isinstance(values, jax.core.Tracer):
        return False
    key = (id(values), low, high, allowed)
    seen = _passed.get(key)
    if seen is not None and seen() is values:
        return True
    if outside(values, low, high, allowed).size:
        return False
    if len(_passed) >= 16:
        _passed.clear()
    try:
        _passed[key] = weakref.ref(values)
    except TypeError:  # an array type without weak references: checked every time
        pass
    return True
