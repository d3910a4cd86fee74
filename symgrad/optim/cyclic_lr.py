"""The cyclic schedules: ``CyclicLR`` and ``OneCycleLR`` (which move the momentum, SGD's
``momentum`` or Adam's first beta, against the rate) and ``CosineAnnealingWarmRestarts``.  Each
rate is computed afresh from the schedule's ends, by PyTorch's formulas op for op."""
from __future__ import annotations

import math
import types

from symgrad.optim.scheduling import LRScheduler, check_optimizer, flagged, group_values, per_group


def _uses_beta1(optimizer) -> bool:
    """Whether the momentum to cycle is Adam's first beta (else SGD's ``momentum``)."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
    return "betas" in optimizer.defaults


def _set_momentum(group: dict, momentum: float, beta1: bool) -> None:
    if beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


def _start_momentum(optimizer, bases: list, maxima: list, beta1: bool) -> None:
    """A fresh schedule starts at the highest momentum and records its ends in the groups."""
    for base, top, group in zip(bases, maxima, optimizer.param_groups, strict=True):
        _set_momentum(group, top, beta1)
        group["max_momentum"], group["base_momentum"] = top, base


class CyclicLR(LRScheduler):
    """The rate climbs from ``base_lr`` to ``max_lr`` in ``step_size_up`` steps and back in
    ``step_size_down``, the climb scaled per cycle (``triangular2``: halved each cycle) or per
    step (``exp_range``: ``gamma ** step``) or by ``scale_fn``; momentum moves the other way."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: int = 2000, step_size_down=None,
                 mode: str = "triangular", gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9, last_epoch: int = -1):
        check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom, self.scale_mode = scale_fn, scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _uses_beta1(optimizer)
            self.base_momentums = per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                _start_momentum(optimizer, self.base_momentums, self.max_momentums, self.use_beta1)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        """A named mode fixes what the scale is a function of: the cycle, or the step."""
        if self._scale_fn_custom is not None:
            return
        if self.mode in ("triangular", "triangular2"):
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self.scale_mode = "iterations"

    def scale_fn(self, x) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / 2.0 ** (x - 1)
        return self.gamma ** x

    def get_lr(self) -> list:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle  # how far into the cycle, in [0, 1)
        if x <= self.step_ratio:
            climbed = x / self.step_ratio
        else:
            climbed = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        rates = [base + (top - base) * climbed * scale for base, top in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for base, top, group in zip(self.base_momentums, self.max_momentums, self.optimizer.param_groups,
                                        strict=True):
                _set_momentum(group, top - (top - base) * climbed * scale, self.use_beta1)
        return rates

    def state_dict(self) -> dict:
        """A ``scale_fn`` that is a plain function is saved as None, a callable object as its
        attributes."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None if fn is None or isinstance(fn, types.FunctionType) else fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        attributes = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        if attributes is not None:
            self._scale_fn_custom.__dict__.update(attributes)
        self._init_scale_fn()


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the base rate to ``eta_min`` over ``T_i`` epochs, restarting with
    ``T_i`` times ``T_mult``; ``step(epoch)`` takes fractional epochs (steps within an epoch)."""

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch=None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        else:
            self._place(epoch)
        self.last_epoch = math.floor(epoch)
        with flagged(self, "_get_lr_called_within_step"):
            rates = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, rates, strict=True):
            group["lr"] = lr
        self._last_lr = group_values(self.optimizer)

    def _place(self, epoch) -> None:
        """``T_cur`` and ``T_i`` at ``epoch``: in which restart it falls (the periods grow
        geometrically when ``T_mult > 1``) and how far into it."""
        if epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        if epoch < self.T_0:
            self.T_i, self.T_cur = self.T_0, epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult ** n


class OneCycleLR(LRScheduler):
    """The 1cycle policy: from ``max_lr / div_factor`` up to ``max_lr`` over ``pct_start`` of
    ``total_steps``, then down to ``initial_lr / final_div_factor`` (``three_phase``: back to the
    initial rate first), annealed by cosine or linearly; momentum moves the other way."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum=0.85, max_momentum=0.95, div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1):
        check_optimizer(optimizer)
        self.optimizer = optimizer
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        self._schedule_phases = _phases(pct_start, self.total_steps, three_phase)
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _uses_beta1(optimizer)
            maxima = per_group("max_momentum", optimizer, max_momentum)
            bases = per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                _start_momentum(optimizer, bases, maxima, self.use_beta1)
        super().__init__(optimizer, last_epoch)

    def _anneal_func(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list:
        self._warn_outside_step()
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps is {self.total_steps}")
        rates = []
        for group in self.optimizer.param_groups:
            phase, pct = self._phase_at(step)
            rates.append(self._anneal_func(group[phase["start_lr"]], group[phase["end_lr"]], pct))
            if self.cycle_momentum:
                momentum = self._anneal_func(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                _set_momentum(group, momentum, self.use_beta1)
        return rates

    def _phase_at(self, step: int):
        """The phase ``step`` falls in (the last one past its end) and the fraction of it done."""
        start = 0.0
        for i, phase in enumerate(self._schedule_phases):
            end = phase["end_step"]
            if step <= end or i == len(self._schedule_phases) - 1:
                return phase, (step - start) / (end - start)
            start = end


def _total_steps(total_steps, epochs, steps_per_epoch) -> int:
    if total_steps is not None:
        if total_steps <= 0 or not isinstance(total_steps, int):
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        return total_steps
    if epochs is None or steps_per_epoch is None:
        raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
    if not isinstance(epochs, int) or epochs <= 0:
        raise ValueError(f"Expected positive integer epochs, but got {epochs}")
    if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
        raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
    return epochs * steps_per_epoch


def _phases(pct_start: float, total_steps: int, three_phase: bool) -> list:
    """Where each phase ends (a step, as PyTorch computes it) and the group keys of its ends."""
    def phase(end_step, start_lr, end_lr, start_momentum, end_momentum):
        return dict(end_step=end_step, start_lr=start_lr, end_lr=end_lr, start_momentum=start_momentum,
                    end_momentum=end_momentum)

    warmup = phase(float(pct_start * total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum")
    if not three_phase:
        return [warmup, phase(total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
    return [warmup, phase(float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                          "max_momentum"),
            phase(total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
