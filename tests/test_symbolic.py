"""The symbolic view (symgrad.symbolic): expressions and gradients as SymPy, printable and in LaTeX."""
import numpy as np
import sympy as sp

import symgrad as torch


def test_gradient_of_the_seed_network_reads_as_math():
    x, y = torch.ones(5), torch.zeros(3)
    w = torch.full((5, 3), 0.1, requires_grad=True)
    b = torch.zeros(3, requires_grad=True)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(x, w) + b, y)
    grads = torch.symbolic.gradient(loss, {"b": b}, names={"x": x, "y": y, "w": w})
    assert str(grads["b"]) == "-y/3 + sigmoid(b + matmul(x, w))/3"


def test_indexing_prints_as_python_writes_it():
    """An index spec is a tuple of tuples inside the IR: it printed as a crash before."""
    X = torch.tensor(np.arange(36.0).reshape(6, 2, 3), requires_grad=True)
    y = X[2, :, 1:3].sum()
    assert str(torch.symbolic.expression(y, names={"X": X})) == "sum(index(X, [2, 0:2, 1:3]), (0, 1), False)"
    gradient = torch.symbolic.gradient(y, {"X": X})["X"]
    assert str(gradient) == "index_add(1, [2, 0:2, 1:3], (6, 2, 3))"
    assert r"\operatorname{index\_add}" in sp.latex(gradient)
