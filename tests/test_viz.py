"""symgrad.viz: the graph behind a tensor as DOT text (nodes and edges checked), and as a picture
when Graphviz is installed."""
import re
import shutil

import pytest

import symgrad as torch
from symgrad import viz


def _seed():
    torch.manual_seed(0)
    x, y = torch.ones(5), torch.zeros(3)
    w = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    z = torch.matmul(x, w) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    return loss, {"x": x, "y": y, "w": w, "b": b, "z": z}


def _boxes(dot):
    """box id -> its label's lines."""
    return {m[0]: m[1].split("\\n") for m in re.findall(r'^\s*(\w+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M)}


def _edges(dot):
    """(source label, target label, edge attributes) of every edge."""
    boxes = _boxes(dot)
    return {(boxes[a][0], boxes[b][0], attrs or "") for a, b, attrs in
            re.findall(r"^\s*(\w+) -> (\w+)(?: \[(.*)\])?;", dot, re.M)}


def test_the_seed_graph_has_its_leaves_ops_and_edges():
    loss, names = _seed()
    dot = viz.draw(loss, names=names).dot
    labels = {lines[0]: lines for lines in _boxes(dot).values()}
    assert labels["w"] == ["w", "(5, 3)", "float32", "requires_grad"]
    assert labels["b"] == ["b", "(3,)", "float32", "requires_grad"]
    assert labels["x"] == ["x", "(5,)", "float32"]
    assert labels["z"] == ["z", "AddBackward0", "add", "(3,)"]
    assert labels["SqueezeBackward4"] == ["SqueezeBackward4", "matmul", "(3,)"]  # PyTorch's name for x @ w
    assert labels["BinaryCrossEntropyWithLogitsBackward0"][-1] == "()"
    assert len(labels) == 7
    assert {(a, b) for a, b, _ in _edges(dot)} == {
        ("x", "SqueezeBackward4"), ("w", "SqueezeBackward4"), ("SqueezeBackward4", "z"), ("b", "z"),
        ("z", "BinaryCrossEntropyWithLogitsBackward0"), ("y", "BinaryCrossEntropyWithLogitsBackward0")}


def test_detached_and_no_grad_values_are_drawn_as_such():
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    with torch.no_grad():
        c = b * 3
    d = b.detach()
    dot = viz.draw((b + c + d).sum(), names={"a": a, "b": b, "c": c, "d": d}).dot
    labels = {lines[0]: lines for lines in _boxes(dot).values()}
    assert labels["c"] == ["c", "mul", "computed under no_grad", "(2,)"]
    assert labels["d"] == ["d", "(2,)", "float32", "detached: no gradient"]
    edges = _edges(dot)
    assert ("b", "c", 'style="dashed", color="grey40", fontcolor="grey40", label="no_grad"') in edges
    assert ("b", "d", 'style="dashed", color="grey40", fontcolor="grey40", label="detach"') in edges
    assert ("a", "b", "") in edges  # the gradient's path is drawn plainly


def test_backward_adds_the_symbolic_program():
    loss, names = _seed()
    dot = viz.draw(loss, names=names, backward=True).dot
    labels = [lines[0] for lines in _boxes(dot).values()]
    assert "g_add = (-y + sigmoid(add))/3" in labels
    assert "b.grad = g_add" in labels and "w.grad = grad_w" in labels
    assert not any(label.startswith("matmul") for label in labels)  # x needs no gradient: not drawn
    edges = _edges(dot)
    assert ("z", "g_add = (-y + sigmoid(add))/3", 'style="dotted", color="blue"') in edges


def test_a_long_chain_is_drawn_once_per_step():
    h0 = torch.tensor([0.5], requires_grad=True)
    h = h0
    for _ in range(3000):
        h = torch.sin(h) * h + 0.5
    drawing = viz.draw(h.sum(), names={"h0": h0})
    assert "a step of 3 boxes repeated 2999 times is drawn once" in drawing.notes[0]
    assert len(_boxes(drawing.dot)) < 12
    assert "× 2999 steps" in drawing.dot
    assert ("AddBackward0", "SinBackward0", 'style="dashed", label="next step", constraint="false"') in _edges(drawing.dot)


def test_a_graph_without_repeats_past_the_limit_says_what_it_left_out():
    x = torch.tensor([0.5], requires_grad=True)
    h = x
    for k in range(viz.MAX_DRAWN + 50):
        h = h * float(k + 2)  # each step its own constant: nothing repeats
    drawing = viz.draw(h)
    assert any("earliest boxes not drawn" in note for note in drawing.notes)
    assert len(_boxes(drawing.dot)) <= viz.MAX_DRAWN + 1


def test_a_leaf_is_drawn_alone_with_a_note():
    w = torch.zeros(2, requires_grad=True)
    drawing = viz.draw(w, names={"w": w})
    assert drawing.notes == ["the tensor has no history: it is a leaf, drawn alone"]
    assert list(_boxes(drawing.dot).values()) == [["w", "(2,)", "float32", "requires_grad"]]


def test_names_must_be_of_the_graph_and_given_once():
    loss, names = _seed()
    with pytest.raises(ValueError, match="named both 'w' and 'weights'"):
        viz.draw(loss, names={"w": names["w"], "weights": names["w"]})
    with pytest.raises(ValueError, match="'other' is not in the graph"):
        viz.draw(loss, names={"other": torch.ones(2)})


def test_without_graphviz_saving_writes_the_dot_and_says_so(tmp_path, monkeypatch):
    loss, names = _seed()
    monkeypatch.setattr(viz, "graphviz", None)
    drawing = viz.draw(loss, names=names)
    with pytest.warns(UserWarning, match="seed.svg skipped: no picture: the graphviz package is missing"):
        written = drawing.save(tmp_path / "seed.svg")
    assert written == [tmp_path / "seed.dot"]
    assert (tmp_path / "seed.dot").read_text() == drawing.dot
    assert drawing._repr_mimebundle_() == {"text/plain": repr(drawing)}


@pytest.mark.skipif(viz.graphviz is None or shutil.which("dot") is None, reason="Graphviz is not installed")
def test_the_seed_graph_renders_as_png_and_svg(tmp_path):
    loss, names = _seed()
    drawing = viz.draw(loss, names=names, backward=True)
    written = drawing.save(tmp_path / "seed.png")
    assert written == [tmp_path / "seed.dot", tmp_path / "seed.png"]
    assert (tmp_path / "seed.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = drawing._repr_svg_()
    assert svg.lstrip().startswith("<?xml") and "BinaryCrossEntropyWithLogitsBackward0" in svg
    assert drawing._repr_mimebundle_()["image/svg+xml"] == svg
