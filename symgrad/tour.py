"""``symgrad tour``: the seeds' one-layer network, from recording to generated JAX source.

Every number it prints is measured as it runs (programs compiled, cache hits, steps replayed),
so the tour stays true as the speed layer changes."""
from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import sympy

import codegen
import symgrad as torch
from symgrad import replaying


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def run(picture_dir=None) -> None:
    """The tour; the seed graph's picture goes to ``picture_dir`` (a temporary folder by default)."""
    torch.manual_seed(0)
    _section("A one-layer network, written as in the PyTorch tutorial")
    x = torch.ones(5)                          # input
    y = torch.zeros(3)                         # expected output
    w = torch.randn(5, 3, requires_grad=True)  # parameters
    b = torch.randn(3, requires_grad=True)
    z = torch.matmul(x, w) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    print("z    =", z)
    print("loss =", loss)
    print("z.grad_fn    =", z.grad_fn)
    print("loss.grad_fn =", loss.grad_fn)

    _section("The graph autograd recorded, as a picture (symgrad.viz)")
    folder = Path(picture_dir or Path(tempfile.gettempdir()) / "symgrad-tour")
    folder.mkdir(parents=True, exist_ok=True)
    drawing = torch.viz.draw(loss, names={"x": x, "y": y, "w": w, "b": b, "z": z}, backward=True)
    with warnings.catch_warnings():  # the notes below say what was skipped
        warnings.simplefilter("ignore")
        written = drawing.save(folder / "seed-graph.svg")
    for path in written:
        print("written:", path)
    for note in drawing.notes:
        print("note:", note)

    _section("The loss as a SymPy expression")
    names = {"x": x, "y": y, "w": w, "b": b}
    print(torch.symbolic.expression(loss, names=names))

    _section("Its gradient, derived symbolically")
    gradient = torch.symbolic.gradient(loss, {"w": w, "b": b}, names={"x": x, "y": y})
    for name, expr in gradient.items():
        print(f"dloss/d{name} = {expr}")
    print("LaTeX of dloss/db:", sympy.latex(gradient["b"]))
    entries = torch.symbolic.gradient(loss, {"b": b}, names={"x": x, "y": y, "w": w}, elementwise=True)
    print("entry by entry, as a textbook writes it: dloss/db_1 =", entries["b"][1])

    _section("The JAX program loss.backward() runs (forward and backward, one XLA call)")
    print(torch.symbolic.source(loss, names=names))

    _section("loss.backward(): gradients in .grad, as PyTorch computes them")
    loss.backward()
    print("w.grad =", w.grad)
    print("b.grad =", b.grad)

    _section("A training loop: the graph is rebuilt each step; a program per new structure")
    compiled, hits, replayed = [], codegen.stats.hits, replaying.stats.replayed
    for _ in range(100):
        before = codegen.stats.compiles
        loss = torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(x, w) + b, y)
        loss.backward()
        with torch.no_grad():
            w -= 0.5 * w.grad
            b -= 0.5 * b.grad
        w.grad.zero_()
        b.grad.zero_()
        compiled.append(codegen.stats.compiles - before)
    print(f"loss after 100 steps: {loss.item():.4f}")
    _report_compiles(compiled, codegen.stats.hits - hits, replaying.stats.replayed - replayed)

    _section("The gradient exported: a directory that runs with plain JAX (docs/exporting.md)")

    def loss_fn(w, b):  # x and y are read from the closure: constants of the artifact
        return torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(x, w) + b, y)

    lowered = torch.value_and_grad(loss_fn, argnums=(0, 1)).lower(w.detach(), b.detach())
    artifact = lowered.save(folder / "seed-gradient", overwrite=True)
    print("written:", artifact, "(" + ", ".join(sorted(p.name for p in Path(artifact).iterdir())) + ")")
    value, (grad_w, grad_b) = torch.load(artifact)(w.detach().numpy(), b.detach().numpy())
    print(f"loaded back and called: loss {float(value):.4f}, dloss/db = {grad_b}")


def _report_compiles(compiled, hits, replayed) -> None:
    """What the loop compiled, step by step, and why the first two steps differ from the rest."""
    steps = [f"step {i + 1}: {n}" for i, n in enumerate(compiled) if n]
    print(f"programs compiled during the loop: {sum(compiled)} ({', '.join(steps) or 'none'}); "
          f"cache hits: {hits}")
    print("  a program is compiled once per structure: ops, shapes, which leaves need grad, and whether\n"
          "  .grad already holds values to add to.")
    if compiled[:2] == [1, 1] and not any(compiled[2:]):
        print("  step 1's backward adds into the .grad that the backward above filled; from step 2 on, .grad\n"
              "  was zeroed and w and b were updated in place under no_grad, so each program also computes\n"
              "  their new values: a second structure, which every later step shares and finds cached.")
    print(f"  once a step's trace (its ops, in-place writes and zero_ calls) equals the step before, the\n"
          f"  next steps are replayed (symgrad/replaying.py): each op is checked against the trace, w, b and\n"
          f"  their .grad are carried from step to step, and {codegen.cycle_scan.LENGTH} steps run as one "
          f"XLA call (a lax.scan): {replayed} steps replayed.")
