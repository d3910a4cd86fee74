"""A cycle replayed: ops checked against the trace, the step's state carried by a chain of cycles.

``symgrad.cycles`` records a thread's step (the ops, writes and fills from one ``backward`` to the
next) and, once two steps in a row record the same trace and the backward's program reads only what
the trace names, hands the thread a ``Replayer``.  From then on an op only checks ``trace[cursor]``
and returns a ``Traced`` tensor (position and kind, no node); an in-place write or ``zero_()`` only
checks the entry and marks the tensor *carried*: its values are now a slot of the thread's
``Chain``, which nothing computes yet.  An update of two operands (``w -= lr * w.grad``, an
optimizer's) checks its op and its write together, and makes no result for the op (``update``).
``backward()`` at the trace's end appends the cycle to the chain: which carried slot or outside
array feeds each input of the compiled backward program, and which output (or fill) each carried
slot takes.  Every ``cycle_scan.LENGTH`` cycles the chain runs as one ``lax.scan`` of that program
(loop-invariant arrays passed once, the losses stacked); a shorter chain, run because someone read a
value, runs cycle by cycle.

Reading is what ends a chain early.  A carried tensor is one whose class was switched to a subclass
that answers shape, dtype, requires_grad and ``.grad`` from its slot; asked for its node (to read
it, detach it, print it) it gives a leaf of the value the chain has reached (a write of the cycle
going on is computed aside, from what the cycle saw) and stays carried.  Given a node, it stops
being carried.  A replayed result (``Traced``) read before its backward is computed aside the same
way; asked for its node, its cycle *falls back*, as it does at anything off the trace (an op or
write the entry does not name, a hook, a ``backward`` with arguments): the chain *settles* (runs,
and every carried tensor takes its node back), the cycle's entries run again on the usual path
with the operands they saw (``_nodes``), its tensors take the real nodes, and the thread records
the rest of the cycle.  Results of the cycle still held at its backward (a prediction kept next to
its loss) keep, while they live, the state their cycle began from, and are computed from it if
read.  A view made in a cycle joins its base's storage only if it outlives the cycle; a write to a
tensor that a live view of the cycle aliases is off the trace.  A trace whose replays keep falling
back before their second backward earns the thread a rest (symgrad.cycles), longer each time.
Another thread that needs a carried tensor or a result of the cycle going on (the replaying thread
ended, waits, or hands its steps to another) takes the cycle over (``_hand_over``): the chain
settles and the cycle's writes so far are made for real, so the other thread sees them and its own
changes land on them; the replaying thread falls back at its next step.

What a replayed step costs is Python: an outside tensor that comes in the slot it came in last
cycle is taken on a glance (``_takes``), and a cycle that saw the same carried tensors as the last
one reuses its wiring (``_wired_as_before``) instead of building it again.  A
loop that reads after every step would leave XLA idle while that Python runs: there a cycle run at
its backward dispatches the next one at once, on the state it left (a ``Guess``), which the next
cycle takes if it passes the very arrays the guess ran on.

Nothing here differentiates: the program is the symbolic backward the usual path compiled.
"""
from __future__ import annotations

import math
import sys
import threading
import weakref
from operator import attrgetter, is_

import numpy as np

import codegen.compile as programs
from codegen import cycle_scan, deferred, speed
from symgrad import donation, engine, hooks, kinds
from symgrad.dtypes import Size, number_in, size_at
from symgrad.grad_mode import _state as _grad_state
from symgrad.kinds import exactly
from symgrad.nodes import (_default_float, _scalars, CONST, LEAF, Node, constant, lazy_leaf, leaf, not_aside,
                           outlived, own_constant, program_ran)
from symgrad.storage import DETACH, mark, storage_of, viewed
from symgrad.inplace import write_values
from symgrad.tensor import Tensor, record as record_op
from symgrad.tracing import gradient_path

SHORT_TRACE = 8  # a step this short, read after every backward, costs more replayed than recorded (W1)
FRUITLESS = 3  # replays of a trace in a row that fall back before their second backward: the thread rests
WRITE, FILL, BACKWARD = "write", "fill", "backward"
SLOT, WRITTEN, GRAD = 0, 1, 2  # where a program input comes from: an outside operand, a write, a .grad
FLOAT, START, FIXED = 0, 1, 2  # where a program's number input comes from: a float, an indexing's start, a constant
_NUMBERS = frozenset((int, float, bool))
_new = object.__new__
_node_slot = Tensor.__dict__["_node"]
_raw = _node_slot.__get__  # a tensor's node slot as it is: a Node, or the Carry of a carried tensor


class Number:
    """A Python float operand in a trace: the cycle's ``index``-th float (in order of first use),
    of the default float dtype ``dtype``.  Its value is not part of the trace: a learning-rate
    schedule replays, each cycle's floats inputs of the program (or checked equal to the values a
    program compiled for one set of them bakes in: the Plan's ``baked``)."""

    __slots__ = ("index", "dtype")

    def __init__(self, index, dtype):
        self.index, self.dtype = index, dtype

    def __eq__(self, other):
        return other.__class__ is Number and other.index == self.index and other.dtype is self.dtype

    def __hash__(self):
        return hash((self.index, self.dtype))


def _same_float(a, b) -> bool:
    """Whether two floats are the same number to a program (the sign of a zero counts; a NaN is only itself)."""
    return a is b or a == b and (a != 0 or math.copysign(1.0, a) == math.copysign(1.0, b))


_NUMBER_ARRAYS: dict = {}


def _float_array(value):
    """A cycle's float as the program's float64 input: one array per value, so an unchanged
    learning rate is passed once to a scan (loop-invariant), not stacked."""
    return _number_array((value, math.copysign(1.0, value)), value, np.float64)


def _start_array(value):
    """An indexing's start as the program's int64 input, one array per value likewise."""
    return _number_array(value, value, np.int64)


def _number_array(key, value, dtype):
    array = _NUMBER_ARRAYS.get(key)
    if array is None:
        if len(_NUMBER_ARRAYS) >= 1024:
            _NUMBER_ARRAYS.clear()
        array = np.asarray(value, dtype)
        array.flags.writeable = False
        if value == value:
            _NUMBER_ARRAYS[key] = array
    return array


class Stats:
    """Counters for tests: backwards replayed, cycles that fell back, guesses made and guesses taken,
    reads before a backward computed by a program kept from an earlier cycle (``Replayer._peek``)."""

    def __init__(self):
        self.replayed = self.fell_back = self.guesses = self.guessed = self.peeks = 0


stats = Stats()


# ------------------------------------------------------------------------ carried tensors


class Carry:
    """What a carried tensor's node slot holds: its slot in the chain, the kind its values have
    (what the trace names), the node it held before (for the version counter), its class, and the
    constant of a ``zero_()`` that was its last write."""

    __slots__ = ("chain", "index", "kind", "old", "cls", "fill")

    def __init__(self, chain, index, kind, old, cls):
        self.chain, self.index, self.kind, self.old, self.cls, self.fill = chain, index, kind, old, cls, None


class _Kinded:
    """Shape, dtype and requires_grad of a tensor without a node, from its ``_kind``."""

    __slots__ = ()

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
        return Size(shape) if dim is None else size_at(shape, dim)

    def numel(self) -> int:
        return Size(self._kind.shape).numel()

    def __len__(self):
        if not self._kind.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._kind.shape[0]

    def is_floating_point(self) -> bool:
        return self._kind.dtype.is_floating_point


def _carried_node(tensor):
    """A node of a carried tensor's values (``Replayer.node_of``)."""
    carry = _raw(tensor, Tensor)
    if carry.__class__ is not Carry:
        return carry
    return carry.chain.replayer.node_of(tensor, carry)


def _set_carried_node(tensor, node) -> None:
    """A carried tensor takes a node: it stops being carried first (``Replayer.release``)."""
    carry = _raw(tensor, Tensor)
    if carry.__class__ is Carry:
        carry.chain.replayer.release(tensor, carry)
    _node_slot.__set__(tensor, node)


def _leaf(kind, value, tensor):
    """A leaf holding ``value`` (an array, or a node whose array it takes) of ``kind``, owned by
    ``tensor`` if it requires grad."""
    if value.__class__ is Node:
        value = engine.array(value)
    node = Node(LEAF, (), (), kind.shape, kind.dtype, kind.requires_grad, value,
                kinds.array(kind.shape, kind.dtype, kind.requires_grad), None, ())
    if node.requires_grad:
        node.owner = weakref.ref(tensor)
    return node


def _carried_version(tensor) -> int:
    """Its storage's version, with this cycle's writes to it so far (counted in at the backward)."""
    writes = _raw(tensor, Tensor).chain.replayer.writes
    return Tensor._version.fget(tensor) + sum(1 for written in writes if written is tensor)


_CARRIED: dict = {}


def carried_class(cls):
    """The class a tensor of class ``cls`` takes while carried (same layout, same name)."""
    carried = _CARRIED.get(cls)
    if carried is None:
        carried = _CARRIED[cls] = type(cls.__name__, (_Kinded, cls), {
            "__slots__": (), "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "_node": property(_carried_node, _set_carried_node),
            "_kind": property(lambda t: _raw(t, Tensor).kind),
            "_usual_class": cls,  # the class it has again when no longer carried (symgrad.serialization)
            "grad": property(attrgetter("_grad"), Tensor.grad.fset, Tensor.grad.fdel),  # a leaf: no warning (the
            # slot read by attrgetter: twice as fast as its descriptor's ``__get__``, and read each step)
            "_version": property(_carried_version),
            "is_leaf": property(lambda t: True)})
    return carried


_CARRIED_TENSOR = carried_class(Tensor)


# ------------------------------------------------------------------------- traced results


class Record:
    """One replayed cycle, as its results know it: done once its backward is in the chain; then the
    root's value (the chain's ``index``-th), and for results held after the backward (``held``, weak)
    the operands they need should anyone read one: the outside nodes and carried slots the cycle saw
    (``operands``), the chain's state when the cycle began (``start``, kept when the chain runs while
    they live), and the cycle's nodes once made (``real``)."""

    __slots__ = ("replayer", "done", "value", "index", "held", "operands", "start", "real", "floats", "moved")

    def __init__(self, replayer):
        self.replayer, self.done, self.value, self.index = replayer, False, None, None
        self.held = self.operands = self.start = self.real = None
        self.floats = []  # the values of the trace's Numbers in this cycle
        self.moved = {}  # position of an indexing whose starts the trace leaves out -> (its attributes, starts)

    def holds(self) -> bool:
        """Whether a result held after the backward is still alive (it may yet be read)."""
        held = self.held
        if held is not None:
            for ref in held:
                if ref() is not None:
                    return True
            self.held = self.operands = None
        return False


class Peek:
    """A program that computed entries of a cycle from what the cycle saw (``Replayer._peek``):
    which slot feeds each input, then which of the cycle's floats (by Number) and the starts of
    which of its indexings (by position: a batch at a moving offset), and the positions of its
    results."""

    __slots__ = ("compiled", "slots", "numbers", "starts", "positions", "generation")

    def __init__(self, compiled, slots, positions, numbers, starts):
        self.compiled, self.slots, self.positions = compiled, slots, positions
        self.numbers, self.starts = numbers, starts
        self.generation = programs.cache.cleared  # a cleared cache forgets this program too


class Traced(_Kinded, Tensor):
    """The result of a replayed op: its cycle's record, its position and kind.  Asking its node
    makes the cycle going on fall back (a done cycle builds its graph, freed, instead).  Made by
    ``Replayer.op`` alone, its slots set there (no ``__init__`` frame: one is made per op)."""

    __slots__ = ("_record", "_position", "_kind")
    _usual_class = Tensor  # the class of the result the usual path makes

    @property
    def _node(self):
        try:
            return _node_slot.__get__(self, Tensor)
        except AttributeError:
            return self._record.replayer.node_for(self)

    @_node.setter
    def _node(self, node):
        _node_slot.__set__(self, node)

    @property
    def is_leaf(self) -> bool:
        return not self._kind.requires_grad

    def _value(self):
        """Values are computed without falling back: a done cycle's root from the chain, a result of
        the cycle going on from what it saw."""
        try:
            return engine.array(_node_slot.__get__(self, Tensor))
        except AttributeError:
            return self._record.replayer.value_of(self)


# ----------------------------------------------------------------------------- the chain


class Chain:
    """Replayed cycles of one thread not run yet, and the state they carry: per carried slot its
    tensor and its value after the cycles run so far (an array, or at first the node it had).

    A loop that reads a value after every step (W1, W4: the gradient) gains nothing from waiting:
    a chain read one cycle after it began makes the next ones run at their backward (``eager``
    cycles, the program dispatched while Python goes on), twice as many each time it happens
    again, as ``codegen.deferred`` does with its programs.

    Such a loop waits for each step's program, then spends the next step's Python checking the
    ops against the trace while XLA idles.  So a cycle run alone that passed the outside arrays the
    one before it did dispatches the next one at once (a ``Guess``: the state it left, the same
    outside arrays), and the next cycle takes the guess's results when it passes the very arrays
    the guess ran on; else they are dropped (XLA ran them first: a wasted guess delays the cycle)
    and guessing rests, twice as long each time a guess is wasted (half as long after one taken)."""

    __slots__ = ("replayer", "carries", "tensors", "state", "signature", "outside", "records", "eager", "wait",
                 "guess", "guess_after", "guess_rest", "last_outside", "epoch")

    def __init__(self, replayer):
        self.replayer = replayer
        self.carries, self.tensors, self.state = [], [], []
        self.signature, self.outside, self.records = None, [], []
        self.eager, self.wait = 0, 8
        self.guess, self.guess_after, self.guess_rest, self.last_outside = None, 0, 1, None
        self.epoch = 0  # counts the tensors that became carried or plain again (``Replayer._wired_as_before``)

    def append(self, signature, outside, record) -> None:
        if signature != self.signature:
            self.run(read=False)
            self.signature = signature
        self.outside.append(outside)
        self.records.append(record)
        if self.eager:
            self.eager -= 1
            self.run(read=False)
            self._next_guess(outside)
        elif len(self.records) > cycle_scan.LENGTH:  # the newest cycle waits: its results may be held
            self.run(read=False, keep=1)

    def run(self, read=True, keep=0) -> None:
        """Run the cycles appended but the last ``keep``: carried values and roots computed (``read``:
        because someone reads a value).  A cycle whose held results still live keeps the state it
        began from, so the run stops before it (rarely: it is mostly the newest cycle)."""
        records = self.records
        count = len(records) - keep
        if count <= 0:
            return
        if read:
            if count == 1:
                self.eager, self.wait = self.wait, min(2 * self.wait, deferred.MAX_WAIT)
            else:
                self.wait = 8
        begin = 0
        for k in range(1, count):
            if records[k].holds():
                self._run(begin, k)
                begin = k
        self._run(begin, count)
        holding = [record for record in records[:count] if record.held is not None]
        del self.outside[:count], self.records[:count]
        for record in holding if self.replayer is not None else ():  # their held results get their values
            self.replayer.compute_held(record)

    def _run(self, begin, end) -> None:
        records = self.records
        if records[begin].holds():
            records[begin].start = list(self.state)
        # the slots the cycles were wired with; a tensor the cycle going on made carried since waits
        width = len(self.signature[1])
        state, later = self.state[:width], self.state[width:]
        guess, self.guess = self.guess, None
        if guess is not None and end - begin == 1 and guess.fits(self.signature, state, self.outside[begin]):
            roots, state = guess.roots, guess.state
            self.guess_rest = max(1, self.guess_rest // 2)  # (a guess taken every other step still rests)
            stats.guessed += 1
        else:
            if guess is not None:
                self.guess_after, self.guess_rest = self.guess_rest, min(2 * self.guess_rest, deferred.MAX_WAIT)
            roots, state = self._dispatch(state, self.outside[begin:end])
        self.state = list(state) + later
        for index, record in enumerate(records[begin:end]):
            record.value, record.index = roots, index

    def _next_guess(self, outside) -> None:
        """The next cycle dispatched now, from the state this one left and the outside arrays it
        passed, when the one before passed them too, or the same but for indexings' starts (a batch
        at a moving offset: then each start one stride on).  A learning rate that changes every
        step, or a new batch tensor every step, is not guessed."""
        last, self.last_outside = self.last_outside, outside
        if self.records or self.state and self.state[0].__class__ is Node or last is None or len(last) != len(outside):
            return  # (a cycle still waits, the state is not all arrays yet, or this is the first)
        if self.guess_after:
            self.guess_after -= 1
            return
        try:
            if not _same(last, outside):
                outside = _strided(last, outside)
                if outside is None:
                    return
            roots, state = self._dispatch(self.state, [outside])
        except Exception:  # noqa: BLE001 - a guess never raises: the cycle it guessed runs on its own
            return
        self.guess = Guess(self.signature, self.state, outside, roots, state)
        stats.guesses += 1

    def _dispatch(self, state, outsides):
        """The program run from ``state`` for each cycle's outside arrays (nodes or arrays): the
        cycles' roots and the state after them."""
        with deferred.on_arrays():
            arrays = [tuple(map(_array, outside)) for outside in outsides]
            return self.replayer.loop.run(self.signature, self.replayer.fills(self.signature),
                                          [_array(s) for s in state], arrays)

    def settle(self) -> None:
        """Run, and give each carried tensor its node back (it is a plain tensor again)."""
        self.run()
        self.guess = None
        for carry, tensor, value in zip(self.carries, self.tensors, self.state):
            _restore(tensor, carry, value)
        self.carries, self.tensors, self.state = [], [], []


def _strided(last, outside):
    """The outside arrays of the cycle after ``outside`` if the arrays that moved since ``last`` are
    all indexings' starts (``_start_array``), each moving by the same stride again; else None."""
    guessed = []
    for before, now in zip(last, outside):
        if before is not now:
            if not (now.__class__ is before.__class__ is np.ndarray and now.dtype == before.dtype == np.int64):
                return None
            now = _start_array(2 * int(now) - int(before))
        guessed.append(now)
    return tuple(guessed)


class Guess:
    """A cycle run before it was replayed (``Chain._next_guess``): what it ran on, and its results."""

    __slots__ = ("signature", "before", "outside", "roots", "state")

    def __init__(self, signature, before, outside, roots, state):
        self.signature, self.before, self.outside = signature, tuple(before), outside
        self.roots, self.state = roots, state

    def fits(self, signature, state, outside) -> bool:
        """Whether a cycle of ``signature`` on ``state`` and ``outside`` passes the very arrays this
        ran on (then its results are this one's: a program is a function of its inputs)."""
        return signature is self.signature and _same(state, self.before) and _same(outside, self.outside)


def _same(these, those) -> bool:
    """Whether two sequences hold the very same objects (never ``==``: a tensor's is an op)."""
    return len(these) == len(those) and all(map(is_, these, those))


_ZEROS: dict = {}


def _zeros(kind):
    """An array of zeros of ``kind``'s shape and dtype, made once."""
    zeros = _ZEROS.get(kind)
    if zeros is None:
        if len(_ZEROS) > 256:
            _ZEROS.clear()
        zeros = _ZEROS[kind] = cycle_scan.filled(kind.shape, 0, kind.dtype.numpy)
    return zeros


def _array(value):
    """An array from a node or a deferred result (computed if need be), or the array itself."""
    if value.__class__ is Node:
        array = value.value
        return engine.array(value) if array is None or array.__class__ is deferred.Pending else array
    return value.get() if value.__class__ is deferred.Pending else value


def _value_leaf(kind, value):
    """A leaf of ``kind`` holding ``value`` (an array, or a node or deferred result it takes), owned by
    no tensor: an operand as a cycle saw it."""
    return Node(LEAF, (), (), kind.shape, kind.dtype, kind.requires_grad, _array(value), kind, None, ())


def _restore(tensor, carry, value) -> None:
    """A carried tensor made plain again, holding ``value``."""
    node = _leaf(carry.kind, value, tensor)
    if carry.old is not None:
        mark(storage_of(tensor), carry.old, node)
    _node_slot.__set__(tensor, node)
    tensor.__class__ = carry.cls
    carry.chain.epoch += 1


# --------------------------------------------------------------------------- the replayer


class Replayer:
    """One thread replaying one trace.  ``symgrad.cycles`` made it; ``apply``, ``apply_inplace``,
    ``fill_inplace``, the optimizers' updates and ``backward`` ask it first.  Slots: its attributes
    are read on every replayed op (and an instance dict of more than 30 keys stops sharing them,
    which made each read slower: W5 lost 1 µs a step to its 30th)."""

    __slots__ = ("entries", "plan", "streak", "patience", "lock", "loop", "loops", "recording_after", "thread",
                 "chain", "gradient_slots", "fill_specs", "filled", "fill_kinds", "computed", "pending_slots", "added",
                 "wiring", "wiring_epoch", "captured", "backwards", "cursor", "record", "before", "taken", "latest",
                 "writes", "made", "handed", "views", "mark", "holders", "peeks", "peeked", "state")
    replaying = True

    def __init__(self, entries, plan, streak, patience, lock, loop, loops, recording_after):
        """``loop``: the trace's codegen.cycle_scan.Loop; ``recording_after``: symgrad.cycles' way
        back to recording, after falling back."""
        self.entries, self.plan, self.streak, self.patience, self.lock = entries, plan, streak, patience, lock
        self.loop, self.loops, self.recording_after = loop, loops, recording_after
        self.thread = threading.get_ident()
        self.state = _grad_state.__dict__  # this thread's grad state (grad_mode._State), for what runs in this thread
        # alone: op, write, fill, backward (a replayer is its thread's ``_grad_state.cycle``)
        self.chain = Chain(self)
        self.gradient_slots = {}  # id of an owner -> the slot its .grad is carried in
        self.fill_specs = {}  # signature -> its fills
        self.filled = {}  # position of a fill -> the (class, value, dtype) last seen filling with its value
        self.fill_kinds = {i: (lazy_leaf(e[3], requires_grad=False).kind, lazy_leaf(e[3], requires_grad=True).kind)
                           for i, e in enumerate(entries) if e[0] is FILL}  # the target's requires_grad stays
        self.computed = {p: 1 + k for k, p in enumerate(plan.pending)}  # a write -> the output with its value
        last = {}  # slot of a tensor written -> its last write in the trace
        for p, entry in enumerate(entries):
            if entry[0] is WRITE or entry[0] is FILL:
                slot = slot_written(entries, entry[1])
                if slot is not None:
                    last[slot] = p
        self.pending_slots = [(p, slot) for slot, p in last.items() if p in self.computed]  # writes still held
        self.added = [j for j, state in enumerate(plan.accumulate) if state]  # owners whose .grad the backward
        # adds into (in place, as PyTorch does)
        self.wiring = self.wiring_epoch = None  # what the last cycle was wired from, its wiring (``_wire``), and
        # the chain's epoch when a cycle ended as wired
        self.captured = []
        self.peeks = {}  # (cursor, position) -> the Peek that computed a value read there in an earlier cycle
        self._start()
        self.backwards = 0  # replayed by this replayer: one, then a fall back, did not pay for the start

    def fills(self, signature) -> dict:
        """The fills a signature names: (shape, value, dtype) of each."""
        fills = self.fill_specs.get(signature)
        if fills is None:
            fills = self.fill_specs[signature] = {}
            for s in signature[0] + signature[1]:
                if s.__class__ is tuple and s[0] == "fill":
                    const = self.entries[s[1]][3]
                    fills[s] = (const.shape, const.attrs[0], const.dtype.numpy)
        return fills

    def _start(self) -> None:
        self.cursor = 0
        self.record = Record(self)
        # the outside tensors of the last cycle, in their slots: a slot that takes the tensor it took then
        # takes it on a glance (``_takes``); ``taken`` (ids) is made at the first that does not
        self.before, self.captured, self.taken = self.captured, [], None
        self.latest, self.writes, self.made, self.holders = {}, [], [], None
        self.handed = None  # another thread's hand-over: the nodes it made of this cycle, and its slots
        self.views = []  # positions in ``made`` of the views made in this cycle
        self.mark = self.state["changes"]
        self.peeked = {}  # position -> the array a read of this cycle computed aside (``_peek``)

    # ---------------------------------------------------------------------- on the trace

    def op(self, op, args, attrs):
        """The ``Traced`` result of ``op`` on ``args``, or None after falling back (off the trace).
        An operand made earlier in the cycle is checked here, any other by ``_takes`` (this runs
        for every op of every replayed step: one and two operands are spelled out)."""
        i = self.cursor
        entry = self.entries[i]
        if (entry[0] is op and entry[2] is self.state["enabled"]
                and (entry[1] == attrs or self._moved(i, op, attrs, args))):
            record, refs, n = self.record, entry[3], len(args)
            if n != len(refs):
                ok = False
            elif n == 2:
                a, b = args
                ra, rb = refs
                ok = ((a._record is record and a._position == ra if a.__class__ is Traced else self._takes(a, ra))
                      and (b._record is record and b._position == rb if b.__class__ is Traced else self._takes(b, rb)))
            elif n == 1:
                a, ra = args[0], refs[0]
                ok = a._record is record and a._position == ra if a.__class__ is Traced else self._takes(a, ra)
            else:
                ok = False
                for a, ref in zip(args, refs):
                    if a.__class__ is Traced:
                        if a._record is not record or a._position != ref:
                            break
                    elif not self._takes(a, ref):
                        break
                else:
                    ok = True
            if ok:
                self.cursor = i + 1
                traced = _new(Traced)
                traced._record, traced._position, traced._kind = record, i, entry[4]
                traced._grad = traced._view = traced._storage = None
                traced._inference = False
                self.made.append(traced)
                return traced
        self.fall_back()
        return None

    def _takes(self, a, ref) -> bool:
        """Whether ``a`` (not a result of this cycle) is what ``ref`` names, as an operand or as the
        target of a write: a float of the cycle, a constant number, an outside tensor's slot, a
        tensor written at a position of the cycle, or a constant node."""
        rcls = ref.__class__
        if rcls is tuple:
            slot, captured = ref[0], self.captured
            count = len(captured)
            if slot < count:
                return captured[slot] is a
            before = self.before
            if slot == count and slot < len(before) and before[slot] is a:
                # the tensor this slot took last cycle: what ``_capture`` asks of the object itself holds
                # still; what it asks of this cycle is asked again.  While every slot came so (``taken``
                # None) it is in no other slot: last cycle's tensors were distinct (and a tensor written
                # in this cycle is in a slot)
                raw = _raw(a, Tensor)
                if raw.kind is ref[1] and (raw.__class__ is Node or raw.chain is self.chain):
                    taken = self.taken
                    if taken is None:
                        captured.append(a)
                        return True
                    key = id(a)
                    if key not in taken:
                        taken.add(key)
                        captured.append(a)
                        return True
            return self._capture(a, ref)
        cls = a.__class__
        if cls in _NUMBERS:
            if rcls is Number:
                if cls is not float or ref.dtype is not _default_float[0]:
                    return False
                floats, k = self.record.floats, ref.index
                return (k < len(floats) and floats[k] is a) or self._took(k, a)
            return _scalars.get((cls, a, _default_float[0])) is ref
        if rcls is int:
            return self.latest.get(id(a)) == ref
        return isinstance(a, Tensor) and _raw(a, Tensor) is ref

    def _took(self, index, value) -> bool:
        """Whether the float ``value`` can be the trace's ``index``-th (then it is, for this cycle):
        the one it was earlier in the cycle, or a first use (of the value baked in, if the program
        bakes it in)."""
        floats = self.record.floats
        if index < len(floats):
            return _same_float(floats[index], value)
        baked = self.plan.baked
        if baked is not None and baked[index] is not None and not _same_float(baked[index], value):
            return False
        floats.append(value)
        return True

    def _moved(self, position, op, attrs, args) -> bool:
        """Whether ``attrs`` are the entry's with other starts (a batch at a moving offset; those the
        program bakes in, if it does); then they are this cycle's."""
        if op.starts is None or not args or not isinstance(args[0], Tensor):
            return False
        moving = op.starts.erase(attrs, args[0].shape)
        if moving is None or moving[0] != self.entries[position][1]:
            return False
        baked = self.plan.baked_starts.get(position)
        if baked is not None and baked != moving[1]:
            return False
        self.record.moved[position] = (attrs, moving[1])
        return True

    def _number_inputs(self) -> list:
        """The arrays of the program's number inputs, in order: this cycle's floats and starts, or
        constants (a float of the program no op of the trace takes)."""
        record = self.record
        return [_float_array(record.floats[a]) if tag == FLOAT else _start_array(record.moved[a][1][b]) if tag == START
                else a for tag, a, b in self.plan.numbers]

    def viewed(self, view, base, step) -> None:
        """``view`` (a Traced) aliases ``base`` through ``step``.  It joins its base's storage only
        if it outlives the cycle (``_register_views``): until then a write to a tensor that a live
        view of this cycle aliases leaves the trace (``_viewed``)."""
        view._view = (base, step, self.state["enabled"])
        view._inference = base._inference
        self.views.append(len(self.made) - 1)

    def detach(self, tensor):
        """``tensor.detach()`` replayed, when ``tensor`` is a result of this cycle: its Traced, a view
        of it; or the root of a cycle done (``losses.append(loss.detach())`` after the backward): a
        Traced of the root's value, which the scans stack as they run (else None: a detached outside
        tensor is an outside tensor).  The root's node would be its cycle's graph made again, and
        its value a run of the chain: every cycle one by one, ~6x slower a step."""
        if tensor.__class__ is not Traced:
            return None
        record = tensor._record
        if record is not self.record:
            if record.done and record.replayer is self and tensor._position == self.entries[-1][1]:
                kind = tensor._kind
                detached = _new(Traced)
                detached._record, detached._position = record, tensor._position
                detached._kind, detached._grad = kinds.array(kind.shape, kind.dtype, False), None
                return viewed(tensor, detached, DETACH)  # (which sets its view, storage and inference)
            return None
        traced = self.op(DETACH, (tensor,), ())
        if traced is not None:
            self.viewed(traced, tensor, DETACH)
        return traced

    def _live_views(self) -> list:
        """The views made in this cycle that someone besides the cycle still holds."""
        made, live = self.made, []
        for k in self.views:
            view = made[k]
            if sys.getrefcount(view) > 3:  # ``made``, ``view`` and the argument: held elsewhere too
                live.append(view)
        return live

    def _viewed(self, tensor) -> bool:
        """Whether a live view of this cycle aliases ``tensor``."""
        for view in self._live_views():
            base = view._view[0]
            while True:
                if base is tensor:
                    return True
                if base._view is None:
                    break
                base = base._view[0]
        return False

    def _register_views(self) -> None:
        """The live views of this cycle join their bases' storage, as the usual path's views do (a
        later write to the base reaches them)."""
        for view in self._live_views():
            base = view._view[0]
            storage_of(base).add(view)
            view._storage = base._storage

    def _capture(self, tensor, ref) -> bool:
        """Whether ``tensor`` can fill the next slot, ``ref``'s (then it does): an outside tensor of
        the kind the trace names, not written in this cycle, in no other slot."""
        captured = self.captured
        if ref[0] != len(captured):
            return False
        cls = tensor.__class__
        if cls is Traced or cls is not Tensor and not isinstance(tensor, Tensor) or tensor._inference:
            return False
        key, taken = id(tensor), self.taken
        if taken is None:
            taken = self.taken = set(map(id, captured))
        if key in self.latest or key in taken:
            return False
        node = _raw(tensor, Tensor)
        if node.kind is not ref[1] and node.__class__ is Node and outlived(node):
            engine.realize_outlived([node])  # as recording an op on it does first (``tensor.record``)
        if node.kind is not ref[1] or node.__class__ is Carry and node.chain is not self.chain:
            return False
        taken.add(key)
        captured.append(tensor)
        return True

    def _carried(self, tensor, kind):
        """``tensor``'s Carry in this thread's chain (made now if it has none), or None."""
        node = _raw(tensor, Tensor)
        if node.__class__ is Carry:
            if node.chain is not self.chain:
                return None
            node.kind = kind
            return node
        with self.lock:  # another thread may be running the chain
            chain = self.chain
            carry = Carry(chain, len(chain.carries), kind, node, tensor.__class__)
            chain.epoch += 1
            chain.carries.append(carry)
            chain.tensors.append(tensor)
            chain.state.append(node)
            _node_slot.__set__(tensor, carry)
            tensor.__class__ = carried_class(carry.cls)
        return carry

    def write(self, tensor, source, cast_first=False) -> bool:
        """``tensor``'s in-place write of the Traced ``source`` replayed; False when off the trace.
        A result of this cycle written in place (``sqrt().add_(eps)``) just names the write.  With
        ``cast_first``, False still on the trace when its next entry is no write (an optimizer's
        state of another dtype than its update's result: the caller casts it first, then writes)."""
        i, state = self.cursor, self.state
        entry = self.entries[i]
        if entry[0] is not WRITE and cast_first:
            return False
        if (entry[0] is WRITE and source.__class__ is Traced and source._record is self.record
                and source._position == entry[2] and state["changes"] == self.mark):
            if tensor.__class__ is Traced:
                if tensor._record is self.record and tensor._position == entry[1] and not entry[3]:
                    tensor._position, self.cursor = i, i + 1
                    return True
            elif (not (entry[3] and state["enabled"]) and self._alone(tensor)
                    and self._takes(tensor, entry[1]) and self._wrote(tensor, entry[4], None, i)):
                return True
        self.fall_back()
        return False

    def update(self, op, tensor, args) -> bool:
        """``tensor`` takes ``op`` of ``args`` in place, replayed (``w -= lr * w.grad``, an optimizer's
        update: each parameter, every step): the op's entry and its write's checked as ``op`` and
        ``write`` would check them one after the other, without a result for the op (nobody can hold
        it).  False with nothing written when they are not these two entries plainly: the usual
        path then checks them one by one, and falls back if need be."""
        i, state, entries = self.cursor, self.state, self.entries
        if i + 1 >= len(entries) or tensor.__class__ is Traced:
            return False
        entry, written = entries[i], entries[i + 1]
        refs = entry[3]
        if not (entry[0] is op and entry[2] is state["enabled"] and entry[1] == () and len(refs) == len(args)
                and written[0] is WRITE and written[2] == i and state["changes"] == self.mark
                and not (written[3] and state["enabled"]) and self._alone(tensor)):
            return False
        record = self.record
        if len(args) == 2:  # (``w -= lr * w.grad``: spelled out, as in ``op``)
            a, b = args
            ra, rb = refs
            if not ((a._record is record and a._position == ra if a.__class__ is Traced else self._takes(a, ra))
                    and (b._record is record and b._position == rb if b.__class__ is Traced else self._takes(b, rb))):
                return False
        else:
            for a, ref in zip(args, refs):
                if a.__class__ is Traced:
                    if a._record is not record or a._position != ref:
                        return False
                elif not self._takes(a, ref):
                    return False
        return self._takes(tensor, written[1]) and self._wrote(tensor, written[4], None, i + 1)

    def _alone(self, tensor) -> bool:
        """Whether a replayed write into ``tensor`` reaches it alone: not a view, not an inference
        tensor, its storage its own (or shared with no other live tensor), and no live view made in
        this cycle aliasing it (the write, the update and the fill ask it of their target)."""
        return (tensor._view is None and not tensor._inference
                and (tensor._storage is None or len(tensor._storage.members) == 1 or not _shares(tensor))
                and not (self.views and self._viewed(tensor)))

    def fill(self, tensor, value) -> bool:
        """``tensor.fill_(value)`` without history replayed; False when off the trace."""
        i, state = self.cursor, self.state
        entry = self.entries[i]
        if (entry[0] is FILL and state["changes"] == self.mark and tensor.__class__ is not Traced
                and isinstance(tensor, Tensor)):
            kind = _raw(tensor, Tensor).kind
            if (kind is not None and not (kind.requires_grad and state["enabled"])
                    and self._alone(tensor)
                    and (self.filled.get(i) == (value.__class__, value, kind.dtype) and value.__class__ is not float
                         or self._fills_with(i, value, kind.dtype))  # (the first half: ``_fills_with``'s glance)
                    and self._takes(tensor, entry[1])
                    and self._wrote(tensor, self.fill_kinds[i][kind.requires_grad], entry[3], i)):
                return True
        self.fall_back()
        return False

    def _fills_with(self, position, value, dtype) -> bool:
        """Whether the fill at ``position`` writes ``value`` into a tensor of ``dtype`` (the last
        int or bool that did is remembered: ``zero_()`` asks every step)."""
        if self.filled.get(position) == (value.__class__, value, dtype) and value.__class__ is not float:
            return True
        if self.entries[position][2] != exactly(number_in(value, dtype)):
            return False
        self.filled[position] = (value.__class__, value, dtype)
        return True

    def _wrote(self, tensor, kind, fill, position) -> bool:
        """``tensor`` written at ``position`` (a fill of the constant ``fill``, or None): carried from
        now on; False when another thread's chain carries it."""
        carry = _raw(tensor, Tensor)
        if carry.__class__ is Carry and carry.chain is self.chain:  # (carried already, as mostly)
            carry.kind = kind
        else:
            carry = self._carried(tensor, kind)
            if carry is None:
                return False
        carry.fill = fill
        self.latest[id(tensor)] = position
        self.writes.append(tensor)
        self.cursor = position + 1
        return True

    # ------------------------------------------------------------------------- backward

    def backward(self, root) -> bool:
        """``root.backward()`` at the end of the trace: the cycle appended to the chain; False when
        it fell back."""
        with self.lock:
            entries, plan = self.entries, self.plan
            if self.chain.eager and len(entries) <= SHORT_TRACE:
                plan.declined = True  # the thread records this trace from now on (symgrad.cycles)
            if (not speed.fast or root.__class__ is not Traced or root._record is not self.record
                    or plan.declined
                    or self.cursor != len(entries) - 1 or root._position != entries[-1][1]
                    or self.state["changes"] != self.mark or engine.anomaly_mode[0]
                    or self.thread != threading.get_ident()):
                self.fall_back()
                return False
            captured = self.captured
            owners = list(map(captured.__getitem__, plan.owners))
            wired = self._wired_as_before(owners)
            self.before = ()  # (the glances are over: ``_carry_gradient`` counts who else holds a .grad)
            if wired is None and not self._holds(owners):
                self.fall_back()
                return False
            if (hooks.leaves or hooks.on_nodes.data) and self._hooked(owners):
                self.fall_back()
                return False
            for j in self.added:  # a view or a detached alias of a .grad sees the backward add into it
                storage = owners[j]._grad._storage
                if storage is not None and len(storage.members) > 1 and _shares(owners[j]._grad):
                    self.fall_back()
                    return False
            made = self.made
            counts = list(map(sys.getrefcount, made))  # 2: held by ``made`` and the count alone
            held = [weakref.ref(traced) for traced, count in zip(made, counts) if count > 2 and traced is not root
                    ] if len(made) - counts.count(2) > 1 else None  # results held after the backward (the root is)
            if held:
                self.record.held = held
                self.record.operands = [_operand(tensor) for tensor in captured]
                if self.views:
                    self._register_views()
            if wired:
                epoch = self.chain.epoch
                signature, outside = self._rewired(wired, owners)
                self.wiring_epoch = epoch if self.chain.epoch == epoch else None  # the cycle ends as wired
            else:
                signature, outside = self._wire(owners)
            for tensor in self.writes:  # the version counter counts each write
                (tensor._storage or storage_of(tensor)).version += 1
            for j in self.added:  # and the backward's, into a .grad there was
                grad = owners[j]._grad
                (grad._storage or storage_of(grad)).version += 1
            record = self.record
            record.done = True
            self.chain.append(signature, outside, record)
            program_ran()
            stats.replayed += 1
            self.backwards += 1
            self._start()
        return True

    def _wire(self, owners):
        """The cycle's signature for the chain (which carried slot, outside array or fill feeds each
        input of the program; where each carried slot's value after the step comes from) and its
        outside arrays.  Kept for the next cycle when nothing in it was computed aside."""
        entries, plan, chain, computed = self.entries, self.plan, self.chain, self.computed
        captured, latest = self.captured, self.latest
        sources, outside, side, plain, again = [], [], [], [], True  # plain: slots read from outside
        for where, i in plan.inputs:
            if where == WRITTEN:
                sources.append(("fill", i) if entries[i][0] is FILL else -1 - self._aside(i, side, outside))
                continue
            tensor = captured[i] if where == SLOT else owners[i]._grad
            position = latest.get(id(tensor)) if where == GRAD else None
            if position is not None:  # a .grad written in this cycle: the value it has now
                sources.append(("fill", position) if entries[position][0] is FILL
                               else -1 - self._aside(position, side, outside))
                continue
            node = _raw(tensor, Tensor)
            if node.__class__ is Carry:
                sources.append(node.index)
            else:
                sources.append(-1 - len(outside))
                outside.append(node)
                if where == SLOT:
                    plain.append(i)
                else:
                    again = False  # a .grad not carried: wired once
        for array in self._number_inputs() if plan.numbers else ():  # the program's last inputs
            sources.append(-1 - len(outside))
            outside.append(array)
        written = []  # (slot, where its value after the step comes from)
        for tensor in self.writes:
            carry = _raw(tensor, Tensor)
            position = latest[id(tensor)]
            written.append((carry.index, ("fill", position) if carry.fill is not None else
                            computed[position] if position in computed else
                            ("in", self._aside(position, side, outside))))
        gradients, again = 1 + len(plan.pending), again and not side
        grads = tuple([owner._grad for owner in owners])  # as they were: none, or carried
        for k, owner in enumerate(owners):
            grad = owner._grad
            carry = None if grad is None else _raw(grad, Tensor)
            if carry.__class__ is Carry and carry.chain is chain:  # a .grad carried already, as mostly
                carry.kind, carry.fill = plan.owned[k][2], None
            else:
                again = self._carry_gradient(owner, plan.owned[k][2]) and grad is None and again
                carry = _raw(owner._grad, Tensor)
            written.append((carry.index, gradients + k))
        outs = [-1] * len(chain.carries)
        for index, source in written:
            outs[index] = source
        signature = (tuple(sources), tuple(outs))
        if side:  # the values computed aside (writes the program does not compute), in one program
            engine.realize([node for node in outside if node.__class__ is Node and node.value is None])
        self.wiring, self.wiring_epoch = None, None
        if again:
            self.wiring_epoch = chain.epoch
            carried = tuple([_carry_of(t) for t in captured])
            self.wiring = (carried, tuple([i for i in plain if carried[i] is None]), tuple(self.writes),
                           tuple([_raw(t, Tensor) for t in self.writes]), tuple(owners), grads,
                           tuple([None if g is None else _raw(g, Tensor) for g in grads]), signature)
        return signature, tuple(outside)

    def _wired_as_before(self, owners):
        """The last cycle's signature and this cycle's outside arrays, if this cycle saw the same
        carried tensors in the same slots (plain tensors where it saw plain ones: a new batch is
        only new outside arrays), wrote the same tensors, and its owners and their ``.grad`` tensors
        are the same (or none again): the trace being the same, so is all that ``_holds`` checks
        and ``_wire`` makes.  Else None."""
        wiring = self.wiring
        if wiring is None or self.plan.generation != programs.cache.cleared:
            return None
        carried, plain, writes, written, owners_before, grads, carries, signature = wiring
        captured, chain = self.captured, self.chain
        if len(captured) != len(carried) or len(self.writes) != len(writes) or len(chain.carries) != len(signature[1]):
            return None
        if not (self.taken is None and len(captured) == len(self.before) and chain.epoch == self.wiring_epoch):
            # (else the cycle took the last one's tensors and no tensor became carried or plain since: as before)
            for tensor, carry in zip(captured, carried):
                raw = _raw(tensor, Tensor)
                if raw is not carry and (carry is not None or raw.__class__ is Carry):
                    return None
            for tensor, other, raw in zip(self.writes, writes, written):
                if tensor is not other or _raw(tensor, Tensor) is not raw:
                    return None
        for owner, before, grad, carry in zip(owners, owners_before, grads, carries):
            if owner is not before or owner._grad is not grad:
                return None
            if grad is None:
                slot = self.gradient_slots.get(id(owner))
                if slot is None or slot >= len(chain.tensors):
                    return None
            elif _raw(grad, Tensor) is not carry:
                return None
        plain = list(map(_raw, map(captured.__getitem__, plain)))
        return signature, tuple(plain + self._number_inputs() if self.plan.numbers else plain)

    def _rewired(self, wired, owners):
        """The last cycle's wiring, used again: the ``.grad`` slots take the backward's outputs."""
        kinds = self.plan.owned
        for k, (owner, carry) in enumerate(zip(owners, self.wiring[6])):
            if carry is None:
                self._carry_gradient(owner, kinds[k][2])
            else:
                carry.kind, carry.fill = kinds[k][2], None
        return wired

    def _aside(self, position, side, outside) -> int:
        """The number among ``outside`` of the value this cycle's entry at ``position`` has, computed
        aside (a write the program takes or does not compute): by a read of this cycle that computed
        it already (``_peek``), or now; ``side`` keeps the nodes made (and is not empty once any
        value came aside: the wiring is this cycle's alone)."""
        value = self.peeked.get(position)
        if value is None:
            if not side or side[0] is None:
                side[:] = [self._peeked(self.cursor)]
            value = side[0][position]
        elif not side:
            side.append(None)
        for j, other in enumerate(outside):
            if other is value:
                return j
        outside.append(value)
        return len(outside) - 1

    def _carry_gradient(self, owner, kind) -> bool:
        """The owner's ``.grad`` becomes carried (a new tensor if it had none: it takes the slot, and
        the Carry, of the one it had, which is given its values first if anyone still holds it).
        False when a new slot was made."""
        grad = owner._grad
        if grad is None:
            chain = self.chain
            slot = self.gradient_slots.get(id(owner))
            if slot is not None and slot < len(chain.tensors):
                grad = owner._grad = _new(_CARRIED_TENSOR)  # (made carried: a class switched costs more)
                grad._grad = grad._view = grad._storage = None
                grad._inference = False
                old = chain.tensors[slot]
                where = self._holders().get(id(old), ())
                # held by this list, ``old`` and getrefcount's argument, and where the cycle's lists hold it
                if _raw(old, Tensor).__class__ is Carry and sys.getrefcount(old) > 3 + len(where):  # and someone
                    chain.run()
                    _restore(old, chain.carries[slot], chain.state[slot])
                chain.tensors[slot] = grad
                captured = self.captured  # the next cycle's optimizer reads the new one where this one read
                for k in where:  # the old: it takes it on a glance (``_takes``)
                    if k is not None:
                        captured[k] = grad
                carry = chain.carries[slot]
                carry.kind, carry.old, carry.cls, carry.fill = kind, None, Tensor, None
                _node_slot.__set__(grad, carry)
                return True
            grad = owner._grad = _new(Tensor)
            grad._grad = grad._view = grad._storage = None
            grad._inference = False
            _node_slot.__set__(grad, _leaf(kind, _zeros(kind), grad))  # a stand-in: the backward's output replaces it
            carry = self._carried(grad, kind)
            carry.old = None
            self.gradient_slots[id(owner)] = carry.index
            return False
        self._carried(grad, kind).fill = None
        return True

    def _holders(self) -> dict:
        """Where the cycle's lists hold each tensor: id -> its positions in ``captured`` (None for each
        time ``writes`` holds it).  Made once a backward, when the first ``.grad`` set to None takes
        its slot (every owner's, after ``zero_grad()``: a search per owner made a step of a 40-tensor
        model quadratic)."""
        holders = self.holders
        if holders is None:
            holders = self.holders = {}
            for k, tensor in enumerate(self.captured):
                holders.setdefault(id(tensor), []).append(k)
            for tensor in self.writes:
                holders.setdefault(id(tensor), []).append(None)
        return holders

    def _holds(self, owners) -> bool:
        """Whether the state the program assumes holds: owners (distinct, as captured) whose ``.grad``
        is as it was (none, zero-filled, or values added to), written tensors still holding their
        writes."""
        plan = self.plan
        if plan.generation != programs.cache.cleared:
            return False
        for owner, expected in zip(owners, plan.accumulate):
            state = _gradient_state(owner)
            if state != expected and not (state == 1 and expected == 2):  # zeros to add to: as good
                return False
        if len(owners) > 1:
            grads = [id(o._grad) for o in owners if o._grad is not None]
            if len(set(grads)) != len(grads):
                return False
        for slot, owner in plan.aliases:
            if self.captured[slot] is not owners[owner]._grad:
                return False
        latest, captured = self.latest, self.captured
        for position, slot in self.pending_slots:
            if latest.get(id(captured[slot])) != position:
                return False
        return True

    def _hooked(self, owners) -> bool:
        """Whether a hook is on the way of this backward (``engine._backward`` asks the same)."""
        if hooks.leaves and hooks.hooked_targets(owners):
            return True
        if not hooks.on_nodes.data:
            return False
        return any(_raw(t, Tensor) in hooks.on_nodes for t in self.captured if _raw(t, Tensor).__class__ is Node)

    def _tensor_of(self, ref):
        """The outside tensor a write's reference names, or None for a result of the cycle."""
        slot = slot_written(self.entries, ref)
        return None if slot is None else self.captured[slot]

    # -------------------------------------------------------------------- values and nodes

    def root_value(self, record):
        """The value of a done cycle's root (the chain run first if it has not)."""
        with self.lock:
            if record.value is None:
                self.chain.run()
            return record.value[record.index]

    def node_of(self, tensor, carry):
        """A node of a carried tensor's values, for this thread's reads (the tensor stays carried):
        the chain's value, or a write of this cycle computed on the side from what the cycle saw.
        Another thread takes the cycle over first (``_hand_over``): it reads the tensor's own node."""
        with self.lock:
            node = _raw(tensor, Tensor)
            if node is not carry:
                return node
            if threading.get_ident() != self.thread:
                self._hand_over()
                return _raw(tensor, Tensor)
            position = self.latest.get(id(tensor))
            if position is not None:
                return self._peeked(self.cursor)[position]
            self.chain.run()
            return _leaf(carry.kind, self.chain.state[carry.index], tensor)

    def release(self, tensor, carry) -> None:
        """A carried tensor is about to take another node: this thread's cycle falls back (between
        cycles, the chain settles); another thread takes the cycle over (``_hand_over``)."""
        with self.lock:
            if _raw(tensor, Tensor) is not carry:
                return
            if threading.get_ident() != self.thread:
                self._hand_over()
            elif self.cursor:
                self.fall_back()
            else:
                self.chain.settle()

    def _hand_over(self) -> None:
        """Another thread needs a carried tensor's node, to read it or to give it another (the
        replaying thread may have ended, or wait): the chain settles, what this cycle replayed so
        far is made and written for real (the other thread sees those writes, as in PyTorch, and
        its own land on them), and this thread falls back from there at its next op, write, fill or
        backward."""
        self.chain.settle()
        real, slots = self._unseen(self._nodes, upto=self.cursor, rebind=True)
        for traced in self.made:
            _node_slot.__set__(traced, real[traced._position])
        if self.views:
            self._register_views()
        self.handed = (real, slots)
        # off the trace: what the other thread does next may change any operand, so this thread's next
        # op, write, fill or backward falls back (the cursor at the trace's end matches none of them)
        self.mark, self.cursor, self.latest = -1, len(self.entries) - 1, {}

    def value_of(self, traced):
        """The values of a Traced tensor that has no node."""
        record = traced._record
        if record.done and self.entries[-1][1] == traced._position:
            return self.root_value(record)
        if record is self.record:
            with self.lock:
                return self._peek(traced._position)
        return engine.array(traced._node)

    def _peek(self, position):
        """The array of this cycle's entry at ``position``, computed aside from what the cycle saw
        (a value read before the backward: ``correct += (out.argmax(1) == y).sum().item()``), by
        the program kept from the first such read (``_kept``).  The writes' values it gave serve
        the backward (``_aside``)."""
        value = self.peeked.get(position)
        if value is None:
            self.chain.run()
            self.peeked.update(self._kept((self.cursor, position), self.record, (position,), self.cursor,
                                          self._slot_array))
            value = self.peeked[position]
        return value

    def _kept(self, key, record, wanted, upto, array_of, slots_of=None):
        """The arrays of ``record``'s entries at positions ``wanted`` and of the writes they need, by
        position, from what its cycle saw (``array_of(slot)``: an outside operand's array).  The
        program that computed them the first time, from the cycle's entries up to ``upto`` made on
        the usual path (``slots_of()``: the operands' nodes, if not the cycle going on's), is kept under
        ``key`` (a ``Peek``): the next cycles run it, making no node, their floats and their batches'
        moving starts its inputs."""
        peek = self.peeks.get(key)
        if peek is not None and peek.generation == programs.cache.cleared:
            operands = [array_of(slot) for slot in peek.slots]
            operands += [_float_array(record.floats[k]) for k in peek.numbers]
            operands += [_start_array(start) for k in peek.starts for start in record.moved[k][1]]
            stats.peeks += 1
            return zip(peek.positions, engine.run_values(peek.compiled, operands))
        numbers = {}
        real, slots = self._unseen(self._nodes, upto=upto, slots=slots_of and slots_of(), record=record,
                                   numbers=numbers)
        made = engine.values_program([real[p] for p in wanted], numbers.values(),
                                     [real[k] for k in record.moved if k < upto])
        if made is None:
            return [(p, engine.array(real[p])) for p in wanted]
        compiled, inputs, outputs, floats, indexings = made
        number_of = {id(node): k for k, node in numbers.items()}
        at = {id(node): k for k, node in enumerate(real)}
        floats, starts = [number_of[id(node)] for node in floats], [at[id(node)] for node in indexings]
        values = engine.run_values(compiled, [_array(node) for node in inputs] +
                                   [_float_array(record.floats[k]) for k in floats] +
                                   [_start_array(start) for k in starts for start in record.moved[k][1]])
        for node, value in zip(outputs, values):
            node.computed(value)
        slot_of = {id(node): slot for slot, node in slots.items()}
        if all(id(node) in slot_of for node in inputs) and all(id(node) in at for node in outputs):
            self.peeks[key] = Peek(compiled, tuple([slot_of[id(node)] for node in inputs]),
                                   tuple([at[id(node)] for node in outputs]), tuple(floats), tuple(starts))
        return [(at[id(node)], value) for node, value in zip(outputs, values) if id(node) in at]

    def _slot_array(self, slot):
        """The array of the outside operand in ``slot`` as this cycle sees it (a carried one's: the
        chain's value)."""
        node = _raw(self.captured[slot], Tensor)
        return _array(self.chain.state[node.index] if node.__class__ is Carry else node)

    def node_for(self, traced):
        """The node of a Traced tensor: this thread's cycle falls back; another thread takes the cycle
        going on over (``_hand_over``); a done cycle gets its graph (from the operands it kept if
        results were held at its backward, else leaves standing for them), freed, and its root's
        value."""
        with self.lock:
            try:
                return _node_slot.__get__(traced, Tensor)
            except AttributeError:
                pass
            record = traced._record
            if record.done and not traced._kind.requires_grad and self.entries[traced._position][4].requires_grad:
                node = _value_leaf(traced._kind, self.root_value(record))  # the root detached (``detach``)
            elif record.done:
                real = record.real
                if real is None:
                    slots = self._held_operands(record)
                    try:  # the chain, run to give these their start, gave it its values (``compute_held``)
                        return _node_slot.__get__(traced, Tensor)
                    except AttributeError:
                        pass
                    real = record.real = self._unseen(self._nodes, slots=slots, placeholders=slots is None,
                                                      record=record)[0]
                    root = real[self.entries[-1][1]]
                    root.computed(self.root_value(record))
                    for node in gradient_path(root)[0]:
                        node.freed = True
                node = real[traced._position]
            elif record is self.record and threading.get_ident() == self.thread:
                self.fall_back()
                return _node_slot.__get__(traced, Tensor)
            elif record is self.record:
                if self.handed is None:
                    self._hand_over()
                return _node_slot.__get__(traced, Tensor)
            else:
                raise RuntimeError("a replayed result of a cycle that fell back has no node")  # pragma: no cover
            _node_slot.__set__(traced, node)
            return node

    def compute_held(self, record) -> None:
        """The results without history a done cycle's caller still holds get their values, as
        PyTorch's have theirs (``accuracies.append((out.argmax(1) == y).float().mean())`` before
        the backward): held pending, each would keep the chain's state when its cycle began (the
        parameters' values then) for as long as it lives.  Results with history keep it."""
        held, kept = [], []
        for ref in record.held:
            traced = ref()
            if traced is not None:
                try:
                    _node_slot.__get__(traced, Tensor)
                except AttributeError:
                    (kept if traced._kind.requires_grad else held).append(traced)
        if held and record.start is not None and all(traced._view is None for traced in held):
            with self.lock:  # from the operands and the state the cycle saw, by a program kept for the next
                positions = tuple(sorted({traced._position for traced in held}))
                values = dict(self._kept(("held", positions), record, positions, 1 + positions[-1],
                                         lambda slot: _operand_array(record, slot),
                                         lambda: self._held_operands(record)))
            for traced in held:
                kind = traced._kind
                _node_slot.__set__(traced, leaf(values[traced._position], kind.dtype, shape=kind.shape))
        elif held:
            with self.lock:  # the entries up to the last of them, made from the operands the cycle saw
                upto = 1 + max(traced._position for traced in held)
                real = self._unseen(self._nodes, upto=upto, slots=self._held_operands(record), record=record)[0]
            for traced in held:
                _node_slot.__set__(traced, real[traced._position])
            engine.compute([real[traced._position] for traced in held])
        if kept:
            record.held = [weakref.ref(traced) for traced in kept]
        else:
            record.held = record.operands = record.start = record.real = None

    def _held_operands(self, record):
        """The nodes of a done cycle's outside operands as they were when it began, if it kept them
        (results held after its backward): a carried one's value is the chain's state then."""
        if record.held is None:
            return None
        if record.start is None:  # still in the chain: run it up to here
            self.chain.run()
            if record.start is None:  # (its held results died meanwhile: the run kept no start)
                return None
        slots = {}
        for slot, operand in enumerate(record.operands):
            if operand.__class__ is tuple:
                index, kind = operand
                operand = _value_leaf(kind, record.start[index])
            slots[slot] = operand
        return slots

    def _operand_node(self, tensor):
        """An outside operand's node: its own, or for a carried one a leaf of the chain's value."""
        node = _raw(tensor, Tensor)
        return node if node.__class__ is not Carry else _value_leaf(node.kind, self.chain.state[node.index])

    def _peeked(self, upto):
        """Nodes of this cycle's entries up to ``upto``, made aside from the chain's values."""
        self.chain.run()
        return self._unseen(self._nodes, upto=upto)[0]

    def _unseen(self, fn, **arguments):
        """``fn(**arguments)``, recording nodes that are no change this thread's trace must see."""
        before, enabled = _grad_state.changes, _grad_state.enabled
        try:
            return fn(**arguments)
        finally:
            _grad_state.enabled = enabled
            if threading.get_ident() == self.thread:
                self.mark += _grad_state.changes - before

    def _nodes(self, upto=None, rebind=False, placeholders=False, slots=None, record=None, numbers=None):
        """The cycle's entries (up to ``upto``) made on the usual path from the operands they saw
        (``record``'s: the cycle going on by default): slots as their nodes (a carried one: a leaf of
        the chain's value), floats as their constants (given ``numbers``, a dict, constants of their
        own, by Number index, filled in), writes and fills as the leaves they gave, or, with
        ``rebind``, written into their tensors for real.  With ``placeholders`` (a cycle done, whose
        operands have moved on), slots are leaves without values: the graph only answers what its
        nodes are."""
        record = record or self.record
        entries, floats, moved = self.entries, record.floats, record.moved
        upto = len(entries) - 1 if upto is None else upto
        slots, real = {} if slots is None else slots, []

        def slot_node(ref):
            slot = ref[0]
            node = slots.get(slot)
            if node is None:
                kind = ref[1]
                if placeholders:
                    node = Node(LEAF, (), (), kind.shape, kind.dtype, kind.requires_grad, None, kind, None, ())
                else:
                    node = self._operand_node(self.captured[slot])
                slots[slot] = node
            return node

        def operand(ref):
            if ref.__class__ is int:
                return real[ref]
            if ref.__class__ is tuple:
                return slot_node(ref)
            if ref.__class__ is Number:
                if numbers is None:
                    return constant(floats[ref.index], (), ref.dtype)
                node = numbers.get(ref.index)
                if node is None:
                    node = numbers[ref.index] = own_constant(floats[ref.index], ref.dtype)
                return node
            return ref

        for k in range(upto):
            entry = entries[k]
            if entry[0] is WRITE:
                tensor = self._tensor_of(entry[1]) if rebind else None
                if tensor is not None:
                    write_values(tensor, real[entry[2]])
                    real.append(tensor._node)
                else:  # seen aside, or a result of the cycle written (its Traced takes this node)
                    real.append(lazy_leaf(real[entry[2]], requires_grad=entry[3]))
            elif entry[0] is FILL:
                tensor = self._tensor_of(entry[1]) if rebind else None
                if tensor is not None:
                    write_values(tensor, entry[3])
                    real.append(tensor._node)
                else:
                    real.append(lazy_leaf(entry[3], requires_grad=operand(entry[1]).requires_grad))
            elif entry[0] is DETACH:
                real.append(lazy_leaf(operand(entry[3][0])))
            elif entry[0] is not BACKWARD:
                _grad_state.enabled = entry[2]
                attrs = moved[k][0] if k in moved else entry[1]
                real.append(record_op(entry[0], tuple([operand(r) for r in entry[3]]), attrs))
        if placeholders:  # a graph that only answers what its nodes are: no backward computes its results
            for node in real:
                not_aside(node)
        return real, slots

    # ----------------------------------------------------------------------- falling back

    def fall_back(self) -> None:
        """Off the trace: the chain settles, what this cycle replayed runs on the usual path, and
        the thread records the rest of the cycle."""
        with self.lock:
            if _grad_state.cycle is not self:
                return
            if self.handed is not None:  # another thread made it all (``_hand_over``)
                real, slots = self.handed
                self.cursor = len(real)
            else:
                self.chain.settle()
                enabled = _grad_state.enabled
                try:
                    real, slots = self._nodes(upto=self.cursor, rebind=True)
                finally:
                    _grad_state.enabled = enabled
                for traced in self.made:
                    _node_slot.__set__(traced, real[traced._position])
                if self.views:
                    self._register_views()
            stats.fell_back += 1
            plan = self.plan  # fell back before its second backward: a step that leaves its trace each time rests
            plan.fruitless = plan.fruitless + 1 if self.backwards < 2 else 0
            _grad_state.cycle = self.recording_after(self, real, slots)
            self.chain.replayer = self.record = self.wiring = None  # no reference cycle is left behind
            self.made = []


def _operand_array(record, slot):
    """The array of a done cycle's outside operand in ``slot`` as the cycle saw it (a carried one's:
    the chain's state when the cycle began)."""
    operand = record.operands[slot]
    return _array(record.start[operand[0]] if operand.__class__ is tuple else operand)


def _carry_of(tensor):
    """A captured tensor's Carry, or None for a plain one (its node is read from outside)."""
    node = _raw(tensor, Tensor)
    return node if node.__class__ is Carry else None


def _operand(tensor):
    """An outside operand as a held result needs it later: its node, or a carried one's slot and kind."""
    node = _raw(tensor, Tensor)
    return (node.index, node.kind) if node.__class__ is Carry else node


def slot_written(entries, ref):
    """The slot of the outside tensor a write's reference names (through earlier writes), or None
    when it names a result of the cycle."""
    while ref.__class__ is int:
        entry = entries[ref]
        if entry[0] is not WRITE and entry[0] is not FILL:
            return None
        ref = entry[1]
    return ref[0]


def worth_replaying(plan, entries) -> bool:
    """Whether a trace's state is small enough to carry: a step that writes a big array is
    dispatch-bound no more, and the usual path gives its old state up to XLA (symgrad.donation)."""
    kinds_carried = [kind for _, _, kind in plan.owned] + [entry[4] for entry in entries if entry[0] is WRITE]
    return all(math.prod(kind.shape) < donation.MIN_ELEMENTS for kind in kinds_carried)


def selected_from(traced):
    """The node of the outside tensor whose elements a result of the cycle going on are, through
    views and indexing (a batch of the dataset's labels), or None; the cycle does not fall back."""
    replayer = traced._record.replayer
    if replayer is None or traced._record is not replayer.record:
        return None
    position = traced._position
    while True:
        op = replayer.entries[position][0]
        if op.__class__ is str or not (op.view or op.selects):
            return None
        ref = replayer.entries[position][3][0]
        if ref.__class__ is not int:
            break
        position = ref
    node = _raw(replayer.captured[ref[0]], Tensor) if ref.__class__ is tuple else None
    return node if node.__class__ is Node else None


def has_node(tensor) -> bool:
    """Whether ``tensor`` has a node now: a replayed result and a carried tensor make one only when
    asked (a replayed result by falling back), so checks that look only at known values skip them."""
    try:
        return _raw(tensor, Tensor).__class__ is Node
    except AttributeError:
        return False


def carried(tensor) -> bool:
    """Whether ``tensor``'s values are carried by a chain of replayed cycles (not computed yet)."""
    return _raw(tensor, Tensor).__class__ is Carry


def _gradient_state(tensor) -> int:
    """0: no ``.grad``; 1: a zero-filled one; 2: one with values to add to; 3: anything else."""
    grad = tensor._grad
    if grad is None:
        return 0
    node = _raw(grad, Tensor)
    if node.__class__ is Carry:
        fill = node.fill
        return 2 if fill is None else 1 if fill.attrs[0] == 0 else 3
    if node.op is LEAF and node.value is None and node.inputs and node.inputs[0].op is CONST:
        return 1 if node.inputs[0].attrs[0] == 0 else 3
    return 2 if node.op is LEAF and node.value is not None else 3


def _shares(tensor) -> bool:
    """Whether another live tensor (a view, a detached alias) shares ``tensor``'s storage: a write
    must then reach it (``inplace.assign``), which a replayed write does not do.  (A replayed write
    and fill spell its first test out: every tensor written has a storage, for its version, mostly
    of one member, and the call cost more than the test.)"""
    storage = tensor._storage
    if storage is None or len(storage.members) == 1:
        return False
    members = storage.members
    alive = [member for member in members if member() is not None]
    if len(alive) < len(members):  # the dead let go: a tensor detached once is not counted again every step
        members[:] = alive
    return len(alive) > 1
