"""Schedulers made of schedulers on one optimizer: ``SequentialLR`` hands over from one to the
next at milestone epochs; ``ChainedScheduler`` steps them all, each scaling what the one before
set.  They take no step of their own: the rates are their parts'."""
from __future__ import annotations

from bisect import bisect_right

from symgrad.optim.plateau import ReduceLROnPlateau
from symgrad.optim.scheduling import LRScheduler, group_values


def _check_parts(kind: str, optimizer, schedulers) -> None:
    if len(schedulers) < 1:
        chained = " to be chained" if kind == "ChainedScheduler" else ""
        raise ValueError(f"{kind} expects at least one scheduler{chained}, but got no scheduler.")
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{kind} at index {i} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(f"{kind} does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs "
                             f"to be specified when calling `step`, but got one at index {i} in the given schedulers "
                             "sequence.")
        if optimizer != scheduler.optimizer:
            raise ValueError(f"{kind} expects all schedulers to belong to the same optimizer, but got scheduler "
                             f"{type(scheduler).__name__} at index {i} has {scheduler.optimizer}, which is different "
                             f"from {type(optimizer).__name__}.")


class _Composite(LRScheduler):
    """Saved with each part's own state."""

    def state_dict(self) -> dict:
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [scheduler.state_dict() for scheduler in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        parts = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        state_dict["_schedulers"] = parts
        for scheduler, state in zip(self._schedulers, parts):
            scheduler.load_state_dict(state)


class SequentialLR(_Composite):
    """``schedulers[i]`` runs from ``milestones[i - 1]``, restarted there at its epoch 0 (by its
    closed form where it has one)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        _check_parts("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self._schedulers, self._milestones = schedulers, milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # the parts' initial steps are undone
            group["lr"] = group["initial_lr"]
        self.recursive_undo()
        first = self._schedulers[bisect_right(milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched=None) -> None:
        """Takes back the epoch each part (and the parts of a part) counted when it was made."""
        sched = self if sched is None else sched
        if hasattr(sched, "_schedulers"):
            for part in sched._schedulers:
                self.recursive_undo(part)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self) -> None:
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    def __init__(self, schedulers, optimizer=None):
        optimizer = optimizer or (schedulers[0].optimizer if len(schedulers) else None)
        _check_parts("ChainedScheduler", optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = group_values(schedulers[-1].optimizer)

    def step(self) -> None:
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = group_values(self._schedulers[-1].optimizer)
