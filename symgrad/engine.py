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

Programs are called through ``codegen.deferred``: in a hot loop on small tensors the values
stored are ``Pending`` placeholders, arguments like any array to the next call, and whoever
needs the array itself asks for it (``Tensor._value``, ``deferred.value``).
"""
from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jnp
import sympy as sp

import codegen.compile as programs  # a module import: codegen imports symgrad.ir
from codegen import deferred
from symgrad import replay
from symgrad.autodiff import reverse_mode
from symgrad.graph import CONST, LEAF, is_zero_fill, leaf, owners_of, program_ran
from symgrad.ir import Program

FREED_MESSAGE = ("Trying to backward through the graph a second time (or directly access saved tensors "
                 "after they have already been freed). Saved intermediate values of the graph are freed when "
                 "you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
                 "through the graph a second time or if you need to access saved tensors after calling backward.")


class Walk:
    """The nodes a request needs, in topological order, with one key entry per node."""

    __slots__ = ("order", "index", "entries", "inputs", "floats_as_inputs")

    def __init__(self):
        self.order, self.index, self.entries, self.inputs = [], {}, [], []
        self.floats_as_inputs = False  # lower Python floats as trailing inputs instead of numbers

    def add(self, root, through_grad: bool, to_leaves: bool = False) -> int:
        """Add ``root`` and what it needs; returns its position.  Iterative: graphs can be deep.

        Nodes with values are inputs, except non-leaf nodes that requires grad when
        ``through_grad`` (their ops are differentiated) and every non-leaf when ``to_leaves``.
        """
        index, order, entries, inputs = self.index, self.order, self.entries, self.inputs
        position = index.get(root)
        if position is not None:
            return position
        stack = [root]
        push, pop, entry = stack.append, stack.pop, entries.append  # this loop runs per node: keep it lean
        while stack:
            node = stack[-1]
            if node in index:
                pop()
                continue
            value = node.value
            if value is not None and (node.op is LEAF if to_leaves else not (
                    through_grad and node.requires_grad and node.op is not LEAF)):
                entry((None, node.shape, node.dtype, node.requires_grad))
                inputs.append(value)
            else:
                ready = True
                for i in node.inputs:
                    if i not in index:
                        push(i)
                        ready = False
                if not ready:
                    continue
                if node.inputs:
                    entry((node.op, node.attrs, node.requires_grad, tuple([index[i] for i in node.inputs])))
                else:  # a constant: its kind tells 1 from 1.0, True and -0.0, and its shape and dtype
                    entry((node.op, node.kind))
            pop()
            index[node] = len(order)
            order.append(node)
        return index[root]

    def is_input(self, position: int) -> bool:
        return self.entries[position][0] is None

    def pending_leaves(self, upto: int):
        return tuple(i for i in range(upto) if self.order[i].op is LEAF and self.order[i].value is None)

    def lower(self, program: Program, names=None):
        """Each node's expression in ``program``: inputs become symbols, ops their SymPy forms.

        ``names`` maps ``id(node)`` to the name its input symbol should have.
        """
        exprs, floats = [], []
        for position, node in enumerate(self.order):
            entry = self.entries[position]
            if self.floats_as_inputs and _is_float_scalar(node):
                floats.append(program.input((), node.dtype.name, "c"))
                exprs.append(floats[-1])
            elif entry[0] is None:
                hint = (names or {}).get(id(node)) or ("w" if node.requires_grad and node.op is LEAF else "x")
                exprs.append(program.input(node.shape, node.dtype.name, hint))
            else:
                args = [exprs[i] for i in entry[3]] if node.inputs else []
                if not node.op.elementwise:  # a number or a scalar standing for an array becomes one
                    args = [a if a.is_Number and not i.shape else program.materialize(a, i.shape, i.dtype.name)
                            for a, i in zip(args, node.inputs)]
                expr = node.op.build(program, node, *args)
                if (node.op is LEAF or not node.requires_grad) and any(i.requires_grad for i in node.inputs) \
                        and not expr.is_Number:
                    expr = program.stop_gradient(expr)  # computed under no_grad, or detached
                exprs.append(expr)
        if floats:
            program.inputs = [s for s in program.inputs if s not in floats] + floats
        return exprs


def _is_float_scalar(node) -> bool:
    return node.op is CONST and not node.shape and node.attrs[0].__class__ is float


class _FloatsBound:
    """A program that takes a structure's Python floats as inputs, bound to one set of values."""

    def __init__(self, compiled, values):
        program = compiled.program
        names = [program.dtypes[s] for s in program.inputs[len(program.inputs) - len(values):]]
        self.compiled = compiled
        self.values = values = tuple(jnp.asarray(v, dtype=name) for v, name in zip(values, names))  # not weak float64s
        self.source, self.program = compiled.source, program
        self.python_fn = lambda *inputs: compiled.python_fn(*inputs, *values)
        self.result_count, self.small = compiled.result_count, compiled.small
        self.calls, self.wait = 0, deferred.HOT_AFTER

    def run(self, *inputs):
        return self.compiled.run(*inputs, *self.values)


_float_values: dict = {}  # structure with its floats erased -> the sets of values seen


def _compiled(key, walk: Walk, build):
    """The compiled program for ``key``.

    Python floats are baked into programs (their values are in the key).  When the same
    structure comes back with other values (a learning-rate schedule), it gets one program
    taking those floats as inputs, bound to each new set of values without compiling again.
    """
    compiled = programs.cache.find(key)
    if compiled is not None:
        return compiled
    positions = [i for i, node in enumerate(walk.order) if _is_float_scalar(node)]
    if not positions:
        return programs.cache.get(key, build)
    floats = set(positions)
    erased = ("floats as inputs", key[0],
              tuple(e if i not in floats else (CONST, None) for i, e in enumerate(walk.entries)), key[2:])
    values = tuple(walk.order[i].attrs[0] for i in positions)
    generic = programs.cache.find(erased)
    if generic is None:
        if len(_float_values) > programs.cache.capacity:
            _float_values.clear()
        seen = _float_values.setdefault(erased, set())
        seen.add(values)
        if len(seen) < 2:
            return programs.cache.get(key, build)
        walk.floats_as_inputs = True
        try:
            generic = programs.cache.get(erased, build)
        finally:
            walk.floats_as_inputs = False
    return programs.cache.put(key, _FloatsBound(generic, values))


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


# ------------------------------------------------------------------------------ values


def realize(nodes) -> None:
    """Compute the values of ``nodes`` (and of the pending leaves they need) in one program.

    Someone looks at a value: what was recorded before belongs to an earlier step."""
    if _computed_now(nodes):
        program_ran()


def realize_outlived(nodes) -> None:
    """Compute results that outlived a step (``graph.outlived``) now, when they are used again;
    not a step of its own (what the current step recorded is not outlived by it)."""
    _computed_now(nodes)


def _computed_now(nodes) -> bool:
    """``_realize`` on arrays, even while JAX traces a function that reads these nodes (a value
    captured by ``value_and_grad``): their values belong to no trace."""
    with jax.ensure_compile_time_eval():
        return _without_collection(_realize, nodes)


def _realize(nodes) -> bool:
    """Whether a program ran (nothing runs when every value is there)."""
    walk = Walk()
    wanted = tuple(walk.add(n, False) for n in nodes)
    wanted = tuple(dict.fromkeys(wanted + walk.pending_leaves(len(walk.order))))
    wanted = tuple(i for i in wanted if not walk.is_input(i))
    if not wanted:
        return False
    key = ("value", tuple(walk.entries), wanted)
    compiled = _compiled(key, walk, lambda: _value_program(walk, wanted))
    for position, value in zip(wanted, compiled.run(*[deferred.value(v) for v in walk.inputs])):
        walk.order[position].computed(value)
    return True


def _value_program(walk: Walk, wanted) -> Program:
    program = Program("forward")
    exprs = walk.lower(program)
    for position in wanted:
        node = walk.order[position]
        program.output(exprs[position], node.shape, node.dtype.name, f"value {position}")
    return program


# ---------------------------------------------------------------------------- backward


class BackwardPlan:
    """Everything ``backward`` needs: the walk, the targets and the structural key."""

    def __init__(self, root, gradient, inputs=None, gradient_path=None):
        self.walk = walk = Walk()
        self.root = walk.add(root, True)
        self.seed = walk.add(gradient, False) if gradient is not None else -1
        path, targets = gradient_path or _gradient_path(root, inputs)
        self.path = path
        self.main = len(walk.order)
        self.targets = [(walk.index[t], t) for t in targets]
        self.owners, self.owned, self.groups = owners_of(targets)
        existing = [owner._grad for owner in self.owners]
        self.accumulate = tuple(-1 if g is None or is_zero_fill(g._node) else walk.add(g._node, False)
                                for g in existing)
        self.pending = walk.pending_leaves(self.main)
        self.key = ("grad", tuple(walk.entries), self.root, self.seed, self.main,
                    tuple(p for p, _ in self.targets), self.groups, self.accumulate)

    def program(self, names=None) -> Program:
        """The forward-and-backward Program; ``names`` maps ``id(node)`` to an input's name."""
        walk = self.walk
        names = names or {}
        program = Program("forward_backward")
        exprs = walk.lower(program, names)
        seed = exprs[self.seed] if self.seed >= 0 else sp.S.One
        grads = reverse_mode(program, exprs[self.root], seed, [exprs[p] for p, _ in self.targets])
        root = walk.order[self.root]
        program.output(exprs[self.root], root.shape, root.dtype.name, "value")
        for position in self.pending:
            node = walk.order[position]
            program.output(exprs[position], node.shape, node.dtype.name, f"new value of {exprs[position]}")
        totals = [sp.S.Zero] * len(self.owners)
        for grad, group in zip(grads, self.groups):
            totals[group] += grad
        for node, total, previous in zip(self.owned, totals, self.accumulate):
            total = total + exprs[previous] if previous >= 0 else total
            label = names.get(id(node), exprs[walk.index[node]])
            program.output(total, node.shape, node.dtype.name,
                           f"{label}.grad" + (" (accumulated)" if previous >= 0 else ""))
        return program


def _gradient_path(root, inputs=None):
    """Non-leaf nodes a gradient flows through, and the nodes whose .grad it fills, in order
    (only those of the tensors ``inputs``, if given)."""
    seen, path, targets, stack = {root}, [], [], [root]
    while stack:
        node = stack.pop()
        if node.op is LEAF:
            if node.owner is not None and node.owner() is not None:
                targets.append(node)
            continue
        path.append(node)
        if node.retains_grad and node.owner() is not None:
            targets.append(node)
        for i in node.inputs:
            if i.requires_grad and i not in seen:
                seen.add(i)
                stack.append(i)
    if inputs is not None:
        chosen = {t._node for t in inputs}
        targets = [t for t in targets if t in chosen]
    return path, targets


def backward(tensor, gradient=None, retain_graph=False, create_graph=False, inputs=None) -> None:
    """``tensor.backward``; ``inputs`` may name non-leaf tensors, whose .grad is then filled."""
    if inputs is None:
        return _backward(tensor, gradient, retain_graph, create_graph, None)
    if isinstance(inputs, tensor.__class__):
        inputs = [inputs]
    if not len(inputs):
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    borrowed = [t for t in inputs if not t._node.is_leaf and not t._node.retains_grad]
    for t in borrowed:
        t._node.retains_grad, t._node.owner = True, weakref.ref(t)
    try:
        _backward(tensor, gradient, retain_graph, create_graph, inputs)
    finally:
        for t in borrowed:
            t._node.retains_grad, t._node.owner = False, None


def _backward(tensor, gradient, retain_graph, create_graph, inputs) -> None:
    root = tensor._node
    if create_graph:
        raise NotImplementedError("backward(create_graph=True) is not supported: symgrad's higher-order "
                                  "gradients come from symgrad.gradcheck / the functional API")
    if not root.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if _numel(root.shape) != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                               f"(backward() on a tensor of shape {tuple(root.shape)}; pass gradient=)")
        gradient_node = None
    else:
        gradient_node = _gradient_node(gradient, root)
    path, targets = _gradient_path(root, inputs)
    for node in path:
        if node.freed and node.op.saves:
            raise RuntimeError(FREED_MESSAGE)
    request = replay.request(root, targets) if gradient_node is None else None
    found = programs.cache.find(request.key) if request is not None else None
    if found is not None:  # a structure seen before: no walk
        outputs = found.run(request)
        pending = [request.pending[i] for i in found.pending]
        owners, owned = request.owners, request.owned
    else:
        plan, compiled = _without_collection(_planned, root, gradient_node, inputs, (path, targets))
        if request is not None:
            found = replay.replay_of(request, plan, compiled)
            if found is not None:
                programs.cache.put(request.key, found)
        outputs = deferred.call(compiled, plan.walk.inputs)
        pending = [plan.walk.order[position] for position in plan.pending]
        owners, owned = plan.owners, plan.owned
    root.computed(outputs[0])
    for node, value in zip(pending, outputs[1:]):
        node.computed(value)
    for node, owner, value in zip(owned, owners, outputs[1 + len(pending):]):
        _accumulate(owner, value, node)
    program_ran()
    if not retain_graph:
        for node in path:
            node.freed = True


def _planned(root, gradient_node, inputs, gradient_path):
    """The walk of a backward and its compiled program (a miss builds it)."""
    plan = BackwardPlan(root, gradient_node, inputs, gradient_path)
    return plan, _compiled(plan.key, plan.walk, plan.program)


def _accumulate(owner, value, node) -> None:
    """``owner.grad`` becomes ``value`` (the program already added any previous gradient)."""
    grad = leaf(value, node.dtype, shape=node.shape)
    if owner._grad is None:
        owner._grad = owner.__class__(grad)
    else:
        owner._grad._rebind(grad)


def _gradient_node(gradient, root):
    from symgrad.creation import as_tensor
    node = as_tensor(gradient, dtype=root.dtype)._node
    if node.shape != root.shape:
        raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of torch.Size({list(node.shape)}) "
                           f"and output[0] has a shape of torch.Size({list(root.shape)}).")
    return node


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
