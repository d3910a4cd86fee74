"""``torch.optim.lr_scheduler``: StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LambdaLR, with
PyTorch's chainable formulas (each step scales the group's current lr), so the lr sequence is
PyTorch's to the last bit.  A changing lr is a Python float: the compiled step takes it as an
input and does not recompile."""
from __future__ import annotations

import collections
import math


class LRScheduler:
    def __init__(self, optimizer, last_epoch: int = -1):
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        elif any("initial_lr" not in group for group in optimizer.param_groups):
            raise KeyError("param 'initial_lr' is not specified in param_groups when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self) -> list:
        raise NotImplementedError

    def get_last_lr(self) -> list:
        return self._last_lr

    def step(self, epoch=None) -> None:
        self._step_count += 1
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        self._last_lr = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def state_dict(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)

    def _current(self) -> list:
        return [group["lr"] for group in self.optimizer.param_groups]


class StepLR(LRScheduler):
    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]


class MultiStepLR(LRScheduler):
    """The rate times ``gamma`` at each milestone epoch (a milestone listed twice: twice)."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones, self.gamma = collections.Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch not in self.milestones:
            return self._current()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._current()]


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch == 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        epoch, period, low = self.last_epoch, self.T_max, self.eta_min
        if epoch == 0:
            return self._current()
        if self._step_count == 1 and epoch > 0:
            return [low + (base - low) * (1 + math.cos(epoch * math.pi / period)) / 2 for base in self.base_lrs]
        if (epoch - 1 - period) % (2 * period) == 0:
            return [lr + (base - low) * (1 - math.cos(math.pi / period)) / 2
                    for lr, base in zip(self._current(), self.base_lrs)]
        return [(1 + math.cos(math.pi * epoch / period)) / (1 + math.cos(math.pi * (epoch - 1) / period))
                * (lr - low) + low for lr in self._current()]


class LambdaLR(LRScheduler):
    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        groups = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * groups
        if len(self.lr_lambdas) != groups:
            raise ValueError(f"Expected {groups} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict:
        return {key: value for key, value in super().state_dict().items() if key != "lr_lambdas"}
