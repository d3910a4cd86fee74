"""torch.optim.lr_scheduler against PyTorch: on the same optimizer setup (two parameter groups),
every scheduler gives PyTorch's rates bit for bit (``==`` on the floats), with the momentum or
Adam's first beta where a schedule cycles it, and its state_dict keys, warnings and errors; a
training loop stepped by a scheduler gives PyTorch's weights."""
import math
import warnings

import numpy as np
import pytest

import symgrad

RNG = np.random.default_rng(3)
W0 = RNG.standard_normal((3, 4)).astype(np.float32)
X = RNG.standard_normal((6, 3)).astype(np.float32)
Y = RNG.standard_normal((6, 4)).astype(np.float32)
# a loss that falls, stalls, wobbles and rises: plateaus of every length
METRICS = [1.0, 0.9, 0.8, 0.8, 0.8, 0.79995, 0.8, 0.81, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.69, 0.7, 0.75, 0.8, 0.85,
           0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.59, 0.5999, 0.6, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4,
           0.4]


def sgd(T, params):
    return T.optim.SGD(params, lr=0.1, momentum=0.9)


def adam(T, params):
    return T.optim.Adam(params, lr=0.01, betas=(0.9, 0.99))


def make_optimizer(T, kind=sgd):
    """Two groups with different rates, so per-group lists and per-group arithmetic both show."""
    a, b = T.nn.Parameter(T.ones(2)), T.nn.Parameter(T.ones(3))
    return kind(T, [{"params": [a]}, {"params": [b], "lr": 0.03}])


SCHEDULES = {  # name: (optimizer, make the scheduler, steps)
    "linear": (sgd, lambda L, o: L.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=7), 30),
    "linear default": (sgd, lambda L, o: L.LinearLR(o), 12),
    "constant": (sgd, lambda L, o: L.ConstantLR(o, factor=0.3, total_iters=6), 30),
    "multiplicative": (sgd, lambda L, o: L.MultiplicativeLR(o, [lambda e: 0.95, lambda e: 1 - e / 100]), 40),
    "polynomial": (sgd, lambda L, o: L.PolynomialLR(o, total_iters=13, power=0.9), 30),
    "polynomial squared": (sgd, lambda L, o: L.PolynomialLR(o, total_iters=20, power=2.0), 30),
    "exponential": (sgd, lambda L, o: L.ExponentialLR(o, 0.93), 40),
    "cosine": (sgd, lambda L, o: L.CosineAnnealingLR(o, 7, 0.001), 50),
    "warm restarts": (sgd, lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=5, eta_min=0.001), 40),
    "warm restarts growing": (sgd, lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2), 60),
    "cyclic triangular": (sgd, lambda L, o: L.CyclicLR(o, 0.01, [0.1, 0.2], step_size_up=4), 40),
    "cyclic triangular2": (sgd, lambda L, o: L.CyclicLR(o, [0.001, 0.002], 0.1, step_size_up=3, step_size_down=5,
                                                        mode="triangular2"), 50),
    "cyclic exp_range": (sgd, lambda L, o: L.CyclicLR(o, 0.01, 0.1, 5, mode="exp_range", gamma=0.97,
                                                      base_momentum=0.7, max_momentum=[0.95, 0.9]), 50),
    "cyclic scale_fn": (sgd, lambda L, o: L.CyclicLR(o, 0.01, 0.1, 4, scale_fn=lambda x: 1 / (1.0 + x),
                                                     scale_mode="iterations", cycle_momentum=False), 30),
    "cyclic adam": (adam, lambda L, o: L.CyclicLR(o, 0.001, 0.01, step_size_up=6), 40),
    "one cycle": (sgd, lambda L, o: L.OneCycleLR(o, [0.5, 0.2], total_steps=60), 60),
    "one cycle linear": (sgd, lambda L, o: L.OneCycleLR(o, 0.4, epochs=5, steps_per_epoch=9, anneal_strategy="linear",
                                                        div_factor=10.0, final_div_factor=100.0), 45),
    "one cycle three phase": (sgd, lambda L, o: L.OneCycleLR(o, 0.3, total_steps=50, pct_start=0.25,
                                                             three_phase=True), 50),
    "one cycle adam": (adam, lambda L, o: L.OneCycleLR(o, 0.01, total_steps=40, base_momentum=0.8,
                                                       max_momentum=[0.9, 0.95]), 40),
    "one cycle no momentum": (adam, lambda L, o: L.OneCycleLR(o, 0.01, total_steps=30, cycle_momentum=False), 30),
    "sequential": (sgd, lambda L, o: L.SequentialLR(o, [L.ConstantLR(o, factor=0.1, total_iters=5),
                                                        L.ExponentialLR(o, gamma=0.9)], milestones=[5]), 30),
    "sequential warmup cosine": (sgd, lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, 0.1, total_iters=4), L.CosineAnnealingLR(o, 10), L.StepLR(o, 3, 0.5)], [4, 15]), 40),
    "chained": (sgd, lambda L, o: L.ChainedScheduler([L.ConstantLR(o, factor=0.1, total_iters=4),
                                                      L.ExponentialLR(o, gamma=0.9)]), 30),
    "chained three": (sgd, lambda L, o: L.ChainedScheduler([L.LinearLR(o, 0.2, total_iters=5), L.StepLR(o, 2, 0.7),
                                                            L.MultiStepLR(o, [3, 8, 8], 0.5)]), 30),
}


def momenta(optimizer) -> list:
    return [group["betas"] if "betas" in group else group["momentum"] for group in optimizer.param_groups]


def schedule(T, name):
    """The rates (set in the groups and from ``get_last_lr``) and momenta after each step."""
    kind, make, steps = SCHEDULES[name]
    optimizer = make_optimizer(T, kind)
    scheduler = make(T.optim.lr_scheduler, optimizer)
    seen = [(scheduler.get_last_lr(), [g["lr"] for g in optimizer.param_groups], momenta(optimizer))]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        seen.append((list(scheduler.get_last_lr()), [g["lr"] for g in optimizer.param_groups], momenta(optimizer)))
    return seen, scheduler


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_rates_and_momenta_are_pytorchs_bit_for_bit(torch, name):
    (ours, scheduler), (theirs, reference) = schedule(symgrad, name), schedule(torch, name)
    assert ours == theirs
    assert len({repr(rates) for rates, _, _ in ours}) > 1  # the schedule moved
    assert list(scheduler.state_dict()) == list(reference.state_dict())


def plateau(T, make, metrics, tensor=False):
    optimizer = make_optimizer(T)
    scheduler = make(T.optim.lr_scheduler, optimizer)
    seen = []
    for value in metrics:
        optimizer.step()
        scheduler.step(T.tensor(value) if tensor else value)
        seen.append((scheduler.get_last_lr(), [g["lr"] for g in optimizer.param_groups], scheduler.num_bad_epochs,
                     scheduler.cooldown_counter, scheduler.best))
    return seen, scheduler


PLATEAUS = {
    "min rel": lambda L, o: L.ReduceLROnPlateau(o, patience=2),
    "min abs cooldown": lambda L, o: L.ReduceLROnPlateau(o, factor=0.5, patience=1, threshold=0.01,
                                                         threshold_mode="abs", cooldown=2),
    "max rel": lambda L, o: L.ReduceLROnPlateau(o, mode="max", factor=0.3, patience=0, threshold=0.05),
    "max abs min_lr list": lambda L, o: L.ReduceLROnPlateau(o, "max", 0.2, 1, 0.0, "abs", 0, [0.005, 0.001]),
    "min_lr float eps": lambda L, o: L.ReduceLROnPlateau(o, factor=0.5, patience=0, min_lr=0.01, eps=0.012),
}


@pytest.mark.parametrize("tensor", [False, True], ids=["float", "0-d tensor"])
@pytest.mark.parametrize("name", list(PLATEAUS))
def test_reduce_on_plateau_is_pytorchs(torch, name, tensor):
    metrics = METRICS if name.startswith("min") else [-m for m in METRICS]
    (ours, scheduler), (theirs, reference) = (plateau(T, PLATEAUS[name], metrics, tensor) for T in (symgrad, torch))
    assert ours == theirs
    assert ours[-1][1] != ours[0][1]  # it reduced
    mine = scheduler.state_dict()
    assert list(mine) == list(reference.state_dict())
    assert mine == {k: v for k, v in reference.state_dict().items()}


def test_reduce_on_plateau_resumes_from_its_state_dict(torch):
    for T in (symgrad, torch):
        first = plateau(T, PLATEAUS["min abs cooldown"], METRICS[:10])[1]
        optimizer = make_optimizer(T)
        second = T.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
        second.load_state_dict(first.state_dict())
        assert (second.mode, second.threshold_mode, second.best, second.cooldown_counter) == (
            first.mode, first.threshold_mode, first.best, first.cooldown_counter)


def test_a_nan_metric_counts_as_no_improvement(torch):
    seen = [plateau(T, PLATEAUS["min rel"], [1.0, math.nan, math.nan, math.nan, 0.5])[0] for T in (symgrad, torch)]
    assert repr(seen[0]) == repr(seen[1])


def closed_form(T, make, epochs):
    optimizer = make_optimizer(T)
    scheduler = make(T.optim.lr_scheduler, optimizer)
    rates = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in epochs:
            optimizer.step()
            scheduler.step(epoch)
            rates.append(scheduler.get_last_lr())
    return rates


CLOSED_FORMS = {
    "step": lambda L, o: L.StepLR(o, 3, 0.7),
    "multistep": lambda L, o: L.MultiStepLR(o, [2, 5, 5, 9], 0.5),
    "constant": lambda L, o: L.ConstantLR(o, 0.4, 6),
    "linear": lambda L, o: L.LinearLR(o, 0.2, 0.8, 9),
    "exponential": lambda L, o: L.ExponentialLR(o, 0.9),
    "polynomial": lambda L, o: L.PolynomialLR(o, 11, 1.5),
    "cosine": lambda L, o: L.CosineAnnealingLR(o, 6, 0.01),
    "lambda": lambda L, o: L.LambdaLR(o, lambda e: 1 / (1 + e)),
    "cyclic": lambda L, o: L.CyclicLR(o, 0.01, 0.1, 4),
}


@pytest.mark.parametrize("name", list(CLOSED_FORMS))
def test_step_with_an_epoch_uses_pytorchs_closed_form(torch, name):
    epochs = [1, 2, 3, 7, 4, 12, 0, 5, 6, 15, 9, 9, 30]
    assert closed_form(symgrad, CLOSED_FORMS[name], epochs) == closed_form(torch, CLOSED_FORMS[name], epochs)


@pytest.mark.parametrize("T_mult", [1, 2, 3])
def test_warm_restarts_take_fractional_epochs(torch, T_mult):
    """The tutorial's ``scheduler.step(epoch + i / iters)``, then an epoch set back and forward."""
    epochs = [epoch + i / 7 for epoch in range(25) for i in range(7)] + [3, 0.5, 40.25, 11, 2]
    rates = [closed_form(T, lambda L, o: L.CosineAnnealingWarmRestarts(o, 2, T_mult, 0.002), epochs)
             for T in (symgrad, torch)]
    assert rates[0] == rates[1]


def test_resuming_with_last_epoch_is_pytorchs(torch):
    """Made again with ``last_epoch`` (the groups keep ``initial_lr``): the first step is the
    initial one, which keeps the current rates."""
    seen = []
    for T in (symgrad, torch):
        optimizer, rates = make_optimizer(T), []
        for make in (lambda o: T.optim.lr_scheduler.ExponentialLR(o, 0.9, last_epoch=4),
                     lambda o: T.optim.lr_scheduler.CosineAnnealingLR(o, 8, last_epoch=3),
                     lambda o: T.optim.lr_scheduler.PolynomialLR(o, 9, 2.0, last_epoch=5)):
            optimizer.param_groups[0]["initial_lr"] = optimizer.param_groups[1]["initial_lr"] = 0.2
            scheduler = make(optimizer)
            for _ in range(4):
                optimizer.step()
                scheduler.step()
                rates.append(scheduler.get_last_lr())
        seen.append(rates)
    assert seen[0] == seen[1]
    fresh = make_optimizer(symgrad)
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in param_groups\[0\]"):
        symgrad.optim.lr_scheduler.StepLR(fresh, 3, last_epoch=2)


def test_one_cycle_refuses_a_step_past_its_last(torch):
    messages = []
    for T in (symgrad, torch):
        optimizer = make_optimizer(T)
        scheduler = T.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, total_steps=5)
        for _ in range(5):
            optimizer.step()
            scheduler.step()
        with pytest.raises(ValueError) as error:
            scheduler.step()
        messages.append((str(error.value), scheduler.last_epoch))
    assert messages[0] == messages[1] == ("Tried to step 6 times. The specified number of total steps is 5", 6)


def warnings_of(T, calls) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calls(T)
    return [str(w.message) for w in caught]


def _scheduler_first(T):
    optimizer = make_optimizer(T)
    scheduler = T.optim.lr_scheduler.StepLR(optimizer, 2)
    scheduler.step()
    optimizer.step()
    scheduler.step()


def _in_order(T):
    optimizer = make_optimizer(T)
    scheduler = T.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, total_steps=9)
    for _ in range(3):
        optimizer.step()
        scheduler.step()


def _step_replaced(T):
    optimizer = make_optimizer(T)
    scheduler = T.optim.lr_scheduler.ExponentialLR(optimizer, 0.5)
    optimizer.step = lambda: None
    scheduler.step()


def _get_lr_by_hand(T):
    optimizer = make_optimizer(T)
    T.optim.lr_scheduler.LinearLR(optimizer).get_lr()


def _an_epoch(T):
    optimizer = make_optimizer(T)
    scheduler = T.optim.lr_scheduler.StepLR(optimizer, 2)
    optimizer.step()
    scheduler.step(3)
    T.optim.lr_scheduler.ReduceLROnPlateau(optimizer).step(1.0, 4)


@pytest.mark.parametrize("calls", [_scheduler_first, _in_order, _step_replaced, _get_lr_by_hand, _an_epoch],
                         ids=["scheduler first", "in order", "step replaced", "get_lr by hand", "an epoch"])
def test_pytorchs_warnings(torch, calls):
    ours, theirs = warnings_of(symgrad, calls), warnings_of(torch, calls)
    assert ours == theirs
    assert ours or calls is _in_order


@pytest.mark.parametrize("call", [
    lambda L, o: L.ConstantLR(o, factor=1.5), lambda L, o: L.LinearLR(o, start_factor=0),
    lambda L, o: L.LinearLR(o, end_factor=2), lambda L, o: L.MultiplicativeLR(o, 0.9),
    lambda L, o: L.LambdaLR(o, [lambda e: 1]), lambda L, o: L.ReduceLROnPlateau(o, factor=1.0),
    lambda L, o: L.ReduceLROnPlateau(o, mode="lowest"), lambda L, o: L.ReduceLROnPlateau(o, threshold_mode="x"),
    lambda L, o: L.ReduceLROnPlateau(o, min_lr=[0.1]), lambda L, o: L.OneCycleLR(o, 0.1),
    lambda L, o: L.OneCycleLR(o, 0.1, total_steps=0), lambda L, o: L.OneCycleLR(o, 0.1, epochs=2, steps_per_epoch=0),
    lambda L, o: L.OneCycleLR(o, 0.1, 10, pct_start=1.5), lambda L, o: L.OneCycleLR(o, 0.1, 10, anneal_strategy="x"),
    lambda L, o: L.OneCycleLR(o, [0.1, 0.2, 0.3], 10), lambda L, o: L.CyclicLR(o, 0.1, 1.0, mode="x"),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, 0), lambda L, o: L.CosineAnnealingWarmRestarts(o, 2, T_mult=0),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, 2).step(-1),
    lambda L, o: L.SequentialLR(o, [L.ExponentialLR(o, 0.9)], [3]),
    lambda L, o: L.SequentialLR(o, [L.ReduceLROnPlateau(o)], []), lambda L, o: L.ChainedScheduler([]),
    lambda L, o: L.StepLR([1.0], 3),
], ids=["constant factor", "linear start", "linear end", "multiplicative not callable", "lambdas", "plateau factor",
        "plateau mode", "plateau threshold mode", "plateau min_lrs", "one cycle no steps", "one cycle total",
        "one cycle steps per epoch", "one cycle pct", "one cycle anneal", "one cycle max_lr list", "cyclic mode",
        "T_0", "T_mult", "negative epoch", "milestones", "sequential plateau", "chained empty", "not an optimizer"])
def test_pytorchs_errors(torch, call):
    seen = []
    for T in (symgrad, torch):
        with pytest.raises((ValueError, TypeError)) as error:
            call(T.optim.lr_scheduler, make_optimizer(T))
        seen.append((error.type, str(error.value)))
    assert seen[0] == seen[1]


def test_the_cycling_needs_a_momentum(torch):
    seen = []
    for T in (symgrad, torch):
        optimizer = T.optim.Adagrad([T.nn.Parameter(T.ones(2))])
        with pytest.raises(ValueError) as error:
            T.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, 10)
        seen.append(str(error.value))
        T.optim.lr_scheduler.CyclicLR(optimizer, 0.01, 0.1, cycle_momentum=False)
    assert seen[0] == seen[1]


class Warmup:
    """A callable object as the lambda: its attributes are saved with the scheduler."""

    def __init__(self):
        self.steps = 4

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.steps)


def test_state_dicts_save_and_load_as_pytorchs(torch):
    states = []
    for T in (symgrad, torch):
        L, optimizer = T.optim.lr_scheduler, make_optimizer(T)
        schedulers = [L.LambdaLR(optimizer, [Warmup(), lambda e: 0.9 ** e]),
                      L.SequentialLR(optimizer, [L.ConstantLR(optimizer, 0.5, 2), L.ExponentialLR(optimizer, 0.9)],
                                     [2])]
        for _ in range(5):
            optimizer.step()
            for scheduler in schedulers:
                scheduler.step()
        states.append([scheduler.state_dict() for scheduler in schedulers])
        warmup = Warmup()
        loaded = L.LambdaLR(make_optimizer(T), [warmup, lambda e: 1.0])
        schedulers[0].lr_lambdas[0].steps = 9
        loaded.load_state_dict(schedulers[0].state_dict())
        assert warmup.steps == 9 and loaded.last_epoch == 5
    ours, theirs = states
    assert ours[0] == theirs[0]
    assert ours[0]["lr_lambdas"] == [{"steps": 4}, None]
    assert [list(part) for part in ours[1]["_schedulers"]] == [list(part) for part in theirs[1]["_schedulers"]]
    assert ours[1]["_schedulers"] == theirs[1]["_schedulers"]
    assert list(ours[1]) == list(theirs[1])


def train(T, make_schedule, steps, optimizer_kind, plateau_steps=False):
    """A linear least-squares fit, torch-style, its rate scheduled; the weights and rates."""
    w, b = T.nn.Parameter(T.tensor(W0)), T.nn.Parameter(T.zeros(4))
    optimizer = optimizer_kind(T, [w, b])
    scheduler = make_schedule(T.optim.lr_scheduler, optimizer)
    x, y = T.tensor(X), T.tensor(Y)
    rates = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        scheduler.step(loss.detach()) if plateau_steps else scheduler.step()
        rates.append((optimizer.param_groups[0]["lr"], momenta(optimizer)))
    return w.detach().numpy(), b.detach().numpy(), rates


@pytest.mark.parametrize("case", [
    (lambda L, o: L.OneCycleLR(o, 0.2, total_steps=12), sgd, False),
    (lambda L, o: L.OneCycleLR(o, 0.05, total_steps=12, three_phase=True), adam, False),
    (lambda L, o: L.CyclicLR(o, 0.001, 0.05, 3, mode="triangular2"), adam, False),
    (lambda L, o: L.SequentialLR(o, [L.LinearLR(o, 0.1, total_iters=3), L.CosineAnnealingWarmRestarts(o, 4)], [3]),
     sgd, False),
    (lambda L, o: L.ReduceLROnPlateau(o, patience=0, threshold=0.2), sgd, True),
], ids=["one cycle sgd", "one cycle adam", "cyclic adam", "warmup then restarts", "plateau on the loss"])
def test_a_scheduled_training_loop_gives_pytorchs_weights(torch, case):
    make, kind, plateau_steps = case
    ours, theirs = (train(T, make, 12, kind, plateau_steps) for T in (symgrad, torch))
    assert ours[2] == theirs[2]
    for a, b in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)  # the forward's rounding, not the schedule's
    assert not np.allclose(ours[0], W0)
