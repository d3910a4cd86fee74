"""Running recorded graphs: a structural key, a compiled program per key, values and .grad back.

A repeated ``backward`` finds its program from the root's kind (symgrad.replay) without
walking.  Otherwise both entry points walk the graph once into a flat, topologically ordered
list and key the program by that list (op, attributes, requires_grad and input positions per
node; shape and dtype per input; a constant's kind).  Python numbers are part of the program
(and so of the key) until a structure comes back with other float values; then one program
takes the floats as inputs (``_compiled``).  A key seen before costs a dict lookup and one
compiled call: no SymPy, no XLA.  On a miss the walk is lowered to a Program (each op's SymPy
form), differentiated symbolically for ``backward``, emitted as JAX source and jitted.

Leaves whose value is pending (updated in place under ``no_grad``, or detached before being
computed) are computed inside the same program and stored, so a training loop's parameter
update runs fused into the next step and the graph never grows from step to step.

This module is the front end's one door to codegen and its speed layer (codegen.speed).
Programs are called through ``codegen.deferred``: in a hot loop on small tensors the values
stored are ``Pending`` placeholders, arguments like any array to the next call.  Whoever needs
an array asks here (``array``, ``known_array``, ``arrays``); nothing else knows of placeholders.
"""
from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jnp

import codegen.compile as programs  # module imports: importing codegen may be what imports symgrad
import codegen.emit as emitter
from codegen import deferred, nan_literals, speed, stable
from symgrad import donation, hooks, replay
from symgrad.nodes import CONST, is_zero_fill, leaf, owners_of, program_ran, taken_aside
from symgrad.storage import keeps_tensors
from symgrad.tracing import BackwardPlan, Trace, Walk, forward_program, gradient_path, is_float_scalar, moving_starts

FREED_MESSAGE = ("Trying to backward through the graph a second time (or directly access saved tensors "
                 "after they have already been freed). Saved intermediate values of the graph are freed when "
                 "you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
                 "through the graph a second time or if you need to access saved tensors after calling backward.")


anomaly_mode = [False, True]  # detect_anomaly (symgrad.autograd.anomaly): on, and checking for NaN


class NumbersBound:
    """A program that takes some of a structure's Python floats and indexings' starts as inputs,
    bound to one set of values (a replayed loop passes its own: symgrad.cycles).  ``positions``:
    the walk position of the node each value belongs to (an indexing's once per start)."""

    def __init__(self, compiled, values, positions):
        program = compiled.program
        names = [program.dtypes[s] for s in program.inputs[len(program.inputs) - len(values):]]
        self.compiled, self.positions = compiled, positions
        self.values = values = tuple(jnp.asarray(v, dtype=name) for v, name in zip(values, names))  # not weak float64s
        self.source, self.program = compiled.source, program
        self.python_fn = lambda *inputs: compiled.python_fn(*inputs, *values)
        self.result_count, self.small = compiled.result_count, compiled.small
        self.calls, self.wait = 0, deferred.HOT_AFTER

    def run(self, *inputs):
        return self.compiled.run(*inputs, *self.values)

    def run_donating(self, positions: tuple, inputs):
        return self.compiled.run_donating(positions, [*inputs, *self.values])


_number_values: dict = {}  # structure with its numbers erased -> (their entries first seen, positions seen to vary)


def _compiled(key, walk: Walk, build):
    """The compiled program for ``key``.

    Python floats and the starts of indexings are baked into programs (their values are in the
    key).  When the same structure comes back with other values (a learning-rate schedule, a batch
    sliced at a moving offset), it gets one program taking those that changed as inputs, bound to
    each new set of values without compiling again (the others stay baked in: an RNN's ``x[t]``
    under a schedule is still printed as a scan).  A slice of an array given to the program (a
    batch of a dataset) is taken as an input from the first: it will move.
    """
    compiled = programs.cache.find(key)
    if compiled is not None:
        return compiled
    numbers, batches = _numbers_of(walk)
    if not numbers:
        return programs.cache.get(key, build)
    erased = ("numbers as inputs", key[0], _erased(walk, numbers, None), key[2:])
    seen = _number_values.get(erased)
    if seen is None:
        if len(_number_values) > programs.cache.capacity:
            _number_values.clear()
        seen = _number_values[erased] = ({i: walk.entries[i] for i, _, _ in numbers}, batches)
    first, varying = seen
    varying.update(i for i, _, _ in numbers if walk.entries[i] != first[i])
    if not varying:
        return programs.cache.get(key, build)
    generic = _taking_numbers(key, walk, numbers, varying, build)
    taken = [(i, values) for i, _, values in numbers if i in varying]
    return programs.cache.put(key, NumbersBound(generic, tuple([v for _, values in taken for v in values]),
                                                tuple([i for i, values in taken for _ in values])))


def _taking_numbers(key, walk: Walk, numbers, positions, build):
    """The program of ``key``'s structure that takes the numbers at walk ``positions`` (of those
    ``_numbers_of`` found) as its last inputs."""
    generic_key = ("numbers as inputs", key[0], _erased(walk, numbers, positions), key[2:])
    walk.numbers_at = frozenset(positions)
    try:
        return programs.cache.get(generic_key, build)
    finally:
        walk.numbers_at = frozenset()


def _numbers_of(walk: Walk):
    """(walk position, its key entry with them erased, the numbers) of each Python float, then of
    each indexing's starts; and the positions of slices of an array given (a dataset's batch)."""
    floats, starts, batches = [], [], set()
    read = {k for node, entry in zip(walk.order, walk.entries) if entry[0] is not None and node.op.reads_numbers
            for k in entry[3]}
    for i, node in enumerate(walk.order):
        if is_float_scalar(node):
            if i not in read:
                floats.append((i, (CONST, None), node.attrs[:1]))
        elif node.op.starts is not None and not walk.is_input(i):
            moving = moving_starts(node)
            if moving:
                starts.append((i, (node.op, moving[0], *walk.entries[i][2:]), moving[1]))
                sliced = node.op.view and any(item[0] == 1 for item in moving[0][0])
                if sliced and walk.is_input(walk.index[node.inputs[0]]):
                    batches.add(i)
    return floats + starts, batches


def _erased(walk: Walk, numbers, positions) -> tuple:
    """The walk's key entries with the numbers at ``positions`` (all if None) erased."""
    entries = list(walk.entries)
    for i, erased, _ in numbers:
        if positions is None or i in positions:
            entries[i] = erased
    return tuple(entries)


def _without_collection(fn, *args):
    """Run ``fn`` with Python's cycle collector paused.

    A walk allocates a few small tuples per node and creates no cycles; on a graph of
    thousands of nodes the collector would otherwise sweep the whole heap many times
    (a quarter of the steady-state time of a 3,000-op chain).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return fn(*args)
    finally:
        if enabled:
            gc.enable()


# ------------------------------------------------------------------- the front end's door


def array(node):
    """The node's array, computed now if needed (and a deferred result's chain run)."""
    value = node.value
    if value is None:
        realize([node])
        value = node.value
    if value.__class__ is deferred.Pending:
        value = node.value = value.get()
    return value


def known_array(node):
    """The node's array if it has been computed (never computing one; None inside a JAX trace):
    checks that PyTorch makes eagerly are made when they cost no computation."""
    value = node.value
    if value is None or isinstance(value, jax.core.Tracer):
        return None
    return array(node)


def concrete_array(node):
    """The node's array, computed now if needed, unless it depends on a value JAX is tracing
    (then None): for checks PyTorch makes eagerly on computed inputs (labels in range).  A node
    with a value is not walked (a training loop's labels, every step)."""
    if node.value is not None:
        return None if isinstance(node.value, jax.core.Tracer) else array(node)
    walk = Walk()
    walk.add(node, False)
    if any(isinstance(v, jax.core.Tracer) for v in walk.inputs):
        return None
    return array(node)


def arrays(values) -> list:
    """Node values (arrays or deferred results) as arrays: a walk's inputs, for a program."""
    return [deferred.value(v) for v in values]


def program_for(key, build):
    """The compiled program for ``key`` (``build()`` makes its Program the first time)."""
    return programs.cache.get(key, build)


def compile_program(program):
    """``program`` compiled, outside the cache (a program nobody will ask for by key)."""
    return programs.compile_program(program)


def source(program) -> str:
    """The JAX source of ``program``, built under the lock that guards SymPy's caches."""
    with programs.building:
        return emitter.emit(program)


def helpers_called(sources) -> str:
    """The definitions of the helpers (codegen.stable, codegen.nan_literals) these sources call: a
    module of several programs holds each once."""
    joined = "".join(sources)
    return nan_literals.helpers(stable.definitions_for(joined), joined)


plain_path = speed.plain_path  # symgrad.plain_path(): the same numbers without the speed layer


def building():
    """The lock to hold while building Programs outside ``compiled`` (SymPy's caches are not
    safe from two threads)."""
    return programs.building


# ------------------------------------------------------------------------------ values


def realize(nodes) -> None:
    """Compute the values of ``nodes`` (and of the pending leaves they need) in one program.

    Someone looks at a value: what was recorded before belongs to an earlier step."""
    if _computed_now(nodes):
        program_ran()


def realize_outlived(nodes) -> None:
    """Compute results that outlived a step (``nodes.outlived``) now, when they are used again;
    not a step of its own (what the current step recorded is not outlived by it).  One the last
    read's program went through is learned: that program stores it next time (an evaluation
    loop's ``pred``, read again after ``loss.item()``, is not computed twice)."""
    structure, seen = _last_read
    for node in nodes:
        position, ref = seen.get(id(node), (None, None))
        if ref is not None and ref() is node:
            if len(_read_again) > programs.cache.capacity:
                _read_again.clear()
            _read_again.setdefault(structure, set()).add(position)
    _computed_now(nodes, False)


_read_again: dict = {}  # a read's structure -> positions of its results without history used after it
_last_read = [None, {}]  # the last read's structure, and its results without history: id -> (position, weak ref)


def compute_kept() -> None:
    """Compute the results without history of a graph with history recorded since the last
    backward that someone still holds uncomputed (an accuracy kept each step,
    ``(out.argmax(1) == y).float().mean()``): PyTorch has their values, and kept pending they would
    hold their step's graph, and with it the parameters' values of that step, as long as they live."""
    kept = taken_aside()
    if kept:
        compute(kept)


def compute(nodes) -> None:
    """Compute ``nodes`` now, as no step of its own (no one reads them yet)."""
    _computed_now(nodes, False)


def _computed_now(nodes, read: bool = True) -> bool:
    """``_realize`` on arrays, even while JAX traces a function that reads these nodes (a value
    captured by ``value_and_grad``): their values belong to no trace."""
    with deferred.on_arrays():
        return _without_collection(_realize, nodes, read)


def _walked(nodes):
    """The walk of ``nodes`` and the positions a program computes: theirs and the pending leaves
    they need, but for those that have values."""
    walk = Walk()
    wanted = tuple(walk.add(n, False) for n in nodes)
    wanted = tuple(dict.fromkeys(wanted + walk.pending_leaves(len(walk.order))))
    return walk, tuple(i for i in wanted if not walk.is_input(i))


def _values_key(walk, wanted) -> tuple:
    return ("value", tuple(walk.entries), wanted)


def values_program(nodes, numbers=(), indexings=()):
    """How ``compute(nodes)`` would compute them, kept to run again on other arrays of the same
    kinds (symgrad.replaying: a value read in each replayed cycle): the compiled program, the nodes
    whose arrays it takes, in order, the nodes it gives (the pending leaves ``nodes`` need too),
    and the float constants among ``numbers`` and the indexings among ``indexings`` whose values
    and starts it takes as its last inputs (the floats as float64 scalars, then each start as an
    int64 scalar), each in the order it takes them.  None when every value is there."""
    walk, wanted = _walked(nodes)
    if not wanted:
        return None
    inputs = [node for node, entry in zip(walk.order, walk.entries) if entry[0] is None]
    floats = sorted(walk.index[node] for node in numbers if node in walk.index)
    starts = sorted(walk.index[node] for node in indexings if node in walk.index)
    key, build = _values_key(walk, wanted), lambda: forward_program(walk, wanted)
    compiled = _taking_numbers(key, walk, _numbers_of(walk)[0], floats + starts, build) if floats or starts else \
        _compiled(key, walk, build)
    return (compiled, inputs, [walk.order[p] for p in wanted], [walk.order[p] for p in floats],
            [walk.order[p] for p in starts])


def run_values(compiled, inputs) -> list:
    """``compiled`` (from ``values_program``) run on arrays, outside any JAX trace."""
    with deferred.on_arrays():
        results = compiled.run(*inputs)
    program_ran()
    return results


def _realize(nodes, read: bool) -> bool:
    """Whether a program ran (nothing runs when every value is there).  A ``read`` also stores the
    results its structure's later reads used (``realize_outlived``)."""
    walk, wanted = _walked(nodes)
    if not wanted:
        return False
    if read:
        structure = (_erased(walk, _numbers_of(walk)[0], None), wanted)
        wanted += tuple(sorted(p for p in _read_again.get(structure, ()) if p not in wanted))
    compiled = _compiled(_values_key(walk, wanted), walk, lambda: forward_program(walk, wanted))
    for position, value in zip(wanted, compiled.run(*arrays(walk.inputs))):
        walk.order[position].computed(value)
    if read:
        _last_read[:] = [structure, {id(node): (p, weakref.ref(node)) for p, node in enumerate(walk.order)
                                     if node.value is None and node.op is not CONST and not node.requires_grad}]
    return True


# ---------------------------------------------------------------------------- backward


def backward(root, seed=None, retain_graph: bool = False, inputs=None, describe: bool = False):
    """Gradients of the node ``root`` (weighted by the node ``seed``) into the ``.grad`` of the
    tensors that own its leaves, or of the tensors ``inputs`` (which may be non-leaf).

    With ``describe``, returns what ran, for symgrad.cycles to replay: (program, its input nodes, the
    constants of the Python floats in it and its indexings with starts it may take, each with its walk
    position (its last inputs, those it takes), the pending leaves its outputs fill, the owners whose
    ``.grad`` it fills, a target node of each);
    None for a backward that is not one program on the root's own gradient."""
    if inputs is None:
        return _backward(root, seed, retain_graph, None, describe)
    if not len(inputs):
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    borrowed = [t for t in inputs if not t._node.is_leaf and not t._node.retains_grad]
    for t in borrowed:
        t._node.retains_grad, t._node.owner = True, weakref.ref(t)
    try:
        _backward(root, seed, retain_graph, inputs, False)
        return None
    finally:
        for t in borrowed:
            t._node.retains_grad, t._node.owner = False, None


def _backward(root, seed, retain_graph, inputs, describe):
    path, targets = gradient_path(root, inputs)
    for node in path:
        if node.freed and keeps_tensors(node):
            raise RuntimeError(FREED_MESSAGE)
    if hooks.on_nodes.data or hooks.leaves:  # any tensor with a hook (two truth tests: the hot path)
        cuts = hooks.cuts(path)
        if cuts or hooks.hooked_targets(owners_of(targets)[0]):
            return _staged(root, seed, retain_graph, path, targets, cuts)
    request = replay.request(root, targets) if seed is None and speed.fast else None
    found = programs.cache.find(request.key) if request is not None else None
    if found is not None and describe and found.moving:
        found = None  # symgrad.cycles maps the indexings whose starts are inputs by their nodes: a walk has them
    if found is not None:  # a structure seen before: no walk
        outputs = _replayed(found, root, request, path, targets)
        pending = [request.pending[i] for i in found.pending]
        owners, owned = request.owners, request.owned
        ran = (found.compiled, [request.sources[i] for i in found.inputs], found.floats, ()) if describe else None
    else:
        plan, compiled = _without_collection(_planned, root, seed, inputs, (path, targets))
        if request is not None:
            found = replay.replay_of(request, plan, compiled)
            if found is not None:
                programs.cache.put(request.key, found)
        outputs = deferred.call(compiled, plan.walk.inputs)
        pending = [plan.walk.order[position] for position in plan.pending]
        owners, owned = plan.owners, plan.owned
        walk = plan.walk
        ran = (compiled, [node for p, node in enumerate(walk.order) if walk.is_input(p)],
               [(p, node) for p, node in enumerate(walk.order) if is_float_scalar(node)],
               [(p, node) for p, node in enumerate(walk.order) if not walk.is_input(p) and moving_starts(node)]
               ) if describe else None
    if anomaly_mode[0] and anomaly_mode[1]:
        _check_nan(owned, outputs[1 + len(pending):])
    root.computed(outputs[0])
    for node, value in zip(pending, outputs[1:]):
        node.computed(value)
    for node, owner, value in zip(owned, owners, outputs[1 + len(pending):]):
        owner._set_grad(leaf(value, node.dtype, shape=node.shape))  # the program added any previous .grad
    program_ran()
    if not retain_graph:
        for node in path:
            node.freed = True
    return (*ran, pending, owners, owned) if describe and seed is None and not retain_graph else None


def _replayed(found, root, request, path, targets):
    """The outputs of the program ``found`` by the root's description, run on its sources; a big
    one gives up those nothing can read afterwards (symgrad.donation)."""
    dead = donation.dead_sources(root, request.pending, request.sources, found.aliasable,
                                 (path, targets, request.sources, request.pending, request.owned)
                                 ) if found.aliasable else ()
    return found.run(request, dead)


def _check_nan(nodes, gradients) -> None:
    """detect_anomaly: refuse gradients with NaN before any ``.grad`` takes them."""
    for node, gradient in zip(nodes, gradients):
        if jnp.isnan(deferred.value(gradient)).any():
            raise RuntimeError(f"backward returned nan values in the gradient of a tensor of shape "
                               f"{list(node.shape)} (anomaly detection: symgrad checks the gradients its backward "
                               f"program returns)")


def _planned(root, gradient_node, inputs, path_and_targets):
    """The walk of a backward and its compiled program (a miss builds it)."""
    plan = BackwardPlan(root, gradient_node, inputs, path_and_targets)
    return plan, _compiled(plan.key, plan.walk, plan.program)


# ------------------------------------------------------------------ backward with hooks


def _staged(root, seed, retain_graph, path, targets, cuts) -> None:
    """A backward that reaches hooks (symgrad.hooks), in stages: a program computes the gradient
    at the hooked nodes nearest the root (with the graph cut at every hooked node) and the parts of
    the other gradients that do not pass through them; Python runs their hooks; the next programs
    start from there with the gradients they returned.  Leaf hooks run on each leaf's total gradient
    before it is added to ``.grad``; post-accumulate hooks after."""
    order = Walk()
    order.add(root, True)
    units = hooks.units(cuts, order.index)  # nearest the root first, a group's members together
    realize(cuts)
    totals, final = {}, {}
    starts, value = [(root, seed)], None
    for k in range(len(units) + 1):
        below = [node for unit in units[k:] for node in unit]
        for start, weight in starts:
            outputs, reached = _stage(start, weight, below, targets)
            value = reached if value is None else value
            for node, gradient in outputs.items():
                totals[node] = gradient if node not in totals else totals[node] + gradient
        if k < len(units):
            own, onward = hooks.run(units[k], {node: totals.pop(node) for node in units[k]})
            final.update(own)
            starts = [(node, leaf(gradient, node.dtype, shape=node.shape))
                      for node, gradient in onward.items() if gradient is not None]
    root.computed(value)
    owners, owned, groups = owners_of(targets)
    sums = [None] * len(owners)
    for target, group in zip(targets, groups):
        gradient = final.get(target, totals.get(target))
        if gradient is not None:  # None: a module's backward hook let nothing flow to it
            sums[group] = gradient if sums[group] is None else sums[group] + gradient
    sums = [_hooked(hooks.of_leaf(owner, "grad"), gradient) if node.is_leaf and gradient is not None else gradient
            for owner, node, gradient in zip(owners, owned, sums)]  # all hooks first: an error changes no .grad
    if anomaly_mode[0] and anomaly_mode[1]:
        reached = [(node, gradient) for node, gradient in zip(owned, sums) if gradient is not None]
        _check_nan([node for node, _ in reached], [gradient for _, gradient in reached])
    for owner, node, gradient in zip(owners, owned, sums):
        if gradient is None:
            continue
        previous = owner._grad
        if previous is not None and not is_zero_fill(previous._node):
            gradient = array(previous._node) + gradient
        owner._set_grad(leaf(jnp.asarray(gradient, node.dtype.numpy), node.dtype, shape=node.shape))
        for hook in hooks.of_leaf(owner, "post") if hooks.accumulating[0] else ():
            hook(owner)
    program_ran()
    if not retain_graph:
        for node in path:
            node.freed = True


def _hooked(functions, gradient):
    """The gradient after each hook in turn (a hook returning None leaves it as it is)."""
    for function in list(functions):
        result = function(gradient)
        if result is not None:
            gradient = result
    return gradient


def _stage(start, weight, cuts, targets):
    """One program: the gradients of ``start`` (weighted by ``weight``) at the ``cuts`` (inputs
    here, with their values) and at the targets it reaches, by node; and the value of ``start``."""
    walk, _ = Walk.declaring(cuts, [node.value for node in cuts])
    root = walk.add(start, True)
    seed = walk.add(weight, False) if weight is not None else -1
    wanted = list(dict.fromkeys([*cuts, *[t for t in targets if t in walk.index]]))
    positions = [walk.index[n] for n in wanted]
    key = ("backward stage", tuple(walk.entries), root, seed, tuple(positions))

    def build():
        trace = Trace(walk, "backward_stage")
        for position, gradient in zip(positions, trace.gradients(root, positions, seed)):
            node = walk.order[position]
            trace.program.output(gradient, node.shape, node.dtype.name, f"gradient at {trace.exprs[position]}")
        trace.output(root, "value")
        return trace.program

    results = [deferred.value(r) for r in _compiled(key, walk, build).run(*arrays(walk.inputs))]
    return dict(zip(wanted, results)), results[-1]
