"""gradcheck, gradgradcheck, crosscheck and ``symgrad check``: they pass what is right and,
above all, catch what is wrong."""
import functools
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sympy as sp

import codegen.printer
import symgrad as torch
from symgrad import cli
from symgrad.ops.elementwise import infer_elementwise
from symgrad.ops.registry import Op
from symgrad.tensor import apply


class wrong_sin(sp.Function):
    """sin with a derivative that is off by a factor of 2: a bug for the checkers to find."""

    def fdiff(self, argindex=1):
        return 2 * sp.cos(self.args[0])


class wrong_second(sp.Function):
    """sin whose first derivative is right and whose second is wrong."""

    def fdiff(self, argindex=1):
        return wrong_cos(self.args[0])


class wrong_cos(sp.Function):
    def fdiff(self, argindex=1):
        return sp.sin(self.args[0])  # should be -sin


@pytest.fixture
def buggy_ops(monkeypatch):
    for head, jax_name in (("wrong_sin", "jnp.sin"), ("wrong_second", "jnp.sin"), ("wrong_cos", "jnp.cos")):
        monkeypatch.setitem(codegen.printer.ELEMENTWISE, head, jax_name)

    def op(name, form):
        return Op(name, "SinBackward0", infer_elementwise,
                  lambda p, node, x: p.assign(form(x), node.shape, node.dtype.name, name))

    return op("wrong_sin", wrong_sin), op("wrong_second", wrong_second)


def x64(*shape, seed=0):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=torch.float64, requires_grad=True)


# ----------------------------------------------------------------------------- gradcheck

def test_gradcheck_passes_right_gradients():
    assert torch.gradcheck(lambda x, w: torch.tanh(x @ w).exp(), (x64(3, 4), x64(4, 2, seed=1)))
    assert torch.gradcheck(lambda x: torch.nn.functional.log_softmax(x, 1), (x64(2, 5),))


def test_gradcheck_catches_a_wrong_gradient_and_says_where(buggy_ops):
    wrong, _ = buggy_ops
    with pytest.raises(torch.check.GradcheckError) as error:
        torch.gradcheck(lambda x: apply(wrong, x) * 3, (x64(4),))
    message = str(error.value)
    assert "input 0" in message and "entry" in message and "difference" in message
    assert torch.gradcheck(lambda x: apply(wrong, x), (x64(4),), raise_exception=False) is False


def test_gradcheck_only_checks_inputs_that_require_grad(buggy_ops):
    wrong, _ = buggy_ops
    constant = torch.tensor([0.5, 1.5], dtype=torch.float64)  # wrong_sin applies here only
    assert torch.gradcheck(lambda x, c: x * apply(wrong, c), (x64(2), constant))


def test_gradgradcheck_passes_and_catches_a_wrong_second_derivative(buggy_ops):
    _, second = buggy_ops
    assert torch.gradgradcheck(lambda x, w: torch.tanh(x @ w), (x64(2, 3), x64(3, 2, seed=1)))
    assert torch.gradgradcheck(lambda x: torch.nn.functional.softplus(x) * x.sigmoid(), (x64(5),))
    assert torch.gradcheck(lambda x: apply(second, x), (x64(4),))  # first order is right
    with pytest.raises(torch.check.GradcheckError, match="gradgradcheck"):
        torch.gradgradcheck(lambda x: apply(second, x), (x64(4),))


# ---------------------------------------------------------------------------- crosscheck

def network(x, w, b):
    return torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, torch.zeros(3, dtype=torch.float64))


INPUTS = {"x": np.ones(5), "w": np.random.default_rng(0).standard_normal((5, 3)),
          "b": np.random.default_rng(1).standard_normal(3)}


def test_crosscheck_engines_agree_on_the_seed_network(torch):
    import symgrad
    report = symgrad.crosscheck(network, INPUTS)
    assert report.ok and not report.skipped
    assert report.engines == ["symgrad", "finite_differences", "jax", "torch"]
    assert {c.input for c in report.comparisons} == {"x", "w", "b"}
    assert len(report.comparisons) == 3 * 6  # each input, each pair of four engines
    worst = max(c.max_abs for c in report.comparisons if "finite_differences" not in c.engines)
    assert worst < 1e-12
    data = report.to_dict()
    assert data["ok"] is True and json.dumps(data)
    assert report.to_markdown().startswith("| input | engines |")
    assert "all engines agree" in str(report)


def test_crosscheck_of_a_vector_valued_function(torch):
    import symgrad
    report = symgrad.crosscheck(lambda a, b: (a * b.exp(), a.sum()), [np.arange(3.0), np.ones(3)])
    assert report.ok


def test_claimed_gradients_are_checked():
    w = INPUTS["w"]
    x, b = INPUTS["x"], INPUTS["b"]
    s = 1 / (1 + np.exp(-(x @ w + b)))
    right = {"x": w @ (s / 3), "w": np.outer(x, s / 3), "b": s / 3}
    report = torch.crosscheck(network, INPUTS, against=(), claimed=right)
    assert report.ok
    wrong = dict(right, w=right["w"] * 1.01)
    report = torch.crosscheck(network, INPUTS, against=(), claimed=wrong)
    assert not report.ok
    bad = [c for c in report.comparisons if not c.ok]
    assert [c.input for c in bad] == ["w"] and bad[0].max_rel == pytest.approx(0.01 / 1.01, rel=1e-6)


def test_a_wrong_symbolic_gradient_is_reported(buggy_ops):
    wrong, _ = buggy_ops
    report = torch.crosscheck(lambda x: apply(wrong, x).sum(), [np.linspace(-1, 1, 4)],
                              against=("finite_differences", "jax"))
    assert not report.ok
    # jax differentiates the emitted forward (jnp.sin) itself: it sides with finite differences
    pairs = {c.engines: c.ok for c in report.comparisons}
    assert pairs[("finite_differences", "jax")] and not pairs[("symgrad", "jax")]


def test_nan_and_inf_inputs_are_reported_not_agreed():
    report = torch.crosscheck(lambda x: (x * x).sum(), [np.array([1.0, np.nan, np.inf])])
    assert not report.ok
    assert any("non-finite" in c.note for c in report.comparisons)
    assert "DISAGREEMENT" in str(report)


def test_kinks_relu_abs_at_zero_and_max_ties(torch):
    import symgrad
    at_zero = [np.array([-1.0, 0.0, 2.0])]
    relu = symgrad.crosscheck(lambda x: torch_relu(x).sum(), at_zero)
    pairs = {c.engines: c for c in relu.comparisons}
    assert pairs[("symgrad", "torch")].ok and pairs[("symgrad", "jax")].ok  # all say 0 at 0
    assert not pairs[("symgrad", "finite_differences")].ok  # a central difference says 1/2 there
    absolute = symgrad.crosscheck(lambda x: x.abs().sum(), at_zero, against=("jax", "torch"))
    pairs = {c.engines: c for c in absolute.comparisons}
    assert pairs[("symgrad", "torch")].ok  # d|x|/dx = sign(0) = 0, as PyTorch
    assert not pairs[("symgrad", "jax")].ok and absolute.gradients["jax"]["x"][1] == 1.0  # JAX says 1
    ties = symgrad.crosscheck(lambda x: x.max() * 2, [np.array([1.0, 3.0, 3.0])])
    assert ties.ok  # shared evenly between tied maxima by every engine, and by a central difference
    np.testing.assert_allclose(ties.gradients["symgrad"]["x"], [0.0, 1.0, 1.0])


def torch_relu(x):
    return torch.nn.functional.relu(x)


def test_huge_and_tiny_magnitudes():
    overflow = torch.crosscheck(lambda x: (x ** 2).sum() + x.exp().mean(), [np.array([1e6, -3e5, 10.0])],
                                against=("finite_differences", "jax"))
    assert not overflow.ok and not np.all(np.isfinite(overflow.gradients["symgrad"]["x"]))  # exp(1e6): said
    huge = torch.crosscheck(lambda x: (x ** 2).sum(), [np.array([1e6, -3e5, 2e5])], against=("finite_differences", "jax"))
    assert huge.ok
    # Mixed scales defeat finite differences (10.0 moves a sum of 1e12 below float64's resolution):
    # the report shows exactly that, while the two exact engines agree.
    mixed = torch.crosscheck(lambda x: (x ** 2).sum(), [np.array([1e6, -3e5, 10.0])], against=("finite_differences", "jax"))
    pairs = {c.engines: c.ok for c in mixed.comparisons}
    assert pairs[("symgrad", "jax")] and not pairs[("symgrad", "finite_differences")]
    tiny = torch.crosscheck(lambda x: (x ** 3).sum() * 1e20, [np.array([1e-8, -2e-8])],
                            against=("finite_differences", "jax"))
    assert tiny.ok
    np.testing.assert_allclose(tiny.gradients["symgrad"]["x"], 3e20 * np.array([1e-16, 4e-16]))


def test_float32_inputs_are_checked_in_float64():
    report = torch.crosscheck(lambda x: torch.tanh(x).sum(), [np.float32([0.1, 0.2, 0.3])],
                              against=("finite_differences",))
    assert report.ok
    assert report.gradients["symgrad"]["x"].dtype == np.float64


# ------------------------------------------------------------------------- command line

MODULE = textwrap.dedent("""
    import symgrad as torch

    def loss(x, w):
        return torch.nn.functional.softplus(x @ w).mean()

    def stiff(x):
        return torch.sin(x * 1e8).sum()
""")


def _symgrad_check(tmp_path, *args):
    path = tmp_path / "model.py"
    path.write_text(MODULE)
    return subprocess.run([sys.executable, "-m", "symgrad", "check", *[a.replace("FILE", str(path)) for a in args]],
                          capture_output=True, text=True, timeout=300)


def test_command_line_agreement_exits_zero(tmp_path):
    result = _symgrad_check(tmp_path, "FILE:loss", "--arg", "x=f64[4,3]", "--arg", "w=f64[3,2]",
                            "--against", "finite_differences,jax")
    assert result.returncode == 0, result.stderr
    assert "all engines agree" in result.stdout and "symgrad vs jax" in result.stdout


def test_command_line_disagreement_exits_one(tmp_path):
    result = _symgrad_check(tmp_path, "FILE:stiff", "--arg", "x=f64[3]", "--against", "finite_differences")
    assert result.returncode == 1 and "DISAGREEMENT" in result.stdout


def test_command_line_bad_usage_exits_two(tmp_path, capsys):
    """In this process (the two tests above run the command itself, ~3 s of imports each):
    ``symgrad.cli.main`` returns the exit status."""
    path = tmp_path / "model.py"
    path.write_text(MODULE)
    assert cli.main(["check", f"{path}:loss", "--arg", "x=f99[4]"]) == 2
    assert "expected NAME=DTYPE[SHAPE]" in capsys.readouterr().err


# ----------------------------------------------------------------------------- models

class ScaledNet(torch.nn.Module):
    """A user's module: submodules, a plain attribute, a module-level helper and super()."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.norm = torch.nn.BatchNorm1d(4)
        self.head = torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Linear(4, 2))
        self.scale = 0.5

    def forward(self, x):
        return _squash(self.head(self.norm(self.fc(x)))) * self.scale


class DoubledNet(ScaledNet):
    def forward(self, x):
        return super().forward(x) * 2


def _squash(t):
    return torch.nn.functional.softplus(t) - torch.sigmoid(t)


def _torch_gradients(model, x):
    """The parameters' gradients PyTorch computes for ``model`` (its twin built by hand)."""
    import torch as real
    twin = real.nn.Module()
    twin.fc, twin.norm = real.nn.Linear(3, 4), real.nn.BatchNorm1d(4)
    twin.head = real.nn.Sequential(real.nn.Tanh(), real.nn.Linear(4, 2))
    twin.double().load_state_dict({k: real.tensor(v.numpy()) for k, v in model.state_dict().items()})
    twin.train(model.training)
    t = twin.head(twin.norm(twin.fc(real.tensor(x))))
    out = (real.nn.functional.softplus(t) - real.sigmoid(t)) * 0.5
    (out * real.tensor(np.random.default_rng(0).standard_normal(out.shape))).sum().backward()
    return {name: p.grad.numpy() for name, p in twin.named_parameters()}


@pytest.mark.parametrize("training", [True, False])
def test_crosscheck_of_a_module_checks_its_parameters_against_pytorch(training):
    torch.manual_seed(0)
    model = ScaledNet().train(training)
    x = np.random.default_rng(1).standard_normal((6, 3))
    report = torch.crosscheck(model, [x])
    assert report.ok, str(report)
    names = ["fc.weight", "fc.bias", "norm.weight", "norm.bias", "head.1.weight", "head.1.bias"]
    assert sorted({c.input for c in report.comparisons}) == sorted(["x", *names])
    expected = _torch_gradients(model, x)
    for name in names:
        np.testing.assert_allclose(report.gradients["torch"][name], expected[name], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(report.gradients["symgrad"][name], expected[name], rtol=1e-9, atol=1e-12)
    # the check leaves the model as it was: its own parameters, running statistics untouched
    assert model.norm.num_batches_tracked.item() == 0
    assert np.array_equal(model.norm.running_mean.numpy(), np.zeros(4))
    assert model.fc.weight.dtype == torch.float32 and model.fc.weight.grad is None


def test_crosscheck_rebuilds_a_subclass_under_pytorch_with_super():
    torch.manual_seed(0)
    model = DoubledNet()
    report = torch.crosscheck(model, {"x": x64(5, 3)}, against=("torch",))
    assert report.ok, str(report)
    single = torch.crosscheck(ScaledNet(), {"x": x64(5, 3)}, against=("torch",))
    assert report.gradients["torch"]["x"].shape == (5, 3) and single.ok


def test_crosscheck_of_a_module_catches_a_wrong_parameter_gradient(buggy_ops):
    wrong, _ = buggy_ops

    class Wrong(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 3)

        def forward(self, x):
            return apply(wrong, self.fc(x))

    report = torch.crosscheck(Wrong(), [np.ones((4, 2))], against=("finite_differences",))
    failed = {c.input for c in report.comparisons if not c.ok}
    assert not report.ok and {"fc.weight", "fc.bias", "x"} <= failed


def test_command_line_checks_a_module_class(tmp_path, capsys):
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent("""
        import symgrad as torch
        from symgrad import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)

            def forward(self, x):
                return torch.tanh(self.fc(x)).sum()

        class NeedsWidth(Net):
            def __init__(self, width):
                super().__init__()
    """))
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=300)
    result = run([sys.executable, "-m", "symgrad", "check", f"{path}:Net", "--arg", "x=f64[4,3]"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fc.weight  symgrad vs torch" in result.stdout and "all engines agree" in result.stdout
    assert cli.main(["check", f"{path}:NeedsWidth", "--arg", "x=f64[4,3]"]) == 2  # in this process: no imports
    assert "cannot build NeedsWidth() with no arguments" in capsys.readouterr().err


def test_gradcheck_takes_pytorchs_switches():
    """``fast_mode=...`` (the Fuse Conv and BatchNorm tutorial) raised TypeError; symgrad compares the
    whole Jacobian either way, and refuses the switches whose checks it does not make."""
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: a.sin(), (x,), fast_mode=True, nondet_tol=0.0)
    assert torch.autograd.gradgradcheck(lambda a: (a ** 3).sum(), (x,), fast_mode=False)
    with pytest.raises(NotImplementedError, match="check_forward_ad"):
        torch.autograd.gradcheck(lambda a: a.sin(), (x,), check_forward_ad=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        torch.autograd.gradcheck(lambda a: a.sin(), (x,), bogus=1)
