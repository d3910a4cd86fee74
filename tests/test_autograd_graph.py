"""The graph as PyTorch exposes it, against PyTorch: next_functions down to AccumulateGrad nodes
(with .variable), grad_fn names of create_graph gradients, autograd.Variable, gradcheck under
torch.autograd's names, and anomaly detection."""
import numpy as np
import pytest

import symgrad


def test_next_functions_reach_accumulate_grad_nodes(torch):
    for T in (symgrad, torch):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        c = T.tensor([3.0, 4.0])
        y = (x * c).exp()
        ((mul, _),) = y.grad_fn.next_functions
        (accumulate, _), (nothing, _) = mul.next_functions
        assert type(mul).__name__ == "MulBackward0" and nothing is None
        assert type(accumulate).__name__ == "AccumulateGrad" and accumulate.variable is x
        assert accumulate.name() == "torch::autograd::AccumulateGrad" and accumulate.next_functions == ()


def _graph(grad_fn):
    """``grad_fn``'s name and its next functions', recursively (None where PyTorch has none)."""
    if grad_fn is None:
        return None
    name = grad_fn.name().replace("torch::autograd::", "")
    return (name, [_graph(f) for f, _ in grad_fn.next_functions]) if grad_fn.next_functions else name


def test_linear_and_matmul_show_pytorchs_nodes_in_next_functions(torch):
    """nn.Linear's AddmmBackward0 lists (bias, input, TBackward0 of the weight) as PyTorch's;
    a matmul of a vector or a batch by a matrix shows the mm/mv and view PyTorch records
    between the result's view and the operands."""
    graphs = []
    for T in (symgrad, torch):
        T.manual_seed(0)
        w, b = T.ones(2, 3, requires_grad=True), T.ones(2, requires_grad=True)
        found = [_graph(T.nn.Linear(3, 2)(T.ones(4, 3)).grad_fn)]
        for shape in ((4, 3), (3,), (5, 4, 3)):
            for x in (T.ones(*shape), T.ones(*shape, requires_grad=True)):
                found += [_graph(T.nn.functional.linear(x, w, b).grad_fn), _graph(T.nn.functional.linear(x, w).grad_fn)]
        for left, right in (((5,), (5, 3)), ((2, 4, 5), (5, 3)), ((2, 4, 5), (5,)), ((3, 2, 4, 5), (3, 2, 5, 2))):
            for wanted in ((True, True), (False, True), (True, False)):
                a, c = (T.ones(*s, requires_grad=g) for s, g in zip((left, right), wanted))
                found.append(_graph((a @ c).grad_fn))
        graphs.append(found)
    assert graphs[0] == graphs[1]
    assert graphs[0][0] == ("AddmmBackward0", ["AccumulateGrad", None, ("TBackward0", ["AccumulateGrad"])])


CONSUMERS = {
    "pow": lambda x, y: (x ** 3).sum(), "mul": lambda x, y: (x * y).sum(), "x*x": lambda x, y: (x * x).sum(),
    "exp": lambda x, y: x.exp().sum(), "tanh": lambda x, y: x.tanh().sum(), "sigmoid": lambda x, y: x.sigmoid().sum(),
    "log": lambda x, y: x.log().sum(), "x/y": lambda x, y: (x / y).sum(), "y/x": lambda x, y: (y / x).sum(),
    "relu": lambda x, y: x.relu().sum(), "used twice": lambda x, y: (x.exp() * x).sum(),
}


@pytest.mark.parametrize("name", list(CONSUMERS))
def test_grad_fn_names_of_create_graph_gradients(torch, name):
    names = []
    for T in (symgrad, torch):
        x = T.tensor([0.5, 1.5], requires_grad=True)
        y = T.tensor([2.0, 3.0], requires_grad=True)
        (g,) = T.autograd.grad(CONSUMERS[name](x, y), x, create_graph=True)
        names.append(type(g.grad_fn).__name__)
    assert names[0] == names[1]


def test_variable(torch):
    for T in (symgrad, torch):
        v = T.autograd.Variable(T.ones(2), requires_grad=True)
        assert v.requires_grad and v.is_leaf and isinstance(v, T.autograd.Variable)
        assert isinstance(T.ones(1), T.autograd.Variable) and not isinstance(3, T.autograd.Variable)
        (v * 2).sum().backward()
        assert v.grad.tolist() == [2.0, 2.0]


def test_gradcheck_under_pytorchs_names():
    x = symgrad.tensor(np.array([0.3, 0.7]), requires_grad=True)
    assert symgrad.autograd.gradcheck(lambda a: (a.sin() * a).sum(), (x,))
    assert symgrad.autograd.gradgradcheck(lambda a: (a.sin() * a).sum(), (x,))


def test_detect_anomaly_refuses_a_nan_gradient_and_changes_no_grad():
    x = symgrad.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with symgrad.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match="nan values in the gradient"):
                (x.sqrt() * 0).sum().backward()
    assert x.grad is None
    (x.sqrt() * 0).sum().backward()  # off again: PyTorch's NaN lands in .grad
    assert np.isnan(x.grad.numpy()[0])
    with symgrad.autograd.set_detect_anomaly(True):
        assert symgrad.autograd.anomaly.is_anomaly_enabled()
    assert not symgrad.autograd.anomaly.is_anomaly_enabled()
