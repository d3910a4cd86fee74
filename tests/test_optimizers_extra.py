"""torch.optim's LBFGS, Rprop, ASGD and Adafactor against PyTorch: the weights after every step of
a fit (alternating two losses, so the gradient's sign flips for Rprop), the state they keep and
save, a resumed optimizer, their errors.

The updates are PyTorch's op for op; the forward and backward of the loss round in their last bit
as XLA rounds them, so the weights agree to float32 rounding (1e-6), not bit for bit.  LBFGS's
line search does its scalar arithmetic as PyTorch's 0-d tensors do: its trial steps on the
Rosenbrock function are PyTorch's until the loss's own rounding differs."""
import numpy as np
import pytest

import symgrad

RNG = np.random.default_rng(7)
W0 = RNG.standard_normal((3, 4)).astype(np.float32)
G = RNG.standard_normal((3, 4)).astype(np.float32)
X = RNG.standard_normal((5, 3)).astype(np.float32)
Y = RNG.standard_normal((5, 4)).astype(np.float32)

OPTIMIZERS = {
    "rprop": lambda T, p: T.optim.Rprop(p),
    "rprop options": lambda T, p: T.optim.Rprop(p, lr=0.05, etas=(0.3, 1.7), step_sizes=(1e-3, 0.2), maximize=True),
    "asgd": lambda T, p: T.optim.ASGD(p),
    "asgd averaging": lambda T, p: T.optim.ASGD(p, lr=0.05, lambd=1e-2, alpha=0.5, t0=3, weight_decay=0.1),
    "adafactor": lambda T, p: T.optim.Adafactor(p),
    "adafactor options": lambda T, p: T.optim.Adafactor(p, lr=0.05, beta2_decay=-0.5, eps=(1e-3, 1e-2), d=1.5,
                                                        weight_decay=0.1, maximize=True),
}


def fit(T, make, steps=6, saved=None):
    """A matrix and a vector fitted with two alternating losses; the weights after each step."""
    w, b = T.nn.Parameter(T.tensor(W0)), T.nn.Parameter(T.zeros(4))
    optimizer, x, y, g, seen = make(T, [w, b]), T.tensor(X), T.tensor(Y), T.tensor(G), []
    if saved is not None:
        optimizer.load_state_dict(saved)
    for k in range(steps):
        optimizer.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean() if k % 2 else (w * g).sum() + 0.5 * b.sum()
        loss.backward()
        optimizer.step()
        seen.append(np.concatenate([w.detach().numpy().ravel(), b.detach().numpy()]))
    return seen, optimizer


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_steps_state_and_resuming_are_pytorchs(torch, name):
    (ours, optimizer), (theirs, reference) = (fit(T, OPTIMIZERS[name]) for T in (symgrad, torch))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    assert not np.allclose(ours[-1], ours[0])
    mine, expected = optimizer.state_dict(), reference.state_dict()
    assert mine["param_groups"] == expected["param_groups"]
    for index, state in expected["state"].items():
        assert list(mine["state"][index]) == list(state)
        for key, value in state.items():
            assert str(mine["state"][index][key].dtype) == str(value.dtype)
            np.testing.assert_allclose(mine["state"][index][key].numpy(), value.numpy(), rtol=1e-6, atol=1e-6)
    resumed = [fit(T, OPTIMIZERS[name], 2, saved)[0] for T, saved in ((symgrad, mine), (torch, expected))]
    np.testing.assert_allclose(resumed[0], resumed[1], rtol=1e-6, atol=1e-6)


def test_asgd_reads_its_eta_set_by_hand(torch):
    """``eta`` and ``mu`` are state tensors PyTorch reads back every step."""
    seen = []
    for T in (symgrad, torch):
        w = T.nn.Parameter(T.tensor([1.0, -2.0, 0.5]))
        optimizer = T.optim.ASGD([w], lr=0.1, t0=1)
        for k in range(4):
            optimizer.zero_grad()
            (w * T.tensor([0.3, -1.0, 2.0])).sum().backward()
            optimizer.step()
            if k == 1:
                optimizer.state[w]["eta"].mul_(0.5)
        seen.append(w.detach().numpy())
    np.testing.assert_allclose(seen[0], seen[1], rtol=1e-6, atol=1e-7)


def lbfgs_fit(T, steps=2, **options):
    w, b = T.nn.Parameter(T.tensor(W0)), T.nn.Parameter(T.zeros(4))
    optimizer, x, y = T.optim.LBFGS([w, b], **options), T.tensor(X), T.tensor(Y)

    def closure():
        optimizer.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean() + 0.01 * (w ** 4).sum()
        loss.backward()
        return loss

    losses = [optimizer.step(closure).item() for _ in range(steps)]
    return np.concatenate([w.detach().numpy().ravel(), b.detach().numpy()]), losses, optimizer


@pytest.mark.parametrize("options", [dict(line_search_fn="strong_wolfe", max_iter=8),
                                     dict(lr=0.5, max_iter=6, history_size=2)], ids=["strong wolfe", "short history"])
def test_lbfgs_steps_and_state_are_pytorchs(torch, options):
    """Sixteen iterations amplify the loss's last-bit rounding to a few float32 ulps of the weights.
    The last direction ``d`` is a difference of nearly equal gradients: on a host where PyTorch's
    float32 exp rounds differently (test_parity_extra's log of exp) its small entries move by ~1e-6
    at a scale of 5e-4, so it is compared at 1% of its scale."""
    (ours, losses, optimizer), (theirs, expected, reference) = (lbfgs_fit(T, **options) for T in (symgrad, torch))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    mine, saved = optimizer.state_dict()["state"][0], reference.state_dict()["state"][0]
    assert list(mine) == list(saved)
    assert (mine["func_evals"], mine["n_iter"], len(mine["old_dirs"])) == \
        (saved["func_evals"], saved["n_iter"], len(saved["old_dirs"]))
    np.testing.assert_allclose(float(mine["t"]), float(saved["t"]), rtol=1e-6)
    direction = saved["d"].numpy()
    np.testing.assert_allclose(mine["d"].numpy(), direction, rtol=1e-5, atol=1e-2 * np.abs(direction).max())


def rosenbrock_trials(T, dtype="float32", **options):
    """The points at which LBFGS evaluates the Rosenbrock function in its first step."""
    xy = T.nn.Parameter(T.tensor([-1.5, 2.0], dtype=getattr(T, dtype)))
    optimizer, points = T.optim.LBFGS([xy], **options), []

    def closure():
        optimizer.zero_grad()
        loss = (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2
        loss.backward()
        points.append(xy.detach().numpy().copy())
        return loss

    optimizer.step(closure)
    return np.array(points), optimizer.state[xy]["func_evals"]


def test_strong_wolfe_zooms_as_pytorchs(torch):
    """The first step's line search brackets, then interpolates: its trial points are PyTorch's,
    bit for bit until the losses' rounding differs, then to float32 rounding."""
    (ours, evals), (theirs, expected) = (rosenbrock_trials(T, line_search_fn="strong_wolfe", max_iter=3,
                                                                           max_eval=8)
                                         for T in (symgrad, torch))
    assert evals == expected and evals > 3
    np.testing.assert_array_equal(ours[:3], theirs[:3])
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


def test_line_search_arithmetic_rounds_as_pytorchs(torch):
    """The line search's scalar arithmetic on float32 numbers rounds as PyTorch's on 0-d tensors:
    its ``number / tensor`` is the reciprocal times the number, bit for bit; the interpolated step
    to float32 rounding (PyTorch's float32 ``sqrt`` is not the correctly rounded one, and the
    interpolation subtracts close numbers after it)."""
    from torch.optim.lbfgs import _cubic_interpolate

    from symgrad.optim.strong_wolfe import _quotient, cubic_minimum
    rng = np.random.default_rng(5)
    numbers, values = rng.standard_normal(500) * 10, rng.standard_normal(500).astype(np.float32)
    quotients = [_quotient(float(n), v) for n, v in zip(numbers, values)]
    expected = [(float(n) / torch.tensor(v)).item() for n, v in zip(numbers, values)]
    np.testing.assert_array_equal(np.array(quotients, np.float32), np.array(expected, np.float32))
    for _ in range(100):
        t, g1, g2 = rng.standard_normal(3).astype(np.float32) * np.float32(3)
        f1, f2 = (float(v) for v in rng.standard_normal(2) * 10)
        bounds = (t * np.float32(0.5), t * np.float32(4)) if t > 0 else None
        ours = cubic_minimum(0, f1, g1, t, f2, g2, bounds)
        theirs = _cubic_interpolate(0, f1, torch.tensor(g1), torch.tensor(t), f2, torch.tensor(g2),
                                    None if bounds is None else tuple(torch.tensor(b) for b in bounds))
        np.testing.assert_allclose(np.float32(ours), np.float32(theirs), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("options", [dict(max_iter=10), dict(lr=0.01, max_iter=4)], ids=["zooming", "growing"])
def test_lbfgs_in_float64_is_pytorchs_to_its_rounding(torch, options):
    """Iterations of the chaotic Rosenbrock descent in float64: the same trial points to 1e-12,
    every branch of the search (a step too long zooms in, a step too short grows) and of the
    recursion taken as PyTorch's."""
    (ours, evals), (theirs, expected) = (rosenbrock_trials(T, "float64", line_search_fn="strong_wolfe", **options)
                                         for T in (symgrad, torch))
    assert evals == expected == len(ours)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def backward(loss):
    loss.backward()
    return loss


@pytest.mark.parametrize("call, error", [
    (lambda T, p: T.optim.LBFGS([p], lr=-1.0), ValueError),
    (lambda T, p: T.optim.LBFGS([p], lr=T.tensor([0.1, 0.2])), ValueError),
    (lambda T, p: T.optim.LBFGS([{"params": [p]}, {"params": [T.nn.Parameter(T.ones(1))]}]), ValueError),
    (lambda T, p: T.optim.LBFGS([p], line_search_fn="backtracking").step(lambda: backward((p * p).sum())),
     RuntimeError),
    (lambda T, p: T.optim.Rprop([p], etas=(1.5, 2.0)), ValueError),
    (lambda T, p: T.optim.Rprop([p], lr=-0.1), ValueError),
    (lambda T, p: T.optim.ASGD([p], weight_decay=-1), ValueError),
    (lambda T, p: T.optim.Adafactor([p], beta2_decay=0.5), ValueError),
    (lambda T, p: T.optim.Adafactor([p], eps=(-1.0, 1e-3)), ValueError),
    (lambda T, p: T.optim.Adafactor([p], d=0.5), ValueError),
    (lambda T, p: T.optim.Adafactor([p], lr=-1), ValueError),
], ids=["lbfgs lr", "lbfgs tensor lr", "lbfgs groups", "lbfgs line search", "rprop etas", "rprop lr",
        "asgd weight_decay", "adafactor beta2_decay", "adafactor eps", "adafactor d", "adafactor lr"])
def test_pytorchs_errors(torch, call, error):
    seen = []
    for T in (symgrad, torch):
        p = T.nn.Parameter(T.ones(2))
        with pytest.raises(error) as caught:
            call(T, p)
        seen.append(str(caught.value))
    assert seen[0] == seen[1]


def test_defaults_are_pytorchs(torch):
    for name in ("LBFGS", "Rprop", "ASGD", "Adafactor"):
        made = [getattr(T.optim, name)([T.nn.Parameter(T.ones(2))]) for T in (symgrad, torch)]
        assert made[0].defaults == made[1].defaults, name
        assert repr(made[0]) == repr(made[1])
