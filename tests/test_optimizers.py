"""torch.optim's Adam, AdamW, RMSprop, Adagrad and the lr schedulers against PyTorch: the same
model, data and steps, the weights after each run, the lr sequence, state_dict and errors."""
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import codegen.compile as programs
import symgrad

ROOT = Path(__file__).resolve().parents[1]

RNG = np.random.default_rng(0)
W0 = RNG.standard_normal((3, 4)).astype(np.float32)
X = RNG.standard_normal((5, 3)).astype(np.float32)
Y = RNG.standard_normal((5, 4)).astype(np.float32)

OPTIMIZERS = {
    "adam": lambda T, p: T.optim.Adam(p, lr=0.05),
    "adam weight decay amsgrad": lambda T, p: T.optim.Adam(p, lr=0.05, weight_decay=0.1, amsgrad=True),
    "adamw": lambda T, p: T.optim.AdamW(p, lr=0.05),
    "adam maximize": lambda T, p: T.optim.Adam(p, lr=0.05, maximize=True),
    "rmsprop": lambda T, p: T.optim.RMSprop(p, lr=0.01),
    "rmsprop centered momentum": lambda T, p: T.optim.RMSprop(p, lr=0.01, centered=True, momentum=0.9,
                                                              weight_decay=0.01),
    "adagrad": lambda T, p: T.optim.Adagrad(p, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
    "sgd nesterov": lambda T, p: T.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
}
SCHEDULERS = {
    "step": lambda T, o: T.optim.lr_scheduler.StepLR(o, 3, 0.5),
    "multistep": lambda T, o: T.optim.lr_scheduler.MultiStepLR(o, [2, 5, 5, 11], 0.5),
    "exponential": lambda T, o: T.optim.lr_scheduler.ExponentialLR(o, 0.9),
    "cosine": lambda T, o: T.optim.lr_scheduler.CosineAnnealingLR(o, 5, 0.001),
    "lambda": lambda T, o: T.optim.lr_scheduler.LambdaLR(o, lambda epoch: 0.95 ** epoch),
}


def train(T, make, steps=20, schedule=None):
    """A linear least-squares fit, torch-style; the weights, the lr after each step, the optimizer."""
    w, b = T.nn.Parameter(T.tensor(W0)), T.nn.Parameter(T.zeros(4))
    optimizer = make(T, [w, b])
    scheduler = schedule(T, optimizer) if schedule else None
    x, y = T.tensor(X), T.tensor(Y)
    rates = []
    for _ in range(steps):
        optimizer.zero_grad()
        ((x @ w + b - y) ** 2).mean().backward()
        optimizer.step()
        if scheduler:
            scheduler.step()
        rates.append(optimizer.param_groups[0]["lr"])
    return w.detach().numpy(), b.detach().numpy(), rates, optimizer


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_twenty_steps_give_pytorchs_weights(torch, name):
    ours, theirs = train(symgrad, OPTIMIZERS[name]), train(torch, OPTIMIZERS[name])
    for a, b in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)  # the forward's rounding, not the update's
    assert not np.allclose(ours[0], W0)


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_schedulers_give_pytorchs_lr_sequence_exactly(torch, name):
    ours, theirs = (train(T, OPTIMIZERS["adam"], 12, SCHEDULERS[name]) for T in (symgrad, torch))
    assert ours[2] == theirs[2]
    np.testing.assert_allclose(ours[0], theirs[0], rtol=2e-6, atol=2e-6)


def test_state_dict_has_pytorchs_layout_and_round_trips(torch):
    ours, theirs = train(symgrad, OPTIMIZERS["adam"], 3)[3], train(torch, OPTIMIZERS["adam"], 3)[3]
    mine, reference = ours.state_dict(), theirs.state_dict()
    assert list(mine["state"]) == list(reference["state"]) == [0, 1]
    assert list(mine["state"][0]) == list(reference["state"][0]) == ["step", "exp_avg", "exp_avg_sq"]
    assert mine["state"][0]["step"].item() == reference["state"][0]["step"].item() == 3.0
    for key in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_allclose(mine["state"][0][key].numpy(), reference["state"][0][key].numpy(), rtol=1e-5)
    assert {k: v for k, v in mine["param_groups"][0].items()} == reference["param_groups"][0]

    w = symgrad.nn.Parameter(symgrad.tensor(W0))
    b = symgrad.nn.Parameter(symgrad.zeros(4))
    resumed = symgrad.optim.Adam([w, b], lr=0.05)
    resumed.load_state_dict(mine)
    assert resumed.state[w]["step"].item() == 3.0
    np.testing.assert_array_equal(resumed.state[w]["exp_avg"].numpy(), mine["state"][0]["exp_avg"].numpy())


@pytest.mark.parametrize("name", ["sgd_momentum", "adam"])
def test_a_loaded_state_is_the_dicts_own_tensors(torch, name):
    """PyTorch keeps the tensors a state dict holds (same dtype: not copied), so later steps update
    the dict's tensors too and loading it again resumes from where they went (was: copied on load,
    and the second load went back to the first)."""
    import copy

    def run(T):
        w = T.tensor(np.array([1.0, -2.0, 3.0], np.float32), requires_grad=True)
        optimizer = (T.optim.SGD([w], lr=0.1, momentum=0.9) if name == "sgd_momentum"
                     else T.optim.Adam([w], lr=0.1))
        seen = []
        for step in range(12):
            optimizer.zero_grad()
            (w ** 2).sum().backward()
            optimizer.step()
            if step == 2:
                saved = copy.deepcopy(optimizer.state_dict())
            if step in (4, 8):
                optimizer.load_state_dict(saved)
                seen.append(all(v is saved["state"][0][k] for k, v in optimizer.state[w].items()))
            seen.append(w.detach().numpy().copy())
        return seen

    ours, theirs = run(symgrad), run(torch)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)
    assert ours[4] is True and ours[9] is True


def test_an_adam_loop_compiles_once_its_steps_settle():
    w = symgrad.nn.Parameter(symgrad.tensor(W0))
    optimizer = symgrad.optim.Adam([w], lr=0.01)
    x, y = symgrad.tensor(X), symgrad.tensor(Y)
    counts = []
    for _ in range(12):
        optimizer.zero_grad()
        ((x @ w - y) ** 2).mean().backward()
        optimizer.step()
        counts.append(programs.stats.compiles)
    assert counts[-1] == counts[4]  # the bias corrections change every step: taken as inputs


def test_a_step_count_written_by_hand_is_the_one_counted_on(torch):
    """``state[p]['step'].add_(10)``, or a new tensor put in its place: the next step counts on from
    it, as PyTorch's (the bias corrections read it)."""
    seen = {}
    for T in (symgrad, torch):
        w = T.tensor([1.0, 2.0], requires_grad=True)
        optimizer, seen[T] = T.optim.Adam([w], lr=0.1), []
        for k in range(8):
            optimizer.zero_grad()
            (w ** 2).sum().backward()
            optimizer.step()
            if k == 2:
                optimizer.state[w]["step"].add_(10)
            if k == 5:
                optimizer.state[w]["step"] = T.tensor(100.0)
            seen[T].append((optimizer.state[w]["step"].item(), w.detach().numpy().tolist()))
    assert [s for s, _ in seen[symgrad]] == [s for s, _ in seen[torch]] == [1.0, 2.0, 13.0, 14.0, 15.0, 100.0,
                                                                              101.0, 102.0]
    np.testing.assert_allclose([v for _, v in seen[symgrad]], [v for _, v in seen[torch]], rtol=1e-6)


def test_the_step_count_is_pytorchs_and_leaves_the_shared_constants_alone(torch, monkeypatch):
    """``state[p]['step']`` counts every step as PyTorch's does (read mid-loop too), without a
    constant node per count: those filled the constants' shared cache (4,096 entries) after as
    many steps, and every constant made after that was new."""
    from symgrad import nodes
    monkeypatch.setattr(nodes, "_constants", {})  # this test's own, whatever earlier tests filled
    counts = {}
    for T in (symgrad, torch):
        w = T.nn.Parameter(T.tensor(W0))
        optimizer, x, y = T.optim.Adam([w], lr=0.01), T.tensor(X), T.tensor(Y)
        counts[T] = []
        for k in range(60):
            optimizer.zero_grad()
            ((x @ w - y) ** 2).mean().backward()
            optimizer.step()
            if k % 20 == 0:
                counts[T].append(optimizer.state[w]["step"].item())
            if T is symgrad and k == 10:
                shared = len(nodes._constants)
        counts[T].append(optimizer.state_dict()["state"][0]["step"].item())
    assert counts[symgrad] == counts[torch] == [1.0, 21.0, 41.0, 60.0]
    assert len(nodes._constants) == shared


@pytest.mark.parametrize("name", ["adam", "adam weight decay amsgrad", "adamw", "rmsprop centered momentum"])
def test_a_model_trained_with_adam_runs_one_cached_program_per_step(name):
    """W6's loop in small (nn.Sequential, cross_entropy, an optimizer): after its first steps,
    each step is one compiled program found without walking the graph, and nothing compiles,
    builds SymPy or runs a program of its own for a step count or a bias correction.  Run in a
    process of its own, as a user's loop runs: what earlier tests left in the caches is not its."""
    code = f"import sys; sys.path.insert(0, 'tests'); import test_optimizers; test_optimizers.settled_steps({name!r})"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def settled_steps(name, warmup=4):
    """The loop of the test above, with walking and building forbidden after ``warmup`` steps."""
    import symgrad.engine as engine
    import symgrad.nodes as nodes
    import symgrad.tracing as tracing
    from symgrad.ir import Program

    model = symgrad.nn.Sequential(symgrad.nn.Linear(3, 8), symgrad.nn.ReLU(), symgrad.nn.Linear(8, 4))
    optimizer = OPTIMIZERS[name](symgrad, model.parameters())
    x, labels = symgrad.tensor(X), symgrad.tensor(np.arange(5) % 4)

    def step():
        optimizer.zero_grad()
        symgrad.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    compiles, runs = programs.stats.compiles, nodes._programs_run

    def forbidden(*args, **kwargs):
        raise AssertionError("a settled training step must not walk its graph or build a Program")

    kept = engine.Walk, Program.__init__
    engine.Walk = tracing.Walk = Program.__init__ = forbidden
    for _ in range(30):
        step()
    assert programs.stats.compiles == compiles
    assert nodes._programs_run == runs + 30
    engine.Walk = tracing.Walk = kept[0]
    Program.__init__ = kept[1]
    assert np.all(np.isfinite(model[0].weight.detach().numpy()))


@pytest.mark.parametrize("call", [
    lambda T, p: T.optim.Adam([], lr=0.1), lambda T, p: T.optim.Adam([p * 2]), lambda T, p: T.optim.Adam(p),
    lambda T, p: T.optim.Adam([{"params": [p]}, {"params": [p]}]), lambda T, p: T.optim.Adam([p], lr=-1),
    lambda T, p: T.optim.Adam([p], betas=(1.0, 0.9)), lambda T, p: T.optim.RMSprop([p], alpha=-0.5),
    lambda T, p: T.optim.Adagrad([p], lr_decay=-1), lambda T, p: T.optim.SGD([p], lr=0.1, momentum=-1),
], ids=["empty", "non-leaf", "a tensor", "twice", "lr", "beta", "alpha", "lr_decay", "momentum"])
def test_pytorchs_errors(torch, call):
    messages = []
    for T in (symgrad, torch):
        p = T.nn.Parameter(T.ones(2))
        with pytest.raises((ValueError, TypeError)) as error:
            call(T, p)
        messages.append((error.type, str(error.value).split(",")[0].replace("torch.FloatTensor", "Parameter")))
    assert messages[0][0] is messages[1][0]
    assert messages[0][1] == messages[1][1]


def test_a_parameter_twice_in_a_group_warns(torch):
    for T in (symgrad, torch):
        p = T.nn.Parameter(T.ones(2))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            T.optim.SGD([p, p], lr=0.1)
        assert any("duplicate parameters" in str(w.message) for w in caught)
