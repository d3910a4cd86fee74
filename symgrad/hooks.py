"""Where tensor hooks are kept, and the one question ``backward`` asks about them.

A hook on a non-leaf tensor belongs to its node (the gradient there is the node's); a hook on a
leaf belongs to the tensor (``Tensor._hooks``), so it follows the tensor when an in-place update
moves it to a new leaf, as an optimizer step does.  The tables hold functions of arrays (the
front end wraps the user's function, symgrad.tensor_methods), so the engine never makes a
Tensor.  While no tensor has a hook, ``backward`` pays two truth tests (``on_nodes.data``, ``leaves``).
"""
from __future__ import annotations

import itertools
import weakref

on_nodes = weakref.WeakKeyDictionary()  # non-leaf node -> {handle id: fn(array) -> array or None}
leaves: dict = {}  # id(tensor) -> weakref to a leaf tensor whose ``_hooks`` hold some
_ids = itertools.count()
accumulating = [True]  # False while autograd.grad borrows ``.grad``: nothing is accumulated, no post hook runs


class RemovableHandle:
    """What ``register_hook`` returns: ``remove()`` takes the hook away (also as a context manager)."""

    def __init__(self, table: dict, hook, emptied):
        self.id = next(_ids)
        self._table, self._emptied = table, emptied  # emptied(): forget the owner once it has no hooks
        table[self.id] = hook

    def remove(self) -> None:
        if self._table.pop(self.id, None) is not None and not self._table:
            self._emptied()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def on_node(node, hook) -> RemovableHandle:
    """A hook on a non-leaf node's gradient."""
    table = on_nodes.get(node)
    if table is None:
        table = on_nodes[node] = {}
    owner = weakref.ref(node)
    return RemovableHandle(table, hook, lambda: owner() is not None and on_nodes.pop(owner(), None))


def on_tensor(tensor, kind: str, hook) -> RemovableHandle:
    """A hook of ``kind`` ("grad" or "post") on a leaf tensor, kept on the tensor."""
    tables = getattr(tensor, "_hooks", None)
    if tables is None:
        tables = tensor._hooks = {"grad": {}, "post": {}}
    key = id(tensor)
    leaves[key] = weakref.ref(tensor, lambda _, key=key: leaves.pop(key, None))
    return RemovableHandle(tables[kind], hook,
                           lambda: tables["grad"] or tables["post"] or leaves.pop(key, None))


def of_leaf(tensor, kind: str) -> list:
    tables = getattr(tensor, "_hooks", None)
    return list(tables[kind].values()) if tables is not None else []


def cuts(path) -> list:
    """The non-leaf nodes on a gradient path that have hooks: backward must stop at each."""
    hooked = list(on_nodes.keys())
    if not hooked:
        return []
    on_path = set(path)
    return [node for node in hooked if node in on_path]


def hooked_targets(owners) -> bool:
    return any(id(owner) in leaves for owner in owners)
