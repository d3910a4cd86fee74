"""The one tracing step: recorded nodes -> an IR Program, and its gradient by symbolic reverse mode.

Every way of turning the graph into a program comes through here: ``backward`` and value reads
(symgrad.engine), compiled functions (symgrad.compiled), the symbolic view (symgrad.symbolic) and
the checks (symgrad.check.traced).  A ``Walk`` lists the nodes a request needs in topological
order, with one structural key entry per node; a ``Trace`` lowers a walk into a Program (each
op's SymPy form) and adds outputs and gradients by walk position; ``BackwardPlan`` is the walk,
targets and key of one ``backward``.  Nothing here compiles or runs: that is the engine's.
"""
from __future__ import annotations

import sympy as sp

from symgrad import dtypes, storage
from symgrad.autodiff import reverse_mode
from symgrad.ir import Program
from symgrad.nodes import CONST, LEAF, Node, is_zero_fill, owners_of, priority


class Walk:
    """The nodes a request needs, in topological order, with one key entry per node."""

    __slots__ = ("order", "index", "entries", "inputs", "numbers_at")

    def __init__(self):
        self.order, self.index, self.entries, self.inputs = [], {}, [], []
        self.numbers_at = frozenset()  # positions of Python floats and indexings lowered with their numbers
        # as trailing inputs (the floats first)

    @classmethod
    def declaring(cls, nodes, values=None) -> tuple["Walk", list]:
        """A walk whose first inputs are ``nodes``, whatever they are (a graph cut there, or
        placeholders a lowering gives expressions for), each once with its value from ``values``;
        and the index in ``nodes`` of each.  Walking from its roots stops at them."""
        walk, firsts = cls(), []
        for k, node in enumerate(nodes):
            if node not in walk.index:
                walk.index[node] = len(walk.order)
                walk.order.append(node)
                walk.entries.append((None, node.shape, node.dtype, node.requires_grad))
                walk.inputs.append(None if values is None else values[k])
                firsts.append(k)
        return walk, firsts

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

    def owned(self) -> "Walk":
        """This walk over private copies of its nodes, for a walk kept to be lowered again later from
        given inputs (a custom Function's recorded graphs): a node someone else holds may be computed
        meanwhile, a computed node without history forgets its inputs (``Node.computed``), and an
        input's requires_grad may change back (``nodes.standing_for_inputs``)."""
        walk = Walk()
        walk.entries, walk.inputs, walk.numbers_at = self.entries, self.inputs, self.numbers_at
        for node, entry in zip(self.order, self.entries):
            if entry[0] is not None:
                inputs = tuple(walk.order[i] for i in entry[3]) if len(entry) > 2 else ()
                node = Node(node.op, inputs, node.attrs, node.shape, node.dtype, node.requires_grad,
                            kind=node.kind, args=node.args, pending=node.pending)
            else:
                node = Node(LEAF, (), (), node.shape, node.dtype, node.requires_grad, kind=None)
            walk.index[node] = len(walk.order)
            walk.order.append(node)
        return walk

    def is_input(self, position: int) -> bool:
        return self.entries[position][0] is None

    def pending_leaves(self, upto: int):
        return tuple(i for i in range(upto) if self.order[i].op is LEAF and self.order[i].value is None)

    def lower(self, program: Program, names=None, given=None):
        """Each node's expression in ``program``: inputs become symbols, ops their SymPy forms.

        ``names`` maps ``id(node)`` to the name its input symbol should have; ``given`` are the
        expressions the inputs stand for instead, in order (a graph lowered again inside a
        program that already has them: symgrad.higher_order).
        """
        exprs, floats, starts, given = [], [], [], iter(given) if given is not None else None
        for position, node in enumerate(self.order):
            entry = self.entries[position]
            if position in self.numbers_at and is_float_scalar(node):
                floats.append(program.input((), "float64", "c"))  # a Python float is a double
                exprs.append(floats[-1])
            elif entry[0] is None and given is not None:
                exprs.append(next(given))
            elif entry[0] is None:
                hint = (names or {}).get(id(node)) or ("w" if node.requires_grad and node.op is LEAF else "x")
                exprs.append(program.input(node.shape, node.dtype.name, hint))
            else:
                args = [exprs[i] for i in entry[3]] if node.inputs else []
                if floats:
                    args = [_at_compute_dtype(program, a, node) if a in floats else a for a in args]
                if not node.op.elementwise:  # a number or a scalar standing for an array becomes one,
                    # typed (a bare 0.0 is a float64 to JAX: max() of a zeroed float32 0-d tensor was one)
                    args = [program.materialize(a, i.shape, _typed(i, node)) for a, i in zip(args, node.inputs)]
                moving = position in self.numbers_at and moving_starts(node)
                if moving:
                    starts += [program.input((), "int64", "i") for _ in moving[1]]
                    expr = node.op.starts.build(program, node, *args, starts[-len(moving[1]):])
                else:
                    expr = node.op.build(program, node, *args)
                if (node.op is LEAF or not node.requires_grad) and any(i.requires_grad for i in node.inputs) \
                        and not expr.is_Number:
                    expr = program.stop_gradient(expr)  # computed under no_grad, or detached
                exprs.append(expr)
        if floats or starts:
            trailing = set(floats + starts)
            program.inputs = [s for s in program.inputs if s not in trailing] + floats + starts
        return exprs


def _compute_dtype(consumer):
    """The dtype ``consumer`` computes in: a Python float beside it is taken in it, as PyTorch takes
    it (float32 beside a float32 tensor, as a literal would be in JAX; exact in float64)."""
    dtype = consumer.dtype
    return dtype if dtype.is_floating_point else dtypes.promote([(i.dtype, priority(i)) for i in consumer.inputs])


def _at_compute_dtype(program: Program, number, consumer):
    """A Python float taken as an input, cast to the dtype ``consumer`` computes in."""
    dtype = _compute_dtype(consumer)
    return program.astype(number, dtype.name) if dtype.is_floating_point else number


def _typed(input_node, consumer) -> str:
    """The dtype an input is made an array in: a Python float's is its consumer's (x64[0] = 1e30
    wrote a float32-rounded 1e30), a tensor's its own."""
    if is_float_scalar(input_node):
        dtype = _compute_dtype(consumer)
        if dtype.is_floating_point:
            return dtype.name
    return input_node.dtype.name


def moving_starts(node):
    """(the op's attributes with the starts a program may take as inputs erased, their values), or
    None: an indexing's (symgrad.ops.moving_starts)."""
    starts = node.op.starts
    return None if starts is None else starts.erase(node.attrs, node.inputs[0].shape)


def is_float_scalar(node) -> bool:
    return node.op is CONST and not node.shape and node.attrs[0].__class__ is float


class Trace:
    """A walk lowered into a Program: each walked node's expression, by position."""

    def __init__(self, walk: Walk, name: str, names=None):
        self.walk = walk
        self.program = Program(name)
        self.exprs = walk.lower(self.program, names)

    def output(self, position: int, label: str) -> None:
        """The value of the node at ``position`` becomes an output of the program."""
        node = self.walk.order[position]
        self.program.output(self.exprs[position], node.shape, node.dtype.name, label)

    def gradients(self, root: int, wrt, seed: int = -1):
        """The gradient of the node at ``root`` (weighted by the node at ``seed``, or by 1) w.r.t.
        the nodes at positions ``wrt``: one expression each, appended to the program."""
        weight = self.exprs[seed] if seed >= 0 else sp.S.One
        return reverse_mode(self.program, self.exprs[root], weight, [self.exprs[p] for p in wrt])


def forward_program(walk: Walk, positions, name: str = "forward", labels=None, names=None) -> Program:
    """The program computing the nodes at ``positions`` of ``walk``."""
    trace = Trace(walk, name, names)
    for i, position in enumerate(positions):
        trace.output(position, labels[i] if labels else f"value {position}")
    return trace.program


def vjp_program(program: Program, output: int, wrt, name: str = "vjp") -> Program:
    """Inputs (``program``'s inputs, then a cotangent of its output ``output``) -> the gradients
    w.r.t. the inputs at positions ``wrt``: reverse mode over a program that exists already."""
    program = program.copy(name)
    expr, shape, dtype = program.outputs[output]
    seed = program.input(shape, dtype, "cotangent")
    targets = [program.inputs[k] for k in wrt]
    grads = reverse_mode(program, expr, seed, targets)
    program.outputs, program.output_names = [], []
    for sym, g in zip(targets, grads):
        program.output(g, program.shapes[sym], program.dtypes[sym], f"gradient of {sym}")
    return program


def walk_of(roots, named=(), to_leaves: bool = False) -> tuple[Walk, list]:
    """A walk of ``named`` nodes (first, so their inputs come in their order) and then
    ``roots``; the roots' positions."""
    walk = Walk()
    for node in named:
        walk.add(node, False, to_leaves)
    return walk, [walk.add(root, False, to_leaves) for root in roots]


class BackwardPlan:
    """Everything ``backward`` needs: the walk, the targets and the structural key."""

    def __init__(self, root, gradient, inputs=None, path_and_targets=None):
        self.walk = walk = Walk()
        self.root = walk.add(root, True)
        self.seed = walk.add(gradient, False) if gradient is not None else -1
        path, targets = path_and_targets or gradient_path(root, inputs)
        self.path = path
        self.main = len(walk.order)
        self.targets = [(walk.index[t], t) for t in targets]
        self.owners, self.owned, self.groups = owners_of(targets)
        self.accumulate = _accumulations(walk, [owner._grad for owner in self.owners])
        self.pending = walk.pending_leaves(self.main)
        self.key = ("grad", tuple(walk.entries), self.root, self.seed, self.main,
                    tuple(p for p, _ in self.targets), self.groups, self.accumulate)

    def program(self, names=None) -> Program:
        """The forward-and-backward Program; ``names`` maps ``id(node)`` to an input's name."""
        names = names or {}
        trace = Trace(self.walk, "forward_backward", names)
        grads = trace.gradients(self.root, [p for p, _ in self.targets], self.seed)
        trace.output(self.root, "value")
        for position in self.pending:
            trace.output(position, f"new value of {trace.exprs[position]}")
        totals = [sp.S.Zero] * len(self.owners)
        for grad, group in zip(grads, self.groups):
            totals[group] += grad
        done = []
        for node, total, previous in zip(self.owned, totals, self.accumulate):
            if previous >= 0:
                total = total + trace.exprs[previous]
            elif previous <= -2:  # the same .grad tensor as an earlier owner's: it holds both
                total = total + done[-2 - previous]
            done.append(total)
            label = names.get(id(node), trace.exprs[self.walk.index[node]])
            trace.program.output(total, node.shape, node.dtype.name,
                                 f"{label}.grad" + (" (accumulated)" if previous != -1 else ""))
        return trace.program


def _accumulations(walk, grads):
    """Per owner, what its new gradient adds to: -1 nothing (no .grad, or zero-filled), the walk
    position of its .grad, or ``-2 - k`` when its .grad is the tensor owner k's also is (PyTorch
    adds both gradients into it, in place)."""
    first, accumulate = {}, []
    for k, grad in enumerate(grads):
        if grad is not None and id(grad) in first:
            accumulate.append(-2 - first[id(grad)])
            continue
        if grad is not None:
            first[id(grad)] = k
        accumulate.append(-1 if grad is None or is_zero_fill(grad._node) else walk.add(grad._node, False))
    return tuple(accumulate)


def _toward(suspects, path, targets) -> list:
    """The suspects on a way from the root to the nodes ``targets``: PyTorch runs only the backwards a
    gradient toward the inputs asked for needs, so ``autograd.grad(loss, b)`` checks nothing another
    input's branch saved."""
    consumers: dict = {}
    for node in path:
        for i in node.inputs:
            if i.requires_grad:
                consumers.setdefault(i, []).append(node)
    reaching, stack = set(targets), list(targets)
    while stack:
        for node in consumers.get(stack.pop(), ()):
            if node not in reaching:
                reaching.add(node)
                stack.append(node)
    return [node for node in suspects if node in reaching]


def gradient_path(root, inputs=None):
    """Non-leaf nodes a gradient flows through, and the nodes whose .grad it fills, in order
    (only those of the tensors ``inputs``, if given).  A node on the path that reads a value an
    in-place write replaced is checked against what PyTorch's backward saves (symgrad.storage)."""
    seen, path, targets, stack, suspects = {root}, [], [], [root], []
    while stack:
        node = stack.pop()
        if node.op is LEAF:
            if node.owner is not None and node.owner() is not None:
                targets.append(node)
            continue
        path.append(node)
        if node.retains_grad and node.owner() is not None:
            targets.append(node)
        if node.written is not None or node.op.keeps_history:
            suspects.append(node)
        for i in node.inputs:
            if i.written is not None or i.op.view and storage.base_written(i) is not None:
                suspects.append(node)
            if i.requires_grad and i not in seen:
                seen.add(i)
                stack.append(i)
    if inputs is not None:  # a leaf written in place under no_grad after a use: its earlier nodes are its too
        chosen, owners = {t._node for t in inputs}, {id(t) for t in inputs}
        targets = [t for t in targets if t in chosen or t.op is LEAF and id(t.owner()) in owners]
        if suspects:
            suspects = _toward(suspects, path, chosen.union(targets))
    if suspects:
        storage.check_saved(suspects)
    return path, targets
