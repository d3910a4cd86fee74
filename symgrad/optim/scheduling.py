"""The learning-rate schedulers' base: PyTorch's stepping protocol, so that a scheduler (ours or a
user's subclass overriding ``get_lr``) steps, warns, saves and resumes as PyTorch's does.

``step()`` asks ``get_lr`` for the next rates, which most schedules compute from the groups'
current rates (PyTorch's chainable form); ``step(epoch)`` uses ``_get_closed_form_lr`` (from
``base_lrs``) where a scheduler has one.  The two forms round differently, so which one runs
decides the last bits, and PyTorch's rule for choosing is kept here."""
from __future__ import annotations

import contextlib
import functools
import warnings
import weakref

from symgrad.optim.optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. "
    "Please use `scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from "
    "None, the closed form is used instead of the new chainable form, where available. Please open an issue if "
    "you are unable to replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose.")


def group_values(optimizer, key: str = "lr") -> list:
    return [group[key] for group in optimizer.param_groups]


def per_group(name: str, optimizer, value) -> list:
    """``value`` for each parameter group: a list or tuple of one per group, or one for all."""
    groups = len(optimizer.param_groups)
    if not isinstance(value, (list, tuple)):
        return [value] * groups
    if len(value) != groups:
        raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} has {len(value)} "
                         f"values, param_groups has {groups}.")
    return list(value)


def check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


@contextlib.contextmanager
def flagged(scheduler, name: str):
    """``scheduler.<name>`` is True inside: an instance attribute afterwards, so it is saved
    in ``state_dict`` as PyTorch's is."""
    setattr(scheduler, name, True)
    try:
        yield
    finally:
        setattr(scheduler, name, False)


def _note_optimizer_steps(optimizer) -> None:
    """Wraps ``optimizer.step`` (once) so that it records having run: a scheduler stepped before
    it warns, as the rate it skips is the schedule's first."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    owner, method = weakref.ref(optimizer), optimizer.step.__func__

    @functools.wraps(method)
    def step(*args, **kwargs):
        stepped = owner()
        stepped._opt_called = True
        return method(stepped, *args, **kwargs)

    step._wrapped_by_lr_sched = True
    optimizer.step = step


class LRScheduler:
    """Sets each group's ``lr`` to ``get_lr()`` on every ``step()``; made with ``last_epoch=-1``
    it records ``initial_lr`` in the groups and takes the first step (epoch 0) at once."""

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch: int = -1):
        check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with "
                        "last_epoch >= 0.\nThis typically happens when:\n1. You're trying to resume training from a "
                        "checkpoint but haven't properly loaded the optimizer state\n2. You're using last_epoch >= 0 "
                        "for a fresh training run (not recommended)")
        self.base_lrs = group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _note_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        with flagged(self, "_is_initial"):
            self.step()

    def get_lr(self) -> list:
        raise NotImplementedError

    def get_last_lr(self) -> list:
        return self._last_lr

    def step(self, epoch=None) -> None:
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn("Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                              "initialization. Please, make sure to call `optimizer.step()` before "
                              "`lr_scheduler.step()`. See more details at "
                              "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                              UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 "
                              "and later, you should call them in the opposite order: `optimizer.step()` before "
                              "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
                              "value of the learning rate schedule. See more details at "
                              "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                              UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None) -> None:
        with flagged(self, "_get_lr_called_within_step"):
            if epoch is None:
                self.last_epoch += 1
                rates = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                rates = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, rates, strict=True):
            group["lr"] = lr
        self._last_lr = group_values(self.optimizer)

    def _warn_outside_step(self) -> None:
        """``get_lr`` called by the user: it computes the next rates, not the last ones."""
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)

    def state_dict(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class _LRScheduler(LRScheduler):
    """The base's former name, which older code subclasses."""
