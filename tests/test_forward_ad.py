"""torch.autograd.forward_ad against PyTorch on the same inputs: tangents of elementwise chains,
matmul, reductions, broadcasting, an MLP with respect to its input and to its parameters, two duals
and a plain input mixed in; what is dual and what is not; PyTorch's errors; backward alongside."""
import numpy as np
import pytest

import symgrad

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 3)).astype(np.float32)
T1 = RNG.standard_normal((4, 3)).astype(np.float32)
Y = RNG.standard_normal((4, 3)).astype(np.float32)
T2 = RNG.standard_normal((4, 3)).astype(np.float32)
W = RNG.standard_normal((3, 2)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)


def close(ours, theirs, rtol=1e-5, atol=1e-6):
    ours = None if ours is None else ours.detach().numpy()
    theirs = None if theirs is None else theirs.detach().numpy()
    assert (ours is None) == (theirs is None)
    if ours is not None:
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


def tangents_of_ops(T):
    """Tangents of one dual through several kinds of op, and of two duals with a plain input."""
    fw = T.autograd.forward_ad
    with fw.dual_level():
        x = fw.make_dual(T.tensor(X), T.tensor(T1))
        y = fw.make_dual(T.tensor(Y), T.tensor(T2))
        plain = T.tensor(W)
        bias = T.tensor(B)
        outs = [x.sin() * x.exp() / (1 + x ** 2),  # elementwise chain
                (x @ plain).sum(0) + x.mean(),  # matmul with a plain matrix, reductions
                (x * x).sum(1, keepdim=True).sqrt() * bias - x.amax(1, keepdim=True),  # broadcasting
                T.tanh(x * y) + y ** 2 - x @ y.T @ x,  # two duals
                T.softmax(x, 1) + T.nn.functional.relu(x - y).pow(3).mean() * plain.sum()]  # and a plain input
        return [fw.unpack_dual(o).tangent for o in outs] + [fw.unpack_dual(o).primal for o in outs]


def test_tangents_of_ops_are_pytorchs(torch):
    for ours, theirs in zip(tangents_of_ops(symgrad), tangents_of_ops(torch)):
        close(ours, theirs)


def mlp_tangents(T):
    """An MLP's tangent along its input, along its parameters (functional_call, and the tutorial's
    attributes swapped for duals), and the usual gradients of a backward on the same output."""
    fw, nn = T.autograd.forward_ad, T.nn
    T.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
    inp = T.tensor(X)
    params = dict(model.named_parameters())
    directions = {name: T.rand_like(p) for name, p in params.items()}
    results = []
    with fw.dual_level():
        out = model(fw.make_dual(inp, T.tensor(T1)))
        results.append(fw.unpack_dual(out).tangent)
        duals = {name: fw.make_dual(p, directions[name]) for name, p in params.items()}
        out = T.func.functional_call(model, duals, (inp,))
        results.append(fw.unpack_dual(out).tangent)
        out.pow(2).sum().backward()  # backward alongside: the parameters' usual gradients
        results += [p.grad for p in model.parameters()]
        layer = model[0]
        for name in ("weight", "bias"):
            p = getattr(layer, name)
            delattr(layer, name)
            setattr(layer, name, fw.make_dual(p.detach(), directions["0." + name]))
        results.append(fw.unpack_dual(layer(inp)).tangent)
    return results


def test_mlp_along_input_and_parameters(torch):
    for ours, theirs in zip(mlp_tangents(symgrad), mlp_tangents(torch)):
        close(ours, theirs)


def duality(T):
    """What is dual and what is not, inside the level and after it."""
    fw = T.autograd.forward_ad
    primal, tangent = T.tensor(X), T.tensor(T1)
    seen = {}
    with fw.dual_level() as level:
        seen["level"] = level
        dual = fw.make_dual(primal, tangent)
        unpacked = fw.unpack_dual(dual)
        seen["namedtuple"] = (type(unpacked).__name__, unpacked._fields, isinstance(unpacked, tuple))
        seen["as is"] = unpacked.tangent is tangent
        seen["copied"] = fw.unpack_dual(fw.make_dual(primal, T.tensor(T1.T.copy()).T)).tangent is T1
        seen["views"] = (dual._base is primal, unpacked.primal._base is primal)
        seen["primal not dual"] = fw.unpack_dual(unpacked.primal).tangent is None
        seen["plain"] = fw.unpack_dual(primal).tangent is None
        out = (dual * 3).exp()
        seen["no history"] = (dual.requires_grad, dual.grad_fn, out.requires_grad, out.grad_fn)
        seen["same tangent"] = fw.unpack_dual(out).tangent is fw.unpack_dual(out).tangent
        seen["detached"] = fw.unpack_dual(out.detach()).tangent is None
        seen["not differentiable"] = (fw.unpack_dual(dual > 0).tangent, fw.unpack_dual(dual.argmax()).tangent,
                                      fw.unpack_dual(T.zeros_like(dual)).tangent)
        with T.no_grad():
            under_no_grad = fw.unpack_dual(dual.sin()).tangent
        zero = fw.unpack_dual(dual.floor()).tangent
    seen["after"] = (fw.unpack_dual(out).tangent, fw.unpack_dual(out).primal is out)
    seen["entered"] = fw.enter_dual_level()
    seen["fresh level"] = fw.unpack_dual(out).tangent is None
    fw.exit_dual_level()
    return seen, [under_no_grad, zero]


def test_what_is_dual(torch):
    ours, theirs = duality(symgrad), duality(torch)
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1], theirs[1]):
        close(a, b)


@pytest.mark.parametrize("lib", ["symgrad", "torch"])
def test_dual_level_decorates(lib, torch):
    T = symgrad if lib == "symgrad" else torch
    fw = T.autograd.forward_ad

    @fw.dual_level()
    def tangent_of_square(x, t):
        return fw.unpack_dual(fw.make_dual(x, t) ** 2).tangent

    assert tangent_of_square(T.tensor([3.0]), T.tensor([1.0])).tolist() == [6.0]
    assert fw.unpack_dual(T.tensor([1.0])).tangent is None


def errors(T):
    """(class, message) of each misuse."""
    fw = T.autograd.forward_ad
    x, t = T.tensor(X), T.tensor(T1)
    found = []

    def caught(call):
        try:
            call()
        except Exception as error:  # noqa: BLE001 -- the class is what is compared
            found.append((type(error).__name__, str(error)))
        else:
            found.append(None)

    caught(lambda: fw.make_dual(x, t))
    caught(fw.exit_dual_level)
    with fw.dual_level():
        caught(lambda: fw.make_dual(x, T.ones(3)))
        caught(lambda: fw.make_dual(T.arange(3), T.ones(3)))
        caught(lambda: fw.make_dual(x, T.ones(4, 3, dtype=T.int64)))
        caught(lambda: fw.make_dual(fw.make_dual(x, t), t))
        caught(fw.enter_dual_level)
        caught(lambda: fw.exit_dual_level(level=3))
    return found


def test_errors_are_pytorchs(torch):
    assert errors(symgrad) == errors(torch)


def backward_alongside(T):
    """A dual input that also requires grad: ``backward`` gives the usual ``.grad``, and the tangent,
    which depends on a parameter, is itself differentiable."""
    fw = T.autograd.forward_ad
    x = T.tensor(X, requires_grad=True)
    w = T.tensor(W, requires_grad=True)
    with fw.dual_level():
        dual = fw.make_dual(x, T.tensor(T1))
        out = (dual @ w).tanh() * (w.sum() * 2)
        out.sum().backward(retain_graph=True)  # (PyTorch's tangent needs the values it saved)
        grads = [x.grad.clone(), w.grad.clone()]
        tangent = fw.unpack_dual(out).tangent  # symgrad derives it after the backward
        w.grad = None
        tangent.pow(2).sum().backward()
        flags = (dual.requires_grad, type(dual.grad_fn).__name__, tangent.requires_grad)
    return flags, grads + [tangent, w.grad]


def test_backward_alongside(torch):
    (ours_flags, ours), (theirs_flags, theirs) = backward_alongside(symgrad), backward_alongside(torch)
    assert ours_flags == theirs_flags
    for a, b in zip(ours, theirs):
        close(a, b, rtol=1e-5, atol=1e-5)


def training_loop(T):
    """Tangents of a loss in a torch-style loop that symgrad replays (symgrad.cycles): a dual made
    at every step, then plain steps, then a dual again where a plain input was."""
    fw = T.autograd.forward_ad
    T.manual_seed(0)
    model = T.nn.Linear(3, 2)
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    x, direction = T.tensor(X), T.tensor(T1)
    tangents = []
    with fw.dual_level():
        for step in range(14):
            inp = fw.make_dual(x.clone(), direction) if step < 3 or step == 12 else x.clone()
            loss = (model(inp) ** 2).mean()
            tangents.append(fw.unpack_dual(loss).tangent)
            loss.backward()
            opt.step()
            opt.zero_grad()
    return tangents + [p.detach() for p in model.parameters()]


def test_training_loop(torch):
    for ours, theirs in zip(training_loop(symgrad), training_loop(torch)):
        close(ours, theirs)
