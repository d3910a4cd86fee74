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
    assert str(gradient) == "index_add(broadcast_to(1, (2, 2)), [2, 0:2, 1:3], (6, 2, 3))"  # a 1 of each entry
    assert r"\operatorname{index\_add}" in sp.latex(gradient)


# ------------------------------------------------------------------- the view as SymPy itself

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

import symgrad  # noqa: E402  (beside the torch-like alias: a test below takes the real torch)

from symgrad.ir import functions as F  # noqa: E402


def _seed():
    symgrad.manual_seed(0)
    x, y = symgrad.ones(5), symgrad.zeros(3)
    w = symgrad.randn(5, 3, requires_grad=True)
    b = symgrad.randn(3, requires_grad=True)
    loss = symgrad.nn.functional.binary_cross_entropy_with_logits(symgrad.matmul(x, w) + b, y)
    return loss, {"x": x, "y": y, "w": w, "b": b}


def _arrays(names):
    return {name: t.detach().numpy().astype(np.float64) for name, t in names.items()}


def test_the_named_symbols_are_sympys_own():
    a, b = torch.tensor(0.7, requires_grad=True), torch.tensor(-1.3, requires_grad=True)
    out = torch.sigmoid(a * b) * b
    expr = torch.symbolic.expression(out, names={"a": a, "b": b})
    derivative = sp.diff(expr, sp.Symbol("b"))  # plain symbols: not silently 0
    out.backward()
    assert float(derivative.subs({sp.Symbol("a"): 0.7, sp.Symbol("b"): -1.3})) == pytest.approx(b.grad.item(), rel=1e-6)
    assert float(expr.subs({"a": 0.7, "b": -1.3})) == pytest.approx(out.item(), rel=1e-6)


@pytest.mark.parametrize("module", ["numpy", "jax"])
def test_the_seed_gradient_lambdifies_to_symgrads_numbers(module):
    loss, names = _seed()
    grads = torch.symbolic.gradient(loss, {"w": names["w"], "b": names["b"]}, names={"x": names["x"], "y": names["y"]})
    expr = torch.symbolic.expression(loss, names=names)
    symbols = [sp.Symbol(n) for n in names]
    values = list(_arrays(names).values())
    f = sp.lambdify(symbols, [expr, grads["w"], grads["b"]], modules=module)
    value, gw, gb = f(*values)
    loss.backward()
    assert float(value) == pytest.approx(loss.item(), rel=1e-6)
    np.testing.assert_allclose(np.asarray(gw), names["w"].grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gb), names["b"].grad.numpy(), rtol=1e-6)


def test_the_elementwise_view_reads_as_the_textbook_and_diff_agrees():
    loss, names = _seed()
    L = torch.symbolic.expression(loss, names=names, elementwise=True)
    G = torch.symbolic.gradient(loss, {"w": names["w"], "b": names["b"]}, names={"x": names["x"], "y": names["y"]},
                                elementwise=True)
    assert isinstance(G["w"], sp.Array) and G["w"].shape == (5, 3)
    assert str(G["b"][1]) == "-y_1/3 + sigmoid(b_1 + w_0_1*x_0 + w_1_1*x_1 + w_2_1*x_2 + w_3_1*x_3 + w_4_1*x_4)/3"
    at = {sp.Symbol(f"{name}_{'_'.join(map(str, i))}"): float(a[i])
          for name, a in _arrays(names).items() for i in np.ndindex(*a.shape)}
    loss.backward()
    for name in ("w", "b"):
        entries = np.vectorize(lambda e: float(e.xreplace(at)))(np.array(G[name].tolist(), dtype=object))
        symbols = np.array([[sp.Symbol(f"{name}_{i}_{j}") for j in range(3)] for i in range(5)] if name == "w"
                           else [sp.Symbol(f"b_{j}") for j in range(3)], dtype=object)
        by_diff = np.vectorize(lambda s: float(sp.diff(L, s).xreplace(at)))(symbols)
        np.testing.assert_allclose(entries, names[name].grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(by_diff, names[name].grad.numpy(), rtol=1e-6)


def test_the_elementwise_view_is_for_small_tensors():
    big = torch.ones(40, 40, requires_grad=True)
    with pytest.raises(ValueError, match="for small tensors: big has 1600 entries"):
        torch.symbolic.expression(big.sum(), names={"big": big}, elementwise=True)


@pytest.mark.parametrize("head", F.ELEMENTWISE_FUNCTIONS, ids=lambda h: h.__name__)
def test_every_ir_function_evaluates_and_lambdifies(head):
    args = [sp.pi / 4, sp.Rational(1, 3), sp.Rational(2, 3)][:max(head.nargs)]
    symbols = sp.symbols(f"a0:{len(args)}")
    expected = float(head.numeric(*(float(a) for a in args)))
    assert float(head(*symbols).subs(dict(zip(symbols, args))).evalf()) == pytest.approx(expected)
    assert float(head(sp.pi / 4, *args[1:]).evalf()) == pytest.approx(expected)  # unevaluated until evalf
    for module, array in (("numpy", np.asarray), ("jax", jnp.asarray)):
        f = sp.lambdify(symbols, head(*symbols), modules=module)
        assert float(f(*(array(float(a)) for a in args))) == pytest.approx(expected, rel=1e-6)


STRUCTURAL_CASES = {
    "sum": lambda a: a.sum(1),
    "mean": lambda a: a.mean(),
    "matmul": lambda a: a @ a.T,
    "reshape": lambda a: a.reshape(3, 2) * 2,
    "index": lambda a: a[1, 1:] * 3,
    "cat": lambda a: torch.cat([a, a * 2], 0),
    "logsumexp": lambda a: torch.logsumexp(a, 1),
    "softmax": lambda a: torch.softmax(a, 1),
    "log_softmax": lambda a: torch.log_softmax(a, 0),
    "amax": lambda a: a.amax(1),
    "cumsum": lambda a: a.cumsum(1),
    "prod": lambda a: a.prod(1),
    "sort": lambda a: a.sort(1, descending=True).values,
    "var": lambda a: a.var(1),
}


@pytest.mark.parametrize("name", STRUCTURAL_CASES)
def test_structural_heads_lambdify_to_the_tensors_values(name):
    a = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=torch.float64, requires_grad=True)
    out = STRUCTURAL_CASES[name](a)
    expr = torch.symbolic.expression(out, names={"a": a})
    for module in ("numpy", "jax"):
        f = sp.lambdify([sp.Symbol("a")], expr, modules=module)
        np.testing.assert_allclose(np.asarray(f(a.detach().numpy())), out.detach().numpy(), rtol=1e-12)
    grad = torch.symbolic.gradient(out.sum(), {"a": a})["a"]
    out.sum().backward()
    g = sp.lambdify([sp.Symbol("a")], grad, modules="jax")(a.detach().numpy())
    np.testing.assert_allclose(np.asarray(g), a.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_what_the_view_returns_shows_in_jupyter_as_latex():
    loss, names = _seed()
    grads = torch.symbolic.gradient(loss, {"b": names["b"]}, names={"x": names["x"], "y": names["y"], "w": names["w"]})
    assert grads._repr_latex_().startswith(r"$\displaystyle \begin{aligned}\frac{\partial f}{\partial b} &= ")
    latex = torch.symbolic.expression(loss, names=names, elementwise=True)._repr_latex_()
    assert r"\operatorname{binary\_cross\_entropy\_with\_logits}{\left(b_{0} + w_{0 0} x_{0}" in latex


def test_forward_source_uses_the_given_names():
    loss, names = _seed()
    text = torch.symbolic.forward_source(loss, names=names)
    assert "def forward(x, y, w, b):" in text and "matmul = jnp.matmul(x, w)" in text
    assert "# returns: value" in text
    x = torch.ones(3)
    assert "def forward(x, x_1):" in torch.symbolic.forward_source(x * torch.ones(3))


def test_the_seed_gradient_is_pytorchs(torch):
    loss, names = _seed()
    grads = symgrad.symbolic.gradient(loss, {"w": names["w"], "b": names["b"]}, names={"x": names["x"], "y": names["y"]})
    values = _arrays(names)
    f = sp.lambdify([sp.Symbol(n) for n in names], [grads["w"], grads["b"]], modules="numpy")
    gw, gb = f(*values.values())
    w = torch.tensor(values["w"], requires_grad=True)
    b = torch.tensor(values["b"], requires_grad=True)
    torch.nn.functional.binary_cross_entropy_with_logits(
        torch.matmul(torch.tensor(values["x"]), w) + b, torch.tensor(values["y"])).backward()
    np.testing.assert_allclose(gw, w.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gb, b.grad.numpy(), rtol=1e-12)


def test_every_ir_head_prints_for_lambdify():
    """A head without ``array_code`` would print as an unknown name: lambdify's NameError."""
    for head in (*F.ELEMENTWISE_FUNCTIONS, *F.STRUCTURAL_PRIMITIVES):
        assert head.array_code, head.__name__


def test_sympy_diff_through_a_whole_array_head_says_what_to_use():
    loss, names = _seed()
    with pytest.raises(TypeError, match=r"cannot see inside sum .* elementwise=True"):
        sp.diff(symgrad.symbolic.expression(loss, names=names), sp.Symbol("w"))


@pytest.mark.parametrize("name", ["sum", "mean", "matmul", "reshape", "index", "cat", "logsumexp", "softmax",
                                  "log_softmax", "cumsum", "var"])
def test_the_elementwise_view_expands_sums_and_rearrangements(name):
    a = symgrad.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=symgrad.float64)
    out = STRUCTURAL_CASES[name](a)
    entries = symgrad.symbolic.expression(out, names={"a": a}, elementwise=True)
    at = {sp.Symbol(f"a_{i}_{j}"): float(a[i, j]) for i in range(2) for j in range(3)}
    values = np.vectorize(lambda e: float(sp.sympify(e).xreplace(at)))(np.array(entries.tolist() if isinstance(
        entries, sp.Array) else entries, dtype=object))
    np.testing.assert_allclose(values, out.numpy(), rtol=1e-12)
