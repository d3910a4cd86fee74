"""``backward`` without walking the graph: the compiled program found from the root's kind.

A training loop records the same structure every step.  The root's kind (symgrad.kinds) says
which structure; with the pattern in which its arguments (and pending leaves) repeat, which of
them receive gradients, which tensor owns each, and which add to an existing ``.grad``, it keys
the compiled program directly.  The
first time, ``backward`` walks the graph as usual (``engine.BackwardPlan``) and ``replay_of``
works out which argument feeds each program input and which pending leaf each output fills.
"""
from __future__ import annotations

from codegen import deferred, donated
from symgrad.nodes import LEAF, as_input, is_zero_fill, owners_of
from symgrad.tracing import is_float_scalar, moving_starts


class Request:
    """One backward, described by kinds: the key, the arrays in order, the leaves to fill."""

    __slots__ = ("key", "sources", "pending", "owners", "owned")

    def __init__(self, key, sources, pending, owners, owned):
        self.key, self.sources, self.pending = key, sources, pending
        self.owners, self.owned = owners, owned  # the tensors whose .grad is filled, a target node of each


def request(root, targets):
    """The Request for ``backward`` from ``root`` into ``targets`` (leaves), or None when the
    graph is one that only a walk describes (no kind, a retained non-leaf)."""
    if root.kind is None:
        return None
    for target in targets:
        if target.op is not LEAF:
            return None
    owners, owned, groups = owners_of(targets)
    if len({id(owner._grad) for owner in owners if owner._grad is not None}) < sum(
            owner._grad is not None for owner in owners):
        return None  # one tensor as .grad of two owners: only a walk adds both into it
    accumulate, existing = [], ()
    for owner in owners:
        grad = owner._grad
        if grad is None:
            accumulate.append(False)
        elif grad._node.value is not None:
            accumulate.append(True)
            existing += (grad._node,)
        elif is_zero_fill(grad._node):
            accumulate.append(False)
        else:
            return None
    args, pending = as_input(root)
    for leaf in pending:
        if leaf.value is not None:
            return None  # computed since: a stale description, whose arrays may be given up (symgrad.donation)
    sources, args_pattern = _numbered(args + existing)
    pending, pending_pattern = _numbered(pending)
    positions = []
    for target in targets:  # an argument, or a leaf computed in the program (an updated parameter)
        position, computed = sources.get(target), pending.get(target)
        if (position is None) == (computed is None):
            return None  # both: a pending leaf computed between two uses
        positions.append(position if computed is None else -1 - computed)
    key = ("replay", root.kind, args_pattern, pending_pattern, tuple(positions), groups, tuple(accumulate))
    return Request(key, tuple(sources), tuple(pending), owners, owned)


def _numbered(nodes):
    """Each distinct node's number (in order of first appearance), and the pattern in which
    they repeat (just their count when none does)."""
    numbers = dict(zip(nodes, range(len(nodes))))
    if len(numbers) == len(nodes):
        return numbers, len(nodes)
    numbers = {}
    return numbers, tuple([numbers.setdefault(n, len(numbers)) for n in nodes])


class Replay:
    """A compiled backward program with the sources of its inputs, the leaves its outputs fill and
    the constants of the Python floats in it with their walk positions (for symgrad.cycles)."""

    __slots__ = ("compiled", "inputs", "pending", "floats", "moving", "aliasable", "used")  # used: codegen.compile

    def __init__(self, compiled, inputs, pending, floats, moving):
        """``moving``: whether it has indexings whose starts a program may take as inputs."""
        self.compiled, self.inputs, self.pending, self.floats, self.moving = compiled, inputs, pending, floats, moving
        # sources a result could be written into (symgrad.donation), for a program that is not small
        self.aliasable = () if compiled.small else tuple(sorted(inputs[p] for p in donated.aliasable(compiled.program)))

    def run(self, request, dead=()):
        """The program's results; the arrays of the sources in ``dead`` (symgrad.donation) are
        given to XLA to write results into, once a variant that takes them is compiled."""
        sources = request.sources
        arrays = [sources[i].value for i in self.inputs]
        if dead:
            results = self.compiled.run_donating(tuple([p for p, i in enumerate(self.inputs) if i in dead]), arrays)
            if results is not None:
                return results
        return deferred.call(self.compiled, arrays)


def replay_of(request, plan, compiled):
    """The Replay of ``compiled``, built by walking for ``request``; None when the walk saw
    the graph otherwise than its kinds do (a value computed after it was used)."""
    if any(node.value is not None for node in request.pending):
        return None
    walk = plan.walk
    where = {node: i for i, node in enumerate(request.sources)}
    inputs = []
    for position, node in enumerate(walk.order):
        if walk.is_input(position):
            source = where.get(node)
            if source is None:
                return None
            inputs.append(source)
    if len(set(inputs)) != len(request.sources):
        return None
    where = {node: i for i, node in enumerate(request.pending)}
    pending = tuple(where.get(walk.order[position]) for position in plan.pending)
    if None in pending or len(set(pending)) != len(request.pending):
        return None
    return Replay(compiled, tuple(inputs), pending, tuple([(p, node) for p, node in enumerate(walk.order)
                                                           if is_float_scalar(node)]),
                  any(moving_starts(node) for p, node in enumerate(walk.order) if not walk.is_input(p)))
