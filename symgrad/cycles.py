"""A torch-style step recorded as a trace, and replayed once it repeats (symgrad.replaying).

A *cycle* runs from just after one ``backward()`` to the next.  While a thread records on the
usual path, each op, in-place write and fill appends one entry to the cycle's trace: the op,
its attributes and grad mode, and each operand as a position earlier in the cycle, an outside
tensor (numbered in order of first use, with its kind), a Python float (numbered likewise, its value
left out: a learning-rate schedule is the same trace) or a shared constant.  When a cycle's
trace equals the one before, and the backward's compiled program reads only arrays the trace
names (its ``Plan``), the thread replays the next cycles: ``symgrad.replaying``.  A replayed
cycle that leaves the trace hands the thread back to a recording cycle (``recording_after``),
which waits longer before replaying that trace again.
"""
from __future__ import annotations

import threading
import weakref

import codegen.compile as programs
from codegen import speed
from symgrad import engine, kinds
from symgrad.grad_mode import _state as _grad_state
from symgrad.kinds import exactly
from symgrad.nodes import CONST, LEAF, constant
from symgrad.storage import DETACH
from codegen import cycle_scan  # a module import: importing codegen may be what imports symgrad
from symgrad.replaying import (BACKWARD, FILL, FIXED, FLOAT, FRUITLESS, GRAD, SLOT, START, WRITE, WRITTEN, Number, Replayer,
                               _gradient_state, _shares, slot_written, worth_replaying)
from symgrad.tracing import is_float_scalar, moving_starts
from symgrad.tensor import Tensor

MAX_ENTRIES = 20_000  # a longer cycle is not traced (its recording would cost more than it saves)
MAX_PATIENCE = 64     # equal traces in a row wanted before replaying again, after falling back repeatedly
MIN_REST, MAX_REST = 8, 256  # cycles a thread traces nothing after traces that do not repeat (doubling)
MISSES = 4            # traces in a row unequal to the one before, before resting


class Cycle:
    """One thread's cycle being recorded: its trace (``entries``) and what its operands were."""

    __slots__ = ("entries", "previous", "captured", "tensors", "slots", "floats", "numbers", "positions", "made", "mark", "broken",
                 "lock", "streak", "patience", "loops", "rest", "misses", "pause", "root_type", "changes", "begun",
                 "__weakref__")

    replaying = False

    def __init__(self, previous=None, streak=0, patience=1, lock=None, loops=None, pause=MIN_REST):
        """``previous``: the trace before; ``streak``: equal traces in a row so far; ``patience``:
        how many replaying needs (it doubles each time a replayed cycle falls back, so a step that
        leaves its trace every few cycles soon stops paying for falling back); ``lock``: the
        thread's (another thread that reads a value takes it); ``loops``: the thread's replays so
        far, by trace (their compiled scans are kept); ``pause``: how long the next rest lasts."""
        self.streak, self.patience, self.previous = streak, patience, previous
        self.entries = []
        self.captured, self.tensors, self.slots = [], [], {}  # outside nodes, their tensors (weak), id -> slot
        self.floats, self.numbers = [], {}  # the constants of the Python floats used, by number; id -> Number
        self.positions, self.made = {}, []  # id of a node made -> its position; weak refs by position
        self.mark, self.broken = _grad_state.changes, False
        self.lock = lock or threading.RLock()
        self.loops = loops if loops is not None else []
        self.rest, self.misses, self.pause, self.root_type, self.changes = 0, 0, pause, None, 0
        self.begun = _grad_state.changes  # nodes recorded and tensors rebound before this cycle

    def resting(self, cycles: int, root, changes: int) -> "Cycle":
        """This cycle, tracing nothing for ``cycles`` cycles (tracing costs a loop that will not
        replay soon ~20 µs a step): a trace waited for, or one that does not repeat.  A cycle that
        ends in a root of another shape or dtype, or records another number of nodes (``changes`` is
        the last one's), is another loop's: it ends the rest (not the root's kind: a new learning
        rate makes a new one)."""
        self.rest, self.broken, self.root_type, self.changes = cycles, True, _type_of(root), changes
        return self

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
            return self._float(node) if tensor is None and is_float_scalar(node) else node
        if tensor is None or node.kind is None:
            return None
        slot = self._slot(node)
        if slot is None:
            if node.value is None and node.op is not LEAF and not node.requires_grad:
                engine.realize_outlived([node])  # made before the cycle (``x.float()`` before the loop): its
                # values now, as PyTorch has them, or each step's program would compute it again from what
                # the trace does not name
            slot = self.slots[id(node)] = len(self.captured)
            self.captured.append(weakref.ref(node))
            self.tensors.append(weakref.ref(tensor))
        return slot, node.kind

    def _float(self, node) -> Number:
        """The trace's reference to a Python float, whose constant is ``node``."""
        number = self.numbers.get(id(node))  # (the constants are held: ids stay theirs)
        if number is None:
            number = self.numbers[id(node)] = Number(len(self.floats), node.dtype)
            self.floats.append(node)
        return number

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
        if None in refs:  # (a result without a kind is traced: its entry keeps its shape and dtype)
            self.broken = True
            return
        moving = op.starts is not None and moving_starts(node)
        if moving:  # a batch sliced at a moving offset is the same trace
            attrs = moving[0]
        self._entry((op, attrs, _grad_state.enabled, refs, _type_of(node)), node, 1)  # (a kind would hold the floats)

    def detached(self, tensor, node) -> None:
        """``tensor.detach()`` made ``node``, a leaf of its values: its entry, if ``tensor`` is a
        result of the cycle (of an op, or written in place: ``(w * 1.0).mul_(2.0)``, whose Traced
        a replayed ``detach`` names; a detached parameter is one more outside tensor, as before:
        its ``detach().numpy()`` each step reads the chain, and the cycle goes on)."""
        position = self.position(tensor._node)
        entry = self.entries[position] if position is not None else None
        if (entry is not None and entry[0] is not FILL
                and (entry[0] is not WRITE or slot_written(self.entries, entry[1]) is None)):
            self._entry((DETACH, (), _grad_state.enabled, (position,), _type_of(node)), node, 0)

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
        """The reference to a tensor written in place: an outside one, or one made earlier in the
        cycle (written, or the result of an op without history: ``sqrt().add_(eps)``); None when
        not traced."""
        ref = self._operand(tensor, old)
        return ref if ref.__class__ is int or ref.__class__ is tuple else None


class Plan:
    """How a replayed backward runs the program the usual path compiled for this trace: where
    each input comes from, which writes its outputs fill, whose ``.grad`` takes the rest."""

    __slots__ = ("program", "inputs", "numbers", "baked", "baked_starts", "pending", "owners", "owned", "accumulate",
                 "aliases", "generation", "declined", "fruitless", "pause")

    def __init__(self, program, inputs, numbers, baked, baked_starts, pending, owners, owned, accumulate, aliases):
        """``numbers``: the program's last inputs, Python floats and indexings' starts, each (FLOAT, a
        Number's index, None), (START, the indexing's position, which of its starts) or (FIXED, the
        array of a constant no op of the trace takes, None); ``baked``: by Number, the value of those
        the program bakes in (None for the others: a replayed cycle must use the same),
        ``baked_starts`` likewise the starts of each indexing by position; ``aliases``: (slot, owner)
        pairs whose operand was that owner's ``.grad`` (the program reads one input for both:
        ``w.grad`` in ``w -= lr * w.grad`` without ``zero_``)."""
        self.program, self.inputs, self.numbers, self.pending = program, inputs, numbers, pending
        self.baked, self.baked_starts = baked, baked_starts
        self.owners, self.owned, self.accumulate, self.aliases = owners, owned, accumulate, aliases
        self.generation = programs.cache.cleared  # a cleared cache forgets this program too
        self.declined = False  # replaying this trace costs more than recording it (symgrad.replaying)
        self.fruitless = 0  # replays of it in a row that fell back before their second backward
        self.pause = MIN_REST  # the rest that ``FRUITLESS`` of them earn next (doubling)

    def wait_longer(self) -> int:
        """The rest that replays falling back before their second backward earn: the trace is tried
        again after it, and one more such replay earns twice as long (a loop that changes later,
        a debugging read that goes away, replays again)."""
        pause, self.pause = self.pause, min(2 * self.pause, MAX_REST)
        self.fruitless = FRUITLESS - 1
        return pause


def plan_of(cycle, root, ran, before):
    """The Plan of a recorded cycle whose backward ``ran`` (engine.backward's description),
    or None when its program reads something the trace does not name."""
    program, input_nodes, float_nodes, start_nodes, pending_nodes, owners, owned = ran
    numbers, baked, baked_starts = [], [None] * len(cycle.floats), {}
    taken = dict(zip(program.positions, program.values)) if program.__class__ is engine.NumbersBound else {}
    for walked, node in float_nodes:  # the program's inputs, or baked in: a replayed cycle must use the same
        number = cycle.numbers.get(id(node))  # None: a constant of an op's own
        if walked in taken:
            numbers.append((FIXED, taken[walked], None) if number is None else (FLOAT, number.index, None))
        elif number is not None:
            baked[number.index] = node.attrs[0]
    for walked, node in start_nodes:
        position, starts = cycle.position(node), moving_starts(node)[1]
        if walked in taken:
            if position is None:  # an input of the program the trace does not name
                return None
            numbers += [(START, position, j) for j in range(len(starts))]
        elif position is not None:
            baked_starts[position] = starts
    if taken:
        program = program.compiled
    numbers, baked = tuple(numbers), tuple(baked)
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
        if position is None or cycle.entries[position][0] is not WRITE and cycle.entries[position][0] is not DETACH:
            return None
        pending.append(position)  # (a detached result's values: a replayed one is made again if read)
    accumulate = tuple([before.get(("state", j)) for j in owner_slots])
    if 3 in accumulate or cycle.position(root) is None:
        return None
    return Plan(program, tuple(inputs), numbers, baked, baked_starts, tuple(pending), tuple(owner_slots),
                tuple([(n.shape, n.dtype, kinds.array(n.shape, n.dtype, False)) for n in owned]), accumulate,
                tuple(aliases))


def _before_backward(tensor, cycle):
    """What a recorded backward's Plan needs from before it runs (each traced tensor's ``.grad``
    node and state), or None; a replaying cycle that reaches a backward it cannot replay falls back."""
    if cycle is not None and cycle.replaying:
        cycle.fall_back()
        cycle = _grad_state.cycle
    if cycle is None or cycle.replaying:
        return None
    if cycle.broken or _grad_state.changes != cycle.mark:
        cycle.broken = True
        return None
    before = {}
    for j, ref in enumerate(cycle.tensors):
        t = ref()
        if t is not None:
            before[("state", j)] = _gradient_state(t)
            if t._grad is not None:
                before[j] = t._grad._node
    return before


def _after_backward(tensor, root, ran, before) -> None:
    """A backward ran on the usual path: the thread's cycle ends here, and the next one
    replays when this trace equals the last one and its program reads only what it names.
    While it waits for more equal traces, or after traces that do not repeat, it rests."""
    if not speed.fast:
        _grad_state.cycle = None
        return
    cycle = _grad_state.cycle
    if cycle is None or cycle.replaying:
        _grad_state.cycle = Cycle()
        return
    if cycle.rest:
        cycle.rest -= 1
        changes, cycle.begun = _grad_state.changes - cycle.begun, _grad_state.changes
        if _type_of(root) is not cycle.root_type or changes != cycle.changes:  # another loop
            _grad_state.cycle = Cycle(None, 0, 1, cycle.lock, cycle.loops)
        elif not cycle.rest:  # the next cycle is traced, and compared with the last one traced
            _grad_state.cycle = Cycle(cycle.previous, cycle.streak, cycle.patience, cycle.lock, cycle.loops,
                                      cycle.pause)
        return
    plan, streak, patience = None, 0, 1  # a new trace starts with no patience owed
    changes = _grad_state.changes - cycle.begun
    position = cycle.position(root)
    traced = before is not None and ran is not None and position is not None
    if traced:
        cycle.entries.append((BACKWARD, position))
        if cycle.entries == cycle.previous:
            streak, patience = cycle.streak + 1, cycle.patience
            plan = plan_of(cycle, root, ran, before) if streak >= patience else None
            if plan is not None and not worth_replaying(plan, cycle.entries):
                plan = None
    entries = cycle.entries if traced else None
    if plan is None:
        following = _grad_state.cycle = Cycle(entries, streak, patience, cycle.lock, cycle.loops, cycle.pause)
        if streak and streak + 1 < patience:  # equal, waiting: the cycles between are not traced
            following.streak = patience - 1
            following.resting(patience - 1 - streak, root, changes)
        elif streak >= patience or not streak and cycle.misses + 1 >= MISSES:  # cannot replay, or no repeat
            following.previous = None if not streak else entries
            following.pause = min(2 * cycle.pause, MAX_REST)
            following.resting(cycle.pause, root, changes)
        elif not streak:
            following.misses = cycle.misses + 1
        return
    known = next((known for known in cycle.loops if known[1].program is plan.program
                  and known[1].generation == plan.generation and known[0] == entries), None)
    if known is None:  # a trace replayed again later keeps its loop (and the scans compiled for it)
        del cycle.loops[:-7]
        known = (entries, plan, cycle_scan.Loop(plan.program))
        cycle.loops.append(known)
    elif known[1].declined or known[1].fruitless >= FRUITLESS:
        pause = MAX_REST if known[1].declined else known[1].wait_longer()
        following = _grad_state.cycle = Cycle(entries, streak, patience, cycle.lock, cycle.loops, pause)
        following.resting(pause, root, changes)
        return
    _grad_state.cycle = Replayer(*known[:2], streak, patience, cycle.lock, known[2], cycle.loops, recording_after)


def recording_after(replayer, real, slots):
    """The recording cycle that goes on from a replayed one that fell back at its cursor: its
    entries so far, made again as ``real`` from the slot nodes ``slots``."""
    cycle = Cycle(replayer.entries, 0, min(2 * replayer.patience, MAX_PATIENCE), replayer.lock, replayer.loops)
    cycle.entries = list(replayer.entries[:replayer.cursor])
    cycle.positions = {id(node): p for p, node in enumerate(real)}
    cycle.made = [weakref.ref(node) for node in real]
    for slot in range(len(replayer.captured)):
        node = slots.get(slot)
        if node is None:
            cycle.broken = True
            break
        cycle.slots[id(node)] = slot
        cycle.captured.append(weakref.ref(node))
        cycle.tensors.append(weakref.ref(replayer.captured[slot]))
    floats = replayer.record.floats
    for entry in cycle.entries:  # the floats the entries kept use, in order of first use
        if entry[0] is not WRITE and entry[0] is not FILL:
            for ref in entry[3]:
                if ref.__class__ is Number and ref.index == len(cycle.floats):
                    cycle._float(constant(floats[ref.index], (), ref.dtype))
    return cycle


def _type_of(node):
    """The kind of an array like ``node``'s values: what a trace keeps of a result."""
    return kinds.array(node.shape, node.dtype, node.requires_grad)


Tensor._before_backward = _before_backward
Tensor._after_backward = _after_backward
