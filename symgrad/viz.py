"""Pictures of the graph behind a tensor: Graphviz DOT text always, SVG or PNG when Graphviz is there.

``draw(loss, names={"w": w, "b": b})`` walks the recorded nodes (not the IR), so what it shows
is what PyTorch's autograd would hold: leaves with their names, shapes, dtypes and
``requires_grad``; ops under their ``grad_fn`` names; values computed under ``no_grad`` or
detached drawn dashed, outside the gradient's path.  ``backward=True`` adds the program symbolic
reverse mode wrote for ``loss.backward()``, one box per assignment, with dotted edges from the
forward values it reads.  A long graph recorded step by step draws each repeated run of steps
once, boxed with its count, and at most ``MAX_DRAWN`` boxes are drawn in all.

Rendering needs the ``graphviz`` package (``pip install -e ".[viz]"``) and its ``dot`` program
(Debian's ``graphviz``); without them the DOT text is still there and saving says what it skipped.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import sympy as sp

from symgrad import engine
from symgrad.nodes import CONST, LEAF, grad_fn_of
from symgrad.tracing import BackwardPlan, Trace

try:  # the optional extra: without it there is DOT text and no picture
    import graphviz
except ImportError:
    graphviz = None

COLLAPSE_FROM = 40  # graphs of fewer boxes are drawn whole
MIN_STEPS = 4       # a run repeated this often is drawn once
MAX_PERIOD = 64     # boxes per repeated step looked for
MAX_DRAWN = 300     # boxes drawn at most; the rest (the earliest) are counted in one box
MAX_LABEL = 60      # characters of an assignment shown in its box


class Box:
    """One box of the picture: its label, DOT attributes, the boxes it reads and its signature
    (equal signatures, inputs at equal offsets, are the same step)."""

    __slots__ = ("label", "style", "inputs", "signature", "edge")

    def __init__(self, label, style, inputs, signature, edge=None):
        self.label, self.style, self.inputs, self.signature = label, style, inputs, signature
        self.edge = edge  # the style of the edges into it, when no gradient flows along them


class Drawing:
    """A drawn graph: ``dot`` (the DOT text), ``notes`` (what was left out or could not be done),
    ``render``/``save`` for pictures, and Jupyter's ``_repr_svg_``."""

    def __init__(self, dot: str, notes: list):
        self.dot, self.notes = dot, notes

    def render(self, format: str = "svg") -> bytes | None:
        """The picture as bytes (``"svg"``, ``"png"`` ...), or None when Graphviz is missing
        (``notes`` then says which part)."""
        if graphviz is None:
            self._note("no picture: the graphviz package is missing (pip install -e \".[viz]\")")
            return None
        try:
            return graphviz.Source(self.dot).pipe(format=format)
        except graphviz.ExecutableNotFound:
            self._note("no picture: Graphviz's dot program is missing (apt-get install graphviz)")
            return None

    def save(self, path) -> list:
        """Write the DOT text beside ``path`` (``.dot``) and, for another suffix (``.svg``,
        ``.png``), the picture too when Graphviz can make it; returns the paths written."""
        path = Path(path)
        dot_path = path.with_suffix(".dot")
        dot_path.write_text(self.dot)
        written = [dot_path]
        if path.suffix not in ("", ".dot", ".gv"):
            picture = self.render(path.suffix[1:])
            if picture is None:
                warnings.warn(f"{dot_path} written; {path} skipped: {self.notes[-1]}", stacklevel=2)
            else:
                path.write_bytes(picture)
                written.append(path)
        return written

    def _note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def _repr_svg_(self):
        picture = self.render("svg")
        return picture.decode() if picture is not None else None

    def _repr_mimebundle_(self, include=None, exclude=None):
        svg = self._repr_svg_()
        return {"image/svg+xml": svg, "text/plain": repr(self)} if svg else {"text/plain": repr(self)}

    def __repr__(self):
        boxes = sum(" [label=" in line for line in self.dot.splitlines())
        notes = "".join(f"; {n}" for n in self.notes)
        return f"<symgrad.viz.Drawing: {boxes} boxes{notes}>"


def draw(tensor, names=None, backward: bool = False) -> Drawing:
    """The graph behind ``tensor``; ``names`` (name -> tensor) labels leaves and results;
    ``backward`` adds the symbolic backward program.  A tensor named twice, or one that is not
    in the graph, is a ValueError."""
    order = _walk(tensor._node)
    index = {node: i for i, node in enumerate(order)}
    labels = _names(names, index)
    notes = []
    if len(order) == 1:
        notes.append("the tensor has no history: it is a leaf, drawn alone")
    boxes = [_forward_box(node, index, labels, node is order[-1]) for node in order]
    sections = [("forward", "forward: the recorded graph", boxes)]
    if backward:
        program_boxes = _backward_boxes(tensor._node, names, boxes, index, notes)
        if program_boxes:
            sections.append(("backward", "backward: the program symbolic reverse mode wrote", program_boxes))
    return Drawing(_dot(sections, notes), notes)


# ------------------------------------------------------------------------------ the forward graph


def _walk(root):
    """The nodes ``root`` was computed from, inputs before users (iterative: graphs can be deep)."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        stack.extend((i, False) for i in reversed(node.inputs) if i not in seen)
    return order


def _names(names, index) -> dict:
    labels = {}
    for name, tensor in (names or {}).items():
        node = tensor._node
        if node in labels:
            raise ValueError(f"one tensor is named both {labels[node]!r} and {name!r}")
        if node not in index:
            raise ValueError(f"{name!r} is not in the graph being drawn")
        labels[node] = name
    return labels


def _shape(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _forward_box(node, index, labels, is_root) -> Box:
    position = index[node]
    inputs = [index[i] for i in node.inputs]
    name = labels.get(node)
    if node.op is LEAF:
        lines = [name or "leaf", _shape(node.shape), node.dtype.name]
        if node.requires_grad:
            lines.append("requires_grad")
        if node.inputs:
            lines.append("detached: no gradient")
        style = {"shape": "ellipse", "style": "filled", "fillcolor": "lightblue" if node.requires_grad else "white"}
    elif node.op is CONST:
        lines = [repr(node.attrs[0])] + ([_shape(node.shape)] if node.shape else [])
        style = {"shape": "plaintext"}
    else:
        grad_fn = grad_fn_of(node)
        if grad_fn is not None:
            lines = [type(grad_fn).__name__, node.op.name]
            style = {"shape": "box", "style": "filled", "fillcolor": "lightgrey"}
        else:
            under = any(i.requires_grad for i in node.inputs)
            lines = [node.op.name, "computed under no_grad" if under else "no grad_fn"]
            style = {"shape": "box", "style": "dashed", "fontcolor": "grey40"}
        lines.append(_shape(node.shape))
        if name:
            lines.insert(0, name)
    if is_root:
        style = {**style, "style": "filled", "fillcolor": "darkolivegreen1", "penwidth": "2"}
    # A step's own values are read at the same offsets in every step; the leaves and constants
    # every step shares, at the same positions.
    reads = tuple(("at", index[i]) if i.op in (LEAF, CONST) else position - index[i] for i in node.inputs)
    return Box(lines, style, inputs, (tuple(lines), node.requires_grad, reads), _stopped(node))


def _stopped(node):
    """The style of edges along which the gradient stops: into a detached leaf, or into a value
    computed under no_grad from one that requires grad."""
    if node.requires_grad or not any(i.requires_grad for i in node.inputs):
        return None
    return {"style": "dashed", "color": "grey40", "fontcolor": "grey40",
            "label": "detach" if node.op is LEAF else "no_grad"}


# ------------------------------------------------------------------------ the backward program


def _backward_boxes(root, names, forward_boxes, index, notes):
    """One box per assignment of the backward program, and one per gradient; an input that is a
    forward value is ``("forward", position)``."""
    if not root.requires_grad:
        notes.append("backward skipped: the tensor does not require grad")
        return []
    with engine.building():
        plan = BackwardPlan(root, None)
        named = {id(t._node): n for n, t in (names or {}).items()}
        trace = Trace(plan.walk, "backward", named)
        forward_assignments = len(trace.program.assignments)
        grads = trace.gradients(plan.root, [p for p, _ in plan.targets])
    if not plan.targets:
        notes.append("backward skipped: no leaf the gradient would reach is alive")
        return []
    forward = {e: index[plan.walk.order[p]] for p, e in enumerate(trace.exprs)
               if isinstance(e, sp.Symbol) and plan.walk.order[p] in index}
    boxes, defined = [], {}
    for sym, expr in _live(trace.program.assignments[forward_assignments:], grads):
        defined[sym] = len(boxes)
        boxes.append(_assignment_box(f"{sym.name} = ", expr, defined, forward, forward_boxes, len(boxes)))
    for (position, node), grad in zip(plan.targets, grads):
        label = named.get(id(node), str(trace.exprs[position]))
        box = _assignment_box(f"{label}.grad = ", sp.sympify(grad), defined, forward, forward_boxes, len(boxes))
        box.style = {"shape": "box", "style": "filled", "fillcolor": "lightblue"}
        boxes.append(box)
    return boxes


def _live(assignments, grads):
    """The assignments the gradients read (reverse mode also writes the adjoints of inputs that
    need none, which codegen drops too)."""
    live = set().union(*(sp.sympify(g).free_symbols for g in grads))
    kept = []
    for sym, expr in reversed(assignments):
        if sym in live:
            live |= expr.free_symbols
            kept.append((sym, expr))
    return kept[::-1]


def _assignment_box(prefix, expr, defined, forward, forward_boxes, position) -> Box:
    """A box reads backward boxes (told apart by offset in the signature) and forward values
    (``("forward", position)``, told apart by what they are: each step reads its own)."""
    text = str(expr)
    text = text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 3] + "..."
    reads = [s for s in expr.free_symbols if s in defined or s in forward]
    reads.sort(key=lambda s: (s not in defined, defined.get(s, forward.get(s))))
    template = expr.xreplace({s: sp.Symbol(f"_{k}") for k, s in enumerate(reads)})
    inputs = [defined[s] if s in defined else ("forward", forward[s]) for s in reads]
    signature = (str(template), tuple(position - i if isinstance(i, int) else forward_boxes[i[1]].signature
                                      for i in inputs))
    return Box([prefix + text], {"shape": "box"}, inputs, signature)


# -------------------------------------------------------------------------- collapsing and DOT


def _runs(signatures) -> list:
    """(start, period, steps) of each run of at least MIN_STEPS repeats of a step, by start."""
    ids = {}
    sig = [ids.setdefault(s, len(ids)) for s in signatures]
    n, runs, i = len(sig), [], 0
    while i < n - 1:  # the last box (the tensor drawn) stays on its own
        best = None
        for period in range(1, min(MAX_PERIOD, (n - 1 - i) // MIN_STEPS) + 1):
            if sig[i] != sig[i + period]:
                continue
            length = period
            while i + length < n - 1 and sig[i + length] == sig[i + length - period]:
                length += 1
            steps = length // period
            if steps >= MIN_STEPS and (best is None or steps * period > best[0] * best[1]):
                best = (period, steps)
        if best:
            runs.append((i, *best))
            i += best[0] * best[1]
        else:
            i += 1
    return runs


def _representatives(boxes):
    """Each box's stand-in (itself, or its counterpart in the first step of its run) and the runs."""
    rep = list(range(len(boxes)))
    runs = _runs([b.signature for b in boxes]) if len(boxes) >= COLLAPSE_FROM else []
    for start, period, steps in runs:
        for j in range(start + period, start + period * steps):
            rep[j] = start + (j - start) % period
    return rep, runs


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attributes(style: dict) -> str:
    return ", ".join(f"{k}={_quote(v)}" for k, v in style.items())


def _dot(sections, notes) -> str:
    lines = ["digraph symgrad {", '  graph [rankdir="TB", fontname="Helvetica"];',
             '  node [fontname="Helvetica", fontsize="11"];', '  edge [arrowsize="0.7"];']
    reps, runs, shown, cut = {}, {}, {}, {}
    for key, _, boxes in sections:
        reps[key], runs[key] = _representatives(boxes)
        standing = [i for i in range(len(boxes)) if reps[key][i] == i]
        shown[key], cut[key] = set(standing[-MAX_DRAWN:]), len(standing) > MAX_DRAWN
        if cut[key]:
            notes.append(f"{key}: {len(standing) - MAX_DRAWN} earliest boxes not drawn (at most {MAX_DRAWN})")
    for key, title, boxes in sections:
        lines += [f"  subgraph cluster_{key} {{", f"    label={_quote(title)};", '    style="dotted";']
        lines += _box_lines(key, boxes, runs[key], shown[key], cut[key], notes)
        lines += _edge_lines(key, boxes, reps, shown)
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _box_lines(key, boxes, runs, shown, cut, notes) -> list:
    """The boxes drawn, each run's first step boxed with its count; ``cut``: earlier ones are not."""
    lines = []
    for n, (start, period, steps) in enumerate(runs):
        members = [j for j in range(start, start + period) if j in shown]
        if members:
            notes.append(f"{key}: a step of {period} boxes repeated {steps} times is drawn once")
            lines += [f"    subgraph cluster_{key}_run{n} {{",
                      f"      label={_quote(f'× {steps} steps: one drawn, {steps - 1} alike not')};",
                      '      style="dashed";', *(f"      {key}{j};" for j in members), "    }"]
    if cut:
        lines.append(f"    {key}_more [label={_quote('earlier boxes not drawn')}, shape=\"note\"];")
    for i in sorted(shown):
        lines.append(f"    {key}{i} [label={_quote(chr(10).join(boxes[i].label))}, {_attributes(boxes[i].style)}];")
    return lines


def _edge_lines(key, boxes, reps, shown) -> list:
    """Each edge once, between stand-ins: an edge from a step into the next is "next step"."""
    rep, edges = reps[key], {}
    for j, box in enumerate(boxes):
        if rep[j] not in shown[key]:
            continue
        for source in box.inputs:
            section, position = source if isinstance(source, tuple) else (key, source)
            origin = reps[section][position]
            name = f"{section}{origin}" if origin in shown[section] else f"{section}_more"
            edge = (name, f"{key}{rep[j]}")
            if edge in edges:
                continue
            if section != key:
                edges[edge] = {"style": "dotted", "color": "blue"}  # a forward value the backward reads
            elif origin >= rep[j]:  # read from the step before, drawn as the step itself
                edges[edge] = {"style": "dashed", "label": "next step", "constraint": "false"}
            else:
                edges[edge] = box.edge
    return [f"    {source} -> {target}" + (f" [{_attributes(style)}];" if style else ";")
            for (source, target), style in edges.items()]
