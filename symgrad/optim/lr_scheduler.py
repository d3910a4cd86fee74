"""``torch.optim.lr_scheduler``.  The schedules here scale the groups' current rates each step, by
PyTorch's chainable formulas, and from ``base_lrs`` by its closed forms on ``step(epoch)``, op for
op, so every rate is PyTorch's to the last bit.  A changing lr is a Python float: the compiled
step takes it as an input and does not recompile."""
from __future__ import annotations

import collections
import math
import types
from bisect import bisect_right

from symgrad.optim.composite_lr import ChainedScheduler, SequentialLR
from symgrad.optim.cyclic_lr import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from symgrad.optim.plateau import ReduceLROnPlateau
from symgrad.optim.scheduling import LRScheduler, _LRScheduler, group_values

__all__ = ["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
           "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR", "LRScheduler"]


class StepLR(LRScheduler):
    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return group_values(self.optimizer)
        return [lr * self.gamma for lr in group_values(self.optimizer)]

    def _get_closed_form_lr(self) -> list:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """The rate times ``gamma`` at each milestone epoch (a milestone listed twice: twice)."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones, self.gamma = collections.Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self.last_epoch not in self.milestones:
            return group_values(self.optimizer)
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in group_values(self.optimizer)]

    def _get_closed_form_lr(self) -> list:
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """The rate times ``factor`` until epoch ``total_iters``, then divided back."""

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [lr * self.factor for lr in group_values(self.optimizer)]
        if self.last_epoch != self.total_iters:
            return group_values(self.optimizer)
        return [lr * (1.0 / self.factor) for lr in group_values(self.optimizer)]

    def _get_closed_form_lr(self) -> list:
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor on the rate goes linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs, each step scaling the current rate by the ratio of two factors."""

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in group_values(self.optimizer)]
        if self._is_initial or self.last_epoch > self.total_iters:
            return group_values(self.optimizer)
        change = self.end_factor - self.start_factor
        ratio = 1.0 + change / (self.total_iters * self.start_factor + (self.last_epoch - 1) * change)
        return [lr * ratio for lr in group_values(self.optimizer)]

    def _get_closed_form_lr(self) -> list:
        done = min(self.total_iters, self.last_epoch)
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * done / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self._is_initial:
            return group_values(self.optimizer)
        return [lr * self.gamma for lr in group_values(self.optimizer)]

    def _get_closed_form_lr(self) -> list:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """``base_lr * (1 - epoch / total_iters) ** power``, reached by scaling the current rate."""

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        epoch, total = self.last_epoch, self.total_iters
        if self._is_initial or epoch > total:
            return group_values(self.optimizer)
        factor = ((1.0 - epoch / total) / (1.0 - (epoch - 1) / total)) ** self.power
        return [lr * factor for lr in group_values(self.optimizer)]

    def _get_closed_form_lr(self) -> list:
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * left ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        epoch, period, low = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return group_values(self.optimizer)
        if self._step_count == 1 and epoch > 0:
            return [low + (base - low) * (1 + math.cos(epoch * math.pi / period)) / 2 for base in self.base_lrs]
        if (epoch - 1 - period) % (2 * period) == 0:
            return [lr + (base - low) * (1 - math.cos(math.pi / period)) / 2
                    for lr, base in zip(group_values(self.optimizer), self.base_lrs)]
        return [(1 + math.cos(math.pi * epoch / period)) / (1 + math.cos(math.pi * (epoch - 1) / period))
                * (lr - low) + low for lr in group_values(self.optimizer)]

    def _get_closed_form_lr(self) -> list:
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class _Lambdas(LRScheduler):
    """A schedule of one function of the epoch per group.  Saved as PyTorch saves it: a plain
    function as None, a callable object as a copy of its attributes (loaded back into it)."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        self.optimizer = optimizer
        groups = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != groups:
                raise ValueError(f"Expected {groups} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * groups
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        saved = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        state_dict["lr_lambdas"] = saved
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)


class LambdaLR(_Lambdas):
    """``base_lr * lr_lambda(epoch)``."""

    def get_lr(self) -> list:
        self._warn_outside_step()
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]


class MultiplicativeLR(_Lambdas):
    """The current rate times ``lr_lambda(epoch)`` each step after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        lambdas = lr_lambda if isinstance(lr_lambda, (list, tuple)) else [lr_lambda]
        for fn in lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, lr_lambda, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self._is_initial:
            return group_values(self.optimizer)
        return [lr * fn(self.last_epoch)
                for fn, lr in zip(self.lr_lambdas, group_values(self.optimizer), strict=True)]
