"""``symgrad tour``: the seeds' one-layer network, from recording to generated JAX source."""
from __future__ import annotations

import sympy

import codegen
import symgrad as torch


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def run() -> None:
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

    _section("The loss as a SymPy expression")
    names = {"x": x, "y": y, "w": w, "b": b}
    print(torch.symbolic.expression(loss, names=names))

    _section("Its gradient, derived symbolically")
    gradient = torch.symbolic.gradient(loss, {"w": w, "b": b}, names={"x": x, "y": y})
    for name, expr in gradient.items():
        print(f"dloss/d{name} = {expr}")
    print("LaTeX of dloss/db:", sympy.latex(gradient["b"]))

    _section("The JAX program loss.backward() runs (forward and backward, one XLA call)")
    print(torch.symbolic.source(loss, names=names))

    _section("loss.backward(): gradients in .grad, as PyTorch computes them")
    loss.backward()
    print("w.grad =", w.grad)
    print("b.grad =", b.grad)

    _section("A training loop: the graph is rebuilt each step, the program is compiled once")
    compiles = codegen.stats.compiles
    for _ in range(100):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(x, w) + b, y)
        loss.backward()
        with torch.no_grad():
            w -= 0.5 * w.grad
            b -= 0.5 * b.grad
        w.grad.zero_()
        b.grad.zero_()
    print(f"loss after 100 steps: {loss.item():.4f}; programs compiled during the loop: "
          f"{codegen.stats.compiles - compiles}; cache hits so far: {codegen.stats.hits}")
