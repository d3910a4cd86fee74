"""Which arrays a backward program may overwrite: those nothing can read once it has run.

A training step's program reads last step's parameters, optimizer state and gradients (the
arguments of leaves that an in-place update under ``no_grad`` made pending) and computes this
step's.  After the call the pending leaves hold their new values and forget the update that
computed them, and the old leaves can be reached no more, unless something else holds them.
Their arrays can then be given to XLA to write results into (codegen.donated).

Whether something else holds them is answered exactly by Python's reference counts, set against
the references this step's own graph holds: the nodes reachable from the root and the pending
leaves through their inputs, and the tuples those nodes keep.  Whatever is referenced from
anywhere else (a tensor, a ``grad_fn``, a user's list, a frame, another graph) is alive, and
so is everything reachable from it through inputs, except through the pending leaves the call
fills.  A reference not accounted for can only make an array look alive, never dead.

The ``args`` and ``pending`` tuples of nodes (symgrad.kinds) only describe a structure, and do
not keep anything alive: a backward finds its program by them (symgrad.replay) only while their
pending leaves are still to be computed, and then their arguments are reached through inputs.
"""
from __future__ import annotations

import math
import sys
from collections import Counter

import jax
import numpy as np

from symgrad.nodes import LEAF

MIN_ELEMENTS = 1 << 18  # smaller buffers come back from malloc's free lists without fresh pages

_ARRAY = type(jax.device_put(np.zeros(())))  # (no XLA compile at import, as jnp.zeros would)


def dead_sources(root, pending, sources, among, held) -> frozenset:
    """Indices ``among`` those of ``sources`` (leaves whose arrays the program reads) whose arrays
    nothing can read after a call that fills ``pending``.  ``held``: the caller's containers of
    this step's nodes, dropped after the call (their references do not keep anything alive)."""
    candidates = [i for i in among if _sole_array(sources[i])]
    if not candidates:
        return frozenset()
    nodes, parts, internal = _graph((root, *pending, *[sources[i] for i in candidates]), held)
    live = _live(nodes, parts, internal, pending)
    return frozenset(i for i in candidates if sources[i] not in live)


def _sole_array(node) -> bool:
    """Whether ``node`` is a leaf holding a big JAX array that only it refers to."""
    value = node.value
    return (value.__class__ is _ARRAY and node.op is LEAF and sys.getrefcount(value) == 3  # the attribute,
            and math.prod(node.shape) >= MIN_ELEMENTS)                                  # ``value``, the argument


def _graph(starts, held):
    """The nodes reachable from ``starts`` through inputs (a dict: nodes hash by identity), the
    tuples they keep (by id), and how many references to each of those come from those tuples,
    from the nodes and from ``held``.  A source is a start of its own: a root's description may
    name a leaf that no input reaches any more (a pending leaf computed since), whose holders
    must be counted too."""
    nodes, parts, refs = {}, {}, []
    stack = list(starts)
    while stack:
        node = stack.pop()
        if node in nodes:
            continue
        nodes[node] = None
        inputs = node.inputs
        for part in (inputs, node.args, node.pending):
            if part:
                key = id(part)
                refs.append(key)
                if key not in parts:
                    parts[key] = part
                    refs += map(id, part)
        stack += inputs
    for container in held:
        if id(container) not in parts:
            refs += map(id, container)
    return nodes, parts, Counter(refs)


def _live(nodes, parts, internal, cut) -> set:
    """The nodes and tuples referenced from outside the graph, and all they reach through
    inputs (a pending leaf in ``cut`` forgets its inputs when the call fills it)."""
    nodes[object()] = None  # held only as each object is held here (no name): the count without outsiders
    objects = [*nodes, *parts.values()]
    counts = list(map(sys.getrefcount, objects))
    base = counts[len(nodes) - 1]
    stack = [o for o, count in zip(objects, counts) if count - base > internal[id(o)]]
    cut = set(cut)
    live = set()  # tuples hash by value: their ids are kept, nodes themselves (identity)
    while stack:
        obj = stack.pop()
        if obj.__class__ is tuple:
            if id(obj) not in live:
                live.add(id(obj))
                stack += obj
        elif obj not in live:
            live.add(obj)
            if obj not in cut and obj.inputs:
                stack.append(obj.inputs)
    return live
