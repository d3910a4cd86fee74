"""torch.func against PyTorch on the same inputs: grad, grad_and_value, vjp, jvp, jacrev, jacfwd,
hessian, vmap, functional_call, their compositions, and PyTorch's errors."""
import numpy as np
import pytest

import symgrad
from codegen.compile import stats

X = np.array([0.5, 1.5, -1.0], np.float32)
Y = np.array([1.0, 2.0, 3.0], np.float32)
W = np.array([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0]], np.float32)


def leaves(result):
    if isinstance(result, dict):
        return [a for k in sorted(result) for a in leaves(result[k])]
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in leaves(r)]
    return [result.detach().numpy() if hasattr(result, "detach") else np.asarray(result)]


CASES = {
    "grad": lambda T, F: F.grad(lambda x: (x.sin() * x).sum())(T.tensor(X)),
    "grad of two arguments": lambda T, F: F.grad(lambda x, y: (x * y.exp()).sum(), argnums=(0, 1))(
        T.tensor(X), T.tensor(Y)),
    "grad_and_value with aux": lambda T, F: F.grad_and_value(lambda x: ((x ** 3).sum(), x * 2), has_aux=True)(
        T.tensor(X)),
    "grad of grad": lambda T, F: F.grad(lambda x: F.grad(lambda y: (y ** 3).sum())(x).sum())(T.tensor(X)),
    "vjp": lambda T, F: (lambda out, fn: (out, fn(T.tensor(Y))))(*F.vjp(lambda x: x.sin() * 2, T.tensor(X))),
    "jvp": lambda T, F: F.jvp(lambda x, y: x.sin() * y, (T.tensor(X), T.tensor(Y)), (T.ones(3), T.tensor(X))),
    "jvp of a sum of a matrix": lambda T, F: F.jvp(lambda w: w.sum(), (T.tensor(W),), (T.tensor(W) * 3,)),
    "jvp of a mean of a matrix": lambda T, F: F.jvp(lambda w: w.mean(), (T.tensor(W),), (T.tensor(W) - 1,)),
    "jacrev": lambda T, F: F.jacrev(lambda x: x.sin() * x[0])(T.tensor(X)),
    "jacrev of a matrix function": lambda T, F: F.jacrev(lambda w, x: (w @ x).tanh(), argnums=(0, 1))(
        T.tensor(W), T.tensor(X)),
    "jacfwd": lambda T, F: F.jacfwd(lambda x: (x * x).cumsum(0))(T.tensor(X)),
    "hessian": lambda T, F: F.hessian(lambda x: (x.tanh() ** 3).sum())(T.tensor(X)),
    "vmap": lambda T, F: F.vmap(lambda a, b: (a * b).sum(), in_dims=(0, None))(T.tensor(W), T.tensor(X)),
    "vmap of grad": lambda T, F: F.vmap(F.grad(lambda x: (x.sin() * x).sum()))(T.tensor(W)),
    "vmap over dim 1 into dim 1": lambda T, F: F.vmap(lambda c: c * c.sum(), in_dims=1, out_dims=1)(T.tensor(W)),
    "functional_call": lambda T, F: _linear_call(T, F),
    "grad through functional_call": lambda T, F: F.grad(
        lambda p: F.functional_call(_linear(T), p, (T.tensor(X),)).pow(2).sum())(_params(T)),
}


def _linear(T):
    T.manual_seed(0)
    return T.nn.Linear(3, 2)


def _params(T):
    return {"weight": T.tensor(W), "bias": T.tensor([1.0, -1.0])}


def _linear_call(T, F):
    module = _linear(T)
    out = F.functional_call(module, _params(T), (T.tensor(X),))
    return out, module.weight.detach()  # the module's own weight is back in place (seeded alike: compare)


@pytest.mark.parametrize("name", list(CASES))
def test_func_matches_pytorch(torch, name):
    ours = leaves(CASES[name](symgrad, symgrad.func))
    theirs = leaves(CASES[name](torch, torch.func))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        if name != "functional_call" or a is not ours[-1]:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_tensors_with_history_keep_their_chain(torch):
    results = []
    for T in (symgrad, torch):
        w = T.tensor(Y, requires_grad=True)
        g = T.func.grad(lambda x: (x ** 3).sum())(w)
        (g * w).sum().backward()
        plain = T.func.grad(lambda x: (x ** 3).sum())(T.tensor(Y))
        results.append((g.detach().numpy(), w.grad.numpy(), g.requires_grad, plain.requires_grad))
    np.testing.assert_allclose(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1])
    assert results[0][2:] == results[1][2:] == (True, False)


def test_grad_compiles_once_per_transform():
    f = symgrad.func.grad(lambda x: (x.tanh() * x).sum())
    f(symgrad.tensor(X))
    before = stats.compiles
    for k in range(3):
        f(symgrad.tensor(X * k))
    assert stats.compiles == before


def test_pytorchs_errors(torch):
    for T in (symgrad, torch):
        F = T.func
        with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims"):
            F.grad(lambda x: x * 2)(T.tensor(X))
        with pytest.raises(RuntimeError, match="Got argnum=1, but only 1 positional inputs"):
            F.grad(lambda x: x.sum(), argnums=1)(T.tensor(X))
        with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
            F.jvp(lambda x: x.sin(), T.tensor(X), T.tensor(X))
        with pytest.raises(RuntimeError, match="Tensor is of size \\[3\\] while the given forward gradient is of size \\[2\\]"):
            F.jvp(lambda x: x.sin(), (T.tensor(X),), (T.ones(2),))
        with pytest.raises(ValueError, match="Got in_dim=1 for some input, but that input is a Tensor of dimensionality 1"):
            F.vmap(lambda x: x, in_dims=1)(T.tensor(X))
        with pytest.raises(ValueError, match="got sizes \\[3, 2\\] for the mapped dimension"):
            F.vmap(lambda x, y: x)(T.tensor(X), T.ones(2))
        with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'bias'"):
            F.functional_call(T.nn.Linear(3, 2), {"weight": T.tensor(W)}, (T.tensor(X),), strict=True)
