"""A torch-style step replayed from its trace instead of recorded again.

A *cycle* runs from just after one ``backward()`` to the next.  While a thread records on the
usual path, each op, in-place write and fill appends one entry to the cycle's trace: the op,
its attributes and grad mode, and each operand as a position earlier in the cycle, an outside
tensor (numbered in order of first use, with its kind) or a shared constant.  When a cycle's
trace equals the one before, and the backward's compiled program reads only arrays the trace
names, the next cycles are *replayed*: an op only checks ``trace[cursor]`` and returns a
``Traced`` tensor (shape, dtype and requires_grad from its entry; no node, no kind), a write
gives the tensor a leaf whose value is a ``deferred.Pending`` of the cycle, and ``backward``
calls the program on the outside arrays.

A value read before the backward (``loss.item()``, a parameter just updated) is computed on
side nodes built from the operands the cycle saw, and replay goes on.  Anything else off the
trace falls back: another op, any other use of a ``Traced`` tensor's node, a hook on the way, an
untraced write, a ``backward`` with arguments.  The cycle is then *materialized*: its entries
run again on the usual path with the operands they saw, the tensors it wrote take the real
nodes, and the thread records the rest of the cycle (and waits longer before replaying that
trace again).  Nothing here differentiates: the program is the symbolic backward the usual
path compiled, and the calls still go through ``codegen.deferred``.
"""
from __future__ import annotations

import threading
import weakref

import codegen.compile as programs
from codegen import deferred, speed
from symgrad import engine, hooks
from symgrad.dtypes import Size
from symgrad.grad_mode import _state as _grad_state
from symgrad import kinds
from symgrad.kinds import exactly
from symgrad.nodes import _default_float, _scalars, CONST, LEAF, Node, is_zero_fill, lazy_leaf, program_ran
from symgrad.storage import mark, storage_of
from symgrad.tensor import Tensor, record
from symgrad.tracing import gradient_path

MAX_ENTRIES = 20_000  # a longer cycle is not traced (its recording would cost more than it saves)
MAX_PATIENCE = 64     # equal traces in a row wanted before replaying again, after falling back repeatedly
WRITE, FILL, BACKWARD = "write", "fill", "backward"
_NUMBERS = frozenset((int, float, bool))
SLOT, WRITTEN, GRAD = 0, 1, 2  # where a program input comes from: an outside operand, a write, a .grad


class Cycle:
    """One thread's cycle: its trace (``entries``), what its operands were, and the replay state."""

    __slots__ = ("entries", "previous", "plan", "replaying", "cursor", "captured", "tensors", "slots",
                 "positions", "nodes", "values", "mark", "broken", "done", "real", "lock",
                 "streak", "patience", "peeked", "made", "__weakref__")

    def __init__(self, previous=None, plan=None, streak=0, patience=1, lock=None):
        """``streak``: equal traces in a row so far; ``patience``: how many replaying needs (it
        doubles each time a replayed cycle falls back, so a step that leaves its trace every
        few cycles soon stops paying for falling back); ``lock``: the thread's, shared by its
        cycles (another thread that reads a value takes it)."""
        self.streak, self.patience = streak, patience
        self.previous, self.plan = previous, plan  # the trace to replay and its Plan, when replaying
        self.replaying = plan is not None
        self.entries = [] if plan is None else previous
        self.cursor = 0
        self.captured, self.tensors, self.slots = [], [], {}  # outside nodes, their tensors (weak when recording), id -> slot
        self.positions, self.made = {}, []  # recording: id of a node made -> its position; weak refs by position
        self.nodes = {}  # replaying: position -> the node a write or a fill gave its tensor
        self.values = {}  # position -> value a replayed backward computed (its root)
        self.mark, self.broken, self.done, self.real = _grad_state.changes, False, False, None
        self.lock = lock or threading.RLock()
        self.peeked = []  # nodes made to compute values read before the backward (no tensor moved to them)

    # --------------------------------------------------------------------- recording

    # Recording keeps only weak references to the nodes and tensors it saw (a loop that never
    # calls backward must not keep its graphs alive): ``positions`` and ``slots`` map ids, checked
    # against the weak references in ``made`` and ``captured``.

    def position(self, node):
        """The position at which this recording cycle made ``node``, or None."""
        position = self.positions.get(id(node))
        return position if position is not None and self.made[position]() is node else None

    def _slot(self, node):
        slot = self.slots.get(id(node))
        return slot if slot is not None and self.captured[slot]() is node else None

    def _operand(self, tensor, node):
        """The trace's reference to an operand (recording): a position, a slot, or a constant."""
        position = self.position(node)
        if position is not None:
            return position
        if node.op is CONST:
            return node
        if tensor is None or node.kind is None:
            return None
        slot = self._slot(node)
        if slot is None:
            slot = self.slots[id(node)] = len(self.captured)
            self.captured.append(weakref.ref(node))
            self.tensors.append(weakref.ref(tensor))
        return slot, node.kind

    def _entry(self, entry, node, expected: int) -> None:
        """Append ``entry`` whose result is ``node``; the cycle breaks if anything recorded or
        rebound besides it (``expected`` changes)."""
        if _grad_state.changes != self.mark + expected or len(self.entries) >= MAX_ENTRIES:
            self.broken = True
        self.mark = _grad_state.changes
        if not self.broken:
            self.positions[id(node)] = len(self.entries)
            self.made.append(weakref.ref(node))
            self.entries.append(entry)

    def recorded(self, op, args, nodes, attrs, node) -> None:
        """``apply`` recorded ``node``: its entry."""
        if self.broken:
            return
        refs = tuple([self._operand(a if isinstance(a, Tensor) else None, n) for a, n in zip(args, nodes)])
        if None in refs or node.kind is None:
            self.broken = True
            return
        self._entry((op, attrs, _grad_state.enabled, refs, node.kind), node, 1)

    def written(self, tensor, source, old, node) -> None:
        """``apply_inplace`` wrote the result ``source`` into ``tensor`` (whose node was ``old``)
        without history: its entry (a cast, a view, a tensor with history is not traced)."""
        position, ref = self.position(source), self._written(tensor, old)
        if (self.broken or position is None or ref is None or tensor._view is not None
                or old.dtype is not source.dtype or (old.requires_grad and old.op is not LEAF) or _shares(tensor)):
            self.broken = True
            return
        self._entry((WRITE, ref, position, old.requires_grad, kinds.array(old.shape, old.dtype, old.requires_grad)),
                    node, 1)

    def filled(self, tensor, value, old, node) -> None:
        """``fill_inplace`` filled ``tensor`` without history: its entry."""
        ref = self._written(tensor, old)
        if (self.broken or ref is None or tensor._view is not None or _shares(tensor) or node.op is not LEAF
                or node.value is not None):
            self.broken = True
            return
        self._entry((FILL, ref, exactly(value), node.inputs[0]), node, 1)  # the constant: the fill's leaf is new
                                                                           # once a program has computed it

    def _written(self, tensor, old):
        """The reference to a tensor written in place: an outside one, or one written earlier in
        the cycle (not the result of an op: that tensor has history); None when not traced."""
        ref = self._operand(tensor, old)
        if ref.__class__ is int and self.entries[ref][0] is not WRITE and self.entries[ref][0] is not FILL:
            return None
        return ref if ref.__class__ is int or ref.__class__ is tuple else None

    # ---------------------------------------------------------------------- replaying

    def op(self, op, args, attrs):
        """The ``Traced`` result of ``op`` on ``args``, or None after falling back (off the trace)."""
        i = self.cursor
        entry = self.entries[i]
        if (speed.fast and entry[0] is op and entry[2] is _grad_state.enabled and entry[1] == attrs
                and self._match(args, entry[3])):
            self.cursor = i + 1
            return Traced(self, i, entry[4])
        self.fall_back()
        return None

    def _match(self, args, refs) -> bool:
        """Whether each of ``args`` is the operand its reference names (capturing outside ones)."""
        if len(args) != len(refs):
            return False
        for a, ref in zip(args, refs):
            cls = a.__class__
            if cls is Traced:  # made by this cycle at that position
                if a._position != ref or a._cycle is not self:
                    return False
            elif cls is Tensor:
                rcls = ref.__class__
                if rcls is tuple:
                    if not self._capture(a, ref):
                        return False
                elif a._node is not (self.nodes.get(ref) if rcls is int else ref):
                    return False
            elif cls not in _NUMBERS or _scalars.get((cls, a, _default_float[0])) is not ref:
                return False  # not the shared node of a Python number (symgrad.nodes.scalar)
        return True

    def _capture(self, tensor, ref, node=None) -> bool:
        """Whether ``tensor`` (holding ``node``) is the outside operand ``ref`` names: a new one
        in its slot's turn, or the one already in that slot."""
        if tensor.__class__ is not Tensor or tensor._inference:  # an inference tensor: the usual path's checks
            return False
        node = tensor._node if node is None else node
        slot, kind = ref
        if node.kind is not kind:
            return False
        captured = self.captured
        if slot == len(captured):
            if node in captured:  # by identity: nodes have no __eq__
                return False
            captured.append(node)
            self.tensors.append(tensor)
            return True
        return slot < len(captured) and captured[slot] is node

    def write(self, tensor, source) -> bool:
        """``tensor``'s in-place write of the Traced ``source`` replayed: its node becomes a leaf
        whose value is this cycle's ``Pending``; False when off the trace (after falling back)."""
        i = self.cursor
        entry = self.entries[i]
        if (speed.fast and entry[0] is WRITE and source.__class__ is Traced and source._cycle is self
                and source._position == entry[2] and _grad_state.changes == self.mark
                and self._match((tensor,), (entry[1],)) and not _shares(tensor)):
            old = tensor._node
            placeholder = deferred.Pending(self, i)
            node = Node(LEAF, (), (), old.shape, old.dtype, entry[3], placeholder, entry[4], None, ())
            _write(tensor, old, node)
            self.cursor = i + 1
            self.nodes[i] = node
            return True
        self.fall_back()
        return False

    def fill(self, tensor, value) -> bool:
        """``tensor.fill_(value)`` without history replayed: the tensor takes a leaf filled with the
        trace's constant, as ``fill_inplace`` makes it; False when off the trace (after falling back)."""
        i = self.cursor
        entry = self.entries[i]
        if (speed.fast and entry[0] is FILL and entry[2] == exactly(value)
                and _grad_state.changes == self.mark and tensor.__class__ is Tensor and tensor._view is None
                and not _shares(tensor)):
            old, ref = tensor._node, entry[1]
            if old.requires_grad and _grad_state.enabled:
                pass
            elif old is self.nodes.get(ref) if ref.__class__ is int else self._capture(tensor, ref, old):
                node = self.nodes[i] = lazy_leaf(entry[3], requires_grad=old.requires_grad)
                _write(tensor, old, node)
                self.cursor = i + 1
                return True
        self.fall_back()
        return False

    def backward(self, root) -> bool:
        """``root.backward()`` replayed at the end of the trace; False when it fell back."""
        with self.lock:
            plan = self.plan
            if (not speed.fast or not self.replaying or root.__class__ is not Traced or root._cycle is not self or self.cursor != len(self.entries) - 1
                    or root._position != self.entries[-1][1] or _grad_state.changes != self.mark
                    or engine.anomaly_mode[0]):
                self.fall_back()
                return False
            owners = [self.tensors[j] for j in plan.owners]
            if not plan.holds(self, owners) or self._hooked(owners):
                self.fall_back()
                return False
            captured = self.captured
            nodes = self.nodes
            outputs = deferred.call(plan.program, [captured[i].value if where == SLOT else nodes[i].value
                                                   if where == WRITTEN else owners[i]._grad._node.value
                                                   for where, i in plan.inputs])
            self.values[root._position] = outputs[0]
            for k, value in zip(plan.pending, outputs[1:]):
                nodes[k].value = value  # a leaf: it only takes its value
            for owner, (shape, dtype, kind), value in zip(owners, plan.owned, outputs[1 + len(plan.pending):]):
                node = Node(LEAF, (), (), shape, dtype, False, value, kind, None, ())
                grad = owner._grad
                if grad is None:
                    owner._grad = Tensor(node)
                else:
                    grad._node = node  # Tensor._set_grad without the checks a .grad tensor passes
            program_ran()
            stats.replayed += 1
            self.done = True
        _grad_state.cycle = Cycle(self.entries, plan, self.streak, self.patience, self.lock)
        return True

    def _hooked(self, owners) -> bool:
        """Whether a hook is on the way of this backward (``engine._backward`` asks the same):
        on a tensor whose ``.grad`` it fills, or on an outside node it differentiates through (a
        replayed op's result has no node to hook without falling back)."""
        if hooks.leaves and hooks.hooked_targets(owners):
            return True
        return bool(hooks.on_nodes.data) and any(node in hooks.on_nodes for node in self.captured)

    # ----------------------------------------------------------------------- falling back

    def fall_back(self) -> None:
        """Off the trace: run what was replayed on the usual path and record the rest."""
        with self.lock:
            if not self.replaying:
                return
            real = self.materialize()
            stats.fell_back += 1
            self.replaying = False
            self.streak, self.patience = 0, min(2 * self.patience, MAX_PATIENCE)
            self.entries = list(self.entries[:self.cursor])
            self.positions = {id(node): p for p, node in enumerate(real)}
            self.made = [weakref.ref(node) for node in real]
            self.slots = {id(node): s for s, node in enumerate(self.captured)}
            self.captured = [weakref.ref(node) for node in self.captured]
            self.tensors = [weakref.ref(tensor) for tensor in self.tensors]
            self.mark = _grad_state.changes
            self.broken = self.broken or _grad_state.cycle is not self
            self.nodes = {}  # its leaves hold this cycle's Pending values: no reference cycle is left behind

    def materialize(self, rebind=True) -> list:
        """The cycle's nodes, made on the usual path from the operands each entry saw (once);
        the tensors it wrote move to them, unless ``rebind`` is False: then they are only the
        nodes that compute values read before the backward (made up to the cursor, kept)."""
        with self.lock:
            if self.real is not None:
                return self.real
            real, entries, previous = [] if rebind else self.peeked, self.entries, _grad_state.enabled
            try:
                for k in range(len(real), self.cursor):
                    entry = entries[k]
                    if entry[0] is WRITE:
                        real.append(self._rewrite(k, entry, real, rebind))
                    elif entry[0] is FILL:
                        real.append(self.nodes[k])
                    elif entry[0] is not BACKWARD:
                        _grad_state.enabled = entry[2]
                        real.append(record(entry[0], tuple([self._node(r, real) for r in entry[3]]), entry[1]))
            finally:
                _grad_state.enabled = previous
            if not rebind:
                return real
            self.real = real
            if self.done:  # after the replayed backward: the root has its value, its graph is freed
                root = real[entries[-1][1]]
                root.computed(self.values[entries[-1][1]])
                for node in gradient_path(root)[0]:
                    node.freed = True
            return real

    def _node(self, ref, real):
        if ref.__class__ is int:
            return real[ref]
        if ref.__class__ is tuple:
            return self.captured[ref[0]]
        return ref

    def _rewrite(self, k, entry, real, rebind):
        """A replayed write, made again: the written tensor, if it still holds the placeholder
        leaf, takes a leaf computed from the real source (before ``backward`` has filled it)."""
        placeholder = self.nodes[k]
        if self.done:
            return placeholder
        node = lazy_leaf(real[entry[2]], requires_grad=entry[3])
        tensor = self._tensor_of(entry[1])
        if rebind and tensor._node is placeholder:
            tensor._rebind(node)
        return node

    def _tensor_of(self, ref):
        """The tensor a write's (or a fill's) reference names."""
        while ref.__class__ is int:  # a tensor written earlier in the cycle: that write's reference
            ref = self.entries[ref][1]
        return self.tensors[ref[0]]

    calls = ()  # deferred.Pending sees a cycle as a chain of no calls, which ``run`` computes

    @property
    def chain(self):
        return self  # a property: a cycle that referred to itself would be left to the cycle collector

    def run(self, asking) -> None:
        """``deferred.Pending.get`` of ``asking``, the value of a write: read before the backward
        (computed as ``peek`` computes), or by another thread just before the backward filled it."""
        with self.lock:
            if self.done and self.real is None:
                asking.array = deferred.value(self.nodes[asking.index].value)
                return
            before = _grad_state.changes
            asking.array = engine.array(self.materialize(rebind=False)[asking.index])
            self.mark += _grad_state.changes - before

    def peek(self, position):
        """The value at ``position``, read before the backward: computed from the operands the
        cycle saw, on nodes no tensor moves to, and the cycle goes on replaying (its backward
        computes the same value again)."""
        with self.lock:
            before = _grad_state.changes
            value = self.values[position] = engine.array(self.materialize(rebind=False)[position])
            self.mark += _grad_state.changes - before
            return value


class Traced(Tensor):
    """The result of a replayed op: its cycle and position, and the kind that says its shape,
    dtype and requires_grad.  Anything else asks for ``_node``, which falls back."""

    __slots__ = ("_cycle", "_position", "_kind")

    def __init__(self, cycle, position, kind):
        self._cycle, self._position, self._kind = cycle, position, kind
        self._grad = self._view = self._storage = None
        self._inference = False

    @property
    def _node(self):
        try:
            return _node_slot.__get__(self, Tensor)
        except AttributeError:
            cycle = self._cycle
            cycle.fall_back()
            node = cycle.materialize()[self._position]
            _node_slot.__set__(self, node)
            return node

    @_node.setter
    def _node(self, node):
        _node_slot.__set__(self, node)

    @property
    def shape(self):
        return Size(self._kind.shape)

    @property
    def dtype(self):
        return self._kind.dtype

    @property
    def requires_grad(self) -> bool:
        return self._kind.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    @property
    def ndim(self) -> int:
        return len(self._kind.shape)

    def dim(self) -> int:
        return len(self._kind.shape)

    def size(self, dim=None):
        shape = self._kind.shape
        return Size(shape) if dim is None else shape[dim]

    def __len__(self):
        if not self._kind.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._kind.shape[0]

    @property
    def is_leaf(self) -> bool:
        return not self._kind.requires_grad

    def is_floating_point(self) -> bool:
        return self._kind.dtype.is_floating_point

    def numel(self) -> int:
        n = 1
        for d in self._kind.shape:
            n *= d
        return n

    def _value(self):
        values = self._cycle.values
        value = values.get(self._position)
        if value is None:
            try:
                return engine.array(_node_slot.__get__(self, Tensor))
            except AttributeError:
                return self._cycle.peek(self._position)
        if value.__class__ is deferred.Pending:
            value = values[self._position] = value.get()
        return value


_node_slot = Tensor.__dict__["_node"]  # the slot a Traced tensor fills once it has a node


class Plan:
    """How a replayed backward runs the program the usual path compiled for this trace: where
    each input comes from, which writes its outputs fill, whose ``.grad`` takes the rest."""

    __slots__ = ("program", "inputs", "pending", "owners", "owned", "accumulate", "aliases", "generation")

    def __init__(self, program, inputs, pending, owners, owned, accumulate, aliases):
        """``aliases``: (slot, owner) pairs whose operand was that owner's ``.grad`` (the program
        reads one input for both: ``w.grad`` in ``w -= lr * w.grad`` without ``zero_``)."""
        self.program, self.inputs, self.pending = program, inputs, pending
        self.owners, self.owned, self.accumulate, self.aliases = owners, owned, accumulate, aliases
        self.generation = programs.cache.cleared  # a cleared cache forgets this program too

    def holds(self, cycle, owners) -> bool:
        """Whether the state the program assumes holds: distinct owners whose ``.grad`` is as
        it was (none, zero-filled, or an array added to; a ``.grad`` tensor of one owner only),
        written tensors still holding their placeholders."""
        if self.generation != programs.cache.cleared:
            return False
        if len(owners) > 1 and len({id(o) for o in owners}) != len(owners):
            return False
        if tuple([_grad_state_of(o) for o in owners]) != self.accumulate:
            return False
        grads = [o._grad for o in owners if o._grad is not None]
        if len(grads) > 1 and len({id(g) for g in grads}) != len(grads):
            return False
        for slot, owner in self.aliases:
            if cycle.captured[slot] is not owners[owner]._grad._node:
                return False
        for k in self.pending:
            if cycle._tensor_of(cycle.entries[k][1])._node is not cycle.nodes[k]:
                return False
        return True


def _grad_state_of(tensor) -> int:
    grad = tensor._grad
    if grad is None:
        return 0
    node = grad._node
    if is_zero_fill(node):
        return 1
    return 2 if node.op is LEAF and node.value is not None else 3


def plan_of(cycle, root, ran, before):
    """The Plan of a recorded cycle whose backward ``ran`` (engine.backward's description),
    or None when its program reads something the trace does not name."""
    program, input_nodes, pending_nodes, owners, owned = ran
    tensor_index = {}
    for j, tensor in enumerate(cycle.tensors):
        tensor_index.setdefault(id(tensor()), j)
    owner_slots = [tensor_index.get(id(o)) for o in owners]
    if None in owner_slots:
        return None
    grads = {id(node): k for k, node in enumerate(before.get(j) for j in owner_slots) if node is not None}
    inputs, aliases = [], []
    for node in input_nodes:
        slot = cycle._slot(node)
        position = cycle.position(node)
        if slot is not None and id(node) in grads:
            aliases.append((slot, grads[id(node)]))  # an operand that is the .grad added to: so it must stay
        if slot is not None:
            inputs.append((SLOT, slot))
        elif position is not None and cycle.entries[position][0] in (WRITE, FILL):
            inputs.append((WRITTEN, position))
        elif id(node) in grads:
            inputs.append((GRAD, grads[id(node)]))
        else:
            return None
    pending = []
    for node in pending_nodes:
        position = cycle.position(node)
        if position is None or cycle.entries[position][0] is not WRITE:
            return None
        pending.append(position)
    accumulate = tuple([before.get(("state", j)) for j in owner_slots])
    if 3 in accumulate or cycle.position(root) is None:
        return None
    return Plan(program, tuple(inputs), tuple(pending), tuple(owner_slots),
                tuple([(n.shape, n.dtype, kinds.array(n.shape, n.dtype, False)) for n in owned]), accumulate,
                tuple(aliases))


def _before_backward(tensor, cycle):
    """What a recorded backward's Plan needs from before it runs (each traced tensor's ``.grad``
    node and state), or None; a replaying cycle that reaches a backward it cannot replay falls back."""
    if cycle is None:
        return None
    if cycle.replaying:
        cycle.fall_back()
    if cycle.broken or _grad_state.changes != cycle.mark:
        cycle.broken = True
        return None
    before = {}
    for j, ref in enumerate(cycle.tensors):
        t = ref()
        if t is not None:
            before[("state", j)] = _grad_state_of(t)
            if t._grad is not None:
                before[j] = t._grad._node
    return before


def _after_backward(tensor, root, ran, before) -> None:
    """A backward ran on the usual path: the thread's cycle ends here, and the next one
    replays when this trace equals the last one and its program reads only what it names."""
    if not speed.fast:
        _grad_state.cycle = None
        return
    cycle = _grad_state.cycle
    if cycle is None:
        _grad_state.cycle = Cycle()
        return
    plan, streak, patience = None, 0, 1  # a new trace starts with no patience owed
    position = cycle.position(root)
    traced = before is not None and ran is not None and position is not None
    if traced:
        cycle.entries.append((BACKWARD, position))
        if cycle.entries == cycle.previous:
            streak, patience = cycle.streak + 1, cycle.patience
            plan = plan_of(cycle, root, ran, before) if streak >= patience else None
    _grad_state.cycle = Cycle(cycle.entries if traced else None, plan, streak, patience, cycle.lock)


Tensor._before_backward = _before_backward
Tensor._after_backward = _after_backward


class Stats:
    """Counters for tests: backwards replayed, and cycles that fell back."""

    def __init__(self):
        self.replayed = self.fell_back = 0


stats = Stats()


def _write(tensor, old, node) -> None:
    """``inplace.assign`` for a tensor that shares its storage with no other: the version
    counter counts the write and ``old`` is marked as replaced."""
    storage = tensor._storage or storage_of(tensor)
    mark(storage, old, node)
    if node.requires_grad:
        node.owner = old.owner
    tensor._node = node
    storage.version += 1


def _shares(tensor) -> bool:
    """Whether another live tensor (a view, a detached alias) shares ``tensor``'s storage: a write
    must then reach it (``inplace.assign``), which a replayed write does not do."""
    storage = tensor._storage
    if storage is None or len(storage.members) == 1:
        return False
    return sum(member() is not None for member in storage.members) > 1


