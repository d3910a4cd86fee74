"""Where tensor hooks are kept, and the one question ``backward`` asks about them.

A hook on a non-leaf tensor belongs to its node (the gradient there is the node's); a hook on a
leaf belongs to the tensor (``Tensor._hooks``), so it follows the tensor when an in-place update
moves it to a new leaf, as an optimizer step does.  The tables hold functions of arrays (the
front end wraps the user's function, symgrad.tensor_methods), so the engine never makes a
Tensor.  While no tensor has a hook, ``backward`` pays two truth tests (``on_nodes.data``, ``leaves``).

A ``Group`` is one hook on the gradients of several sibling nodes together (a module's backward
hooks, symgrad.nn.backward_hooks): it sits in each member's table, so everything that asks
whether a node is hooked sees it, and ``units`` makes backward stop at the members at once.
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


class Group:
    """One hook on the gradients of sibling nodes, the outputs of one call (so they have the same
    inputs, and whatever lies below one lies below all).  ``hook(gradients)`` gets a gradient per
    member, None for a member no gradient reached, and returns one per member (None: nothing flows
    on from it) or None to leave them; ``hook.on_tensors`` is the same on recorded gradients."""

    def __init__(self, nodes, hook):
        self.members, self.hook = [weakref.ref(n) for n in nodes], hook
        key = next(_ids)
        for node in nodes:
            on_nodes.setdefault(node, {})[key] = self

    def nodes(self) -> list:
        return [ref() for ref in self.members]


def _groups(node) -> list:
    return [hook for hook in on_nodes.get(node, {}).values() if hook.__class__ is Group]


def units(cuts, position) -> list:
    """The hooked nodes in the order backward must stop at them, nearest the root first (by
    ``position``, a topological index): a group's members on the path together, where the one
    farthest from the root stands (what lies between is below none of them)."""
    placed = {}
    for node in cuts:
        groups = _groups(node)
        placed.setdefault(id(groups[0]) if groups else id(node), []).append(node)
    return sorted((tuple(unit) for unit in placed.values()), key=lambda u: min(position[n] for n in u), reverse=True)


def run(unit, gradients: dict, on_tensors: bool = False):
    """The hooks of one unit on its total ``gradients`` (node -> gradient, arrays or, under
    ``create_graph``, recorded Tensors): each node's own hooks, then its group's.  Returns the
    gradients after the nodes' own hooks (what ``retain_grad`` keeps, as PyTorch's tensor hooks run
    before a node's) and those backward goes on from (a member no gradient reached may get one)."""
    own = {}
    for node in unit:
        gradient = gradients[node]
        for hook in list(on_nodes.get(node, {}).values()):
            if hook.__class__ is not Group:
                result = hook.on_tensor(gradient) if on_tensors else hook(gradient)
                gradient = gradient if result is None else result
        own[node] = gradient
    onward = dict(own)
    for group in _groups(unit[0]):
        members = group.nodes()
        results = (group.hook.on_tensors if on_tensors else group.hook)([onward.get(m) for m in members])
        if results is not None:
            onward.update((m, g) for m, g in zip(members, results) if m is not None)
    return own, onward
