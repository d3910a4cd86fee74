"""torch.optim's Adamax, NAdam, RAdam and Adadelta against PyTorch: the update alone (a gradient
both compute exactly), the weights after twenty steps of a fit, the state they keep, their errors,
and a settled training loop that replays one program per step.

Adamax's update is PyTorch's bit for bit.  The others take a square root or divide by a number,
where XLA rounds differently from PyTorch's CPU kernels in the last bit (XLA multiplies by the
divisor's reciprocal; PyTorch's float32 sqrt is not the correctly rounded one): within 1e-6, as
Adam's, RMSprop's and SGD's are."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import symgrad

ROOT = Path(__file__).resolve().parents[1]

RNG = np.random.default_rng(7)
W0 = RNG.standard_normal((3, 4)).astype(np.float32)
X = RNG.standard_normal((5, 3)).astype(np.float32)
Y = RNG.standard_normal((5, 4)).astype(np.float32)
G = RNG.standard_normal((3, 4)).astype(np.float32)
G[0, 0] = 0.0  # a zero gradient: Adamax's norm is eps, Adadelta's step its eps ratio
EXACT = {"adamax", "adamax weight decay maximize"}


def same(ours, theirs, exact):
    if exact:
        np.testing.assert_array_equal(ours, theirs)
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)

OPTIMIZERS = {
    "adamax": lambda T, p: T.optim.Adamax(p, lr=0.05),
    "adamax weight decay maximize": lambda T, p: T.optim.Adamax(p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1,
                                                                maximize=True),
    "nadam": lambda T, p: T.optim.NAdam(p, lr=0.05),
    "nadam weight decay": lambda T, p: T.optim.NAdam(p, lr=0.05, weight_decay=0.1, momentum_decay=0.01),
    "nadam decoupled": lambda T, p: T.optim.NAdam(p, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True),
    "radam": lambda T, p: T.optim.RAdam(p, lr=0.05),
    "radam fast second moment": lambda T, p: T.optim.RAdam(p, lr=0.05, betas=(0.9, 0.9), weight_decay=0.05),
    "radam decoupled maximize": lambda T, p: T.optim.RAdam(p, lr=0.05, betas=(0.9, 0.8), weight_decay=0.1,
                                                           decoupled_weight_decay=True, maximize=True),
    "adadelta": lambda T, p: T.optim.Adadelta(p),
    "adadelta weight decay": lambda T, p: T.optim.Adadelta(p, lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1),
}


def fit(T, make, steps=20):
    """A linear least-squares fit, torch-style; the weights and the optimizer."""
    w, b = T.nn.Parameter(T.tensor(W0)), T.nn.Parameter(T.zeros(4))
    optimizer = make(T, [w, b])
    x, y = T.tensor(X), T.tensor(Y)
    for _ in range(steps):
        optimizer.zero_grad()
        ((x @ w + b - y) ** 2).mean().backward()
        optimizer.step()
    return w.detach().numpy(), b.detach().numpy(), optimizer


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_twenty_steps_give_pytorchs_weights(torch, name):
    ours, theirs = fit(symgrad, OPTIMIZERS[name]), fit(torch, OPTIMIZERS[name])
    for a, b in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # the forward's rounding, not the update's
    assert not np.allclose(ours[0], W0, rtol=1e-3)


def constant_gradient(T, make, steps=20):
    """The loss ``sum(w * G)``: its gradient is G exactly, for both, so the weights after each
    step show the update's own arithmetic."""
    w = T.nn.Parameter(T.tensor(W0))
    optimizer, g, seen = make(T, [w]), T.tensor(G), []
    for _ in range(steps):
        optimizer.zero_grad()
        (w * g).sum().backward()
        optimizer.step()
        seen.append(w.detach().numpy().copy())
    return seen, optimizer


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_the_update_and_state_are_pytorchs(torch, name):
    (ours, optimizer), (theirs, reference) = (constant_gradient(T, OPTIMIZERS[name]) for T in (symgrad, torch))
    for a, b in zip(ours, theirs, strict=True):
        same(a, b, name in EXACT)
    mine, expected = optimizer.state_dict(), reference.state_dict()
    assert list(mine["state"][0]) == list(expected["state"][0])
    for key, value in expected["state"][0].items():
        assert str(mine["state"][0][key].dtype) == str(value.dtype)
        exact = name in EXACT or value.dim() == 0  # the step count and NAdam's product: host numbers
        same(mine["state"][0][key].numpy(), value.numpy(), exact)
    assert mine["param_groups"] == expected["param_groups"]


def test_radam_steps_without_rectification_first(torch):
    """``rho_t`` passes 5 only at the sixth step with the default betas: before it the step is
    momentum alone; the weights match across the switch."""
    make = OPTIMIZERS["radam"]
    for steps in (5, 6, 7):
        ours, theirs = constant_gradient(symgrad, make, steps)[0], constant_gradient(torch, make, steps)[0]
        same(ours[-1], theirs[-1], False)


def test_nadams_momentum_product_written_by_hand_is_read(torch):
    """``state[p]['mu_product']`` is a float32 tensor PyTorch reads every step: set by hand or
    loaded, the next step reads it, as PyTorch's does."""
    seen = {}
    for T in (symgrad, torch):
        w = T.tensor([1.0, -2.0, 0.5], requires_grad=True)
        optimizer, seen[T] = T.optim.NAdam([w], lr=0.1), []
        for k in range(8):
            optimizer.zero_grad()
            (w * T.tensor([0.3, -1.0, 2.0])).sum().backward()
            optimizer.step()
            if k == 2:
                optimizer.state[w]["mu_product"].mul_(0.5)
            if k == 5:
                optimizer.state[w]["mu_product"] = T.tensor(0.25)
            seen[T].append((optimizer.state[w]["mu_product"].item(), w.detach().numpy().tolist()))
    assert [m for m, _ in seen[symgrad]] == [m for m, _ in seen[torch]]
    same([v for _, v in seen[symgrad]], [v for _, v in seen[torch]], False)


def test_a_loaded_nadam_resumes_as_pytorchs(torch):
    finals = []
    for T in (symgrad, torch):
        saved = constant_gradient(T, OPTIMIZERS["nadam"], 4)[1].state_dict()
        w = T.nn.Parameter(T.tensor(W0))
        optimizer = T.optim.NAdam([w], lr=0.05)
        optimizer.load_state_dict(saved)
        for _ in range(3):
            optimizer.zero_grad()
            (w * T.tensor(G)).sum().backward()
            optimizer.step()
        finals.append((w.detach().numpy(), optimizer.state[w]["mu_product"].item(), optimizer.state[w]["step"].item()))
    same(finals[0][0], finals[1][0], False)
    assert finals[0][1:] == finals[1][1:]


@pytest.mark.parametrize("name, warmup", [("adamax", 4), ("nadam", 4), ("radam", 8)])
def test_a_model_trained_with_them_runs_one_cached_program_per_step(name, warmup):
    """After its first steps, each training step is one compiled program found without walking
    the graph (test_optimizers.settled_steps), in a process of its own.  RAdam's step changes
    form at its sixth step (the rectification starts)."""
    code = ("import sys; sys.path.insert(0, 'tests'); import test_optimizers, test_optimizers_more; "
            f"test_optimizers.OPTIMIZERS[{name!r}] = test_optimizers_more.OPTIMIZERS[{name!r}]; "
            f"test_optimizers.settled_steps({name!r}, {warmup})")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_an_adadelta_loop_compiles_nothing_once_settled():
    """Adadelta's ``acc_delta`` is written after the step's parameter update and read only by the
    next step: the replayed step computes it aside (symgrad.replaying), but from compiled programs
    that are not made again."""
    import codegen.compile as programs
    model = symgrad.nn.Sequential(symgrad.nn.Linear(3, 8), symgrad.nn.ReLU(), symgrad.nn.Linear(8, 4))
    optimizer = OPTIMIZERS["adadelta weight decay"](symgrad, model.parameters())
    x, labels = symgrad.tensor(X), symgrad.tensor(np.arange(5) % 4)
    counts = []
    for _ in range(16):
        optimizer.zero_grad()
        symgrad.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()
        counts.append(programs.stats.compiles)
    assert counts[-1] == counts[5]
    assert np.all(np.isfinite(model[0].weight.detach().numpy()))


@pytest.mark.parametrize("call", [
    lambda T, p: T.optim.Adamax([p], lr=-1), lambda T, p: T.optim.Adamax([p], betas=(0.9, 1.0)),
    lambda T, p: T.optim.NAdam([p], eps=-1), lambda T, p: T.optim.NAdam([p], momentum_decay=-0.1),
    lambda T, p: T.optim.RAdam([p], betas=(-0.1, 0.9)), lambda T, p: T.optim.RAdam([p], weight_decay=-1),
    lambda T, p: T.optim.Adadelta([p], rho=1.5), lambda T, p: T.optim.Adadelta([p], eps=-1),
    lambda T, p: T.optim.Adadelta([p], lr=-0.5),
], ids=["adamax lr", "adamax beta", "nadam eps", "nadam momentum_decay", "radam beta", "radam weight_decay",
        "adadelta rho", "adadelta eps", "adadelta lr"])
def test_pytorchs_errors(torch, call):
    seen = []
    for T in (symgrad, torch):
        p = T.nn.Parameter(T.ones(2))
        with pytest.raises(ValueError) as error:
            call(T, p)
        seen.append(str(error.value))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("name", ["nadam", "radam"])
def test_a_one_cycle_schedule_cycles_their_first_beta(torch, name):
    """A scheduler cycling ``betas[0]`` (OneCycleLR): the update reads the changed beta each step."""
    finals = []
    for T in (symgrad, torch):
        w = T.nn.Parameter(T.tensor(W0))
        optimizer = OPTIMIZERS[name](T, [w])
        scheduler = T.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, total_steps=10)
        for _ in range(10):
            optimizer.zero_grad()
            (w * T.tensor(G)).sum().backward()
            optimizer.step()
            scheduler.step()
        finals.append(w.detach().numpy())
    same(finals[0], finals[1], False)
