"""``torch.optim.swa_utils``: weight averaging (stochastic weight averaging, exponential moving
averages) of a model during training, the learning-rate schedule SWA runs with, and the pass over
the data that recomputes BatchNorm statistics for the averaged weights.

The averages are in-place updates under ``no_grad`` (so a training loop compiles them into its
next step), in PyTorch's formulas: on CPU PyTorch averages one tensor at a time, which is what runs
here whether or not ``multi_avg_fn`` takes the tensors as lists."""
from __future__ import annotations

import copy
import itertools
import math

from symgrad import creation, dtypes
from symgrad.grad_mode import no_grad
from symgrad.nn.module import Module
from symgrad.nn.normalization import _BatchNorm
from symgrad.optim.scheduling import LRScheduler, per_group
from symgrad.tensor import Tensor

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """An exponential moving average over lists of tensors: ``ema`` moves ``1 - decay`` of the
    way to the current weights."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_params, current_params, _):
        if ema_params[0].is_floating_point() or ema_params[0].is_complex():
            for ema, current in zip(ema_params, current_params, strict=True):
                ema.lerp_(current, 1 - decay)
        else:
            for ema, current in zip(ema_params, current_params, strict=True):
                ema.copy_(ema * decay + current * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """The running mean over lists of tensors: the ``n+1``-th weights move the mean ``1/(n+1)``."""

    @no_grad()
    def swa_update(averaged_params, current_params, num_averaged):
        if averaged_params[0].is_floating_point() or averaged_params[0].is_complex():
            for averaged, current in zip(averaged_params, current_params, strict=True):
                averaged.lerp_(current, 1 / (num_averaged + 1))
            return
        for averaged, current in zip(averaged_params, current_params, strict=True):
            if isinstance(num_averaged, Tensor):
                averaged.addcdiv_(current - averaged, num_averaged + 1)
            else:
                averaged.add_(current - averaged, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The exponential moving average of one tensor, returned (not written)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """The running mean of one tensor, returned (not written)."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and buffers, with ``use_buffers``) are averaged with
    the model's at each ``update_parameters``; the first update copies them."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", creation.tensor(0, dtype=dtypes.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged(self, model):
        if self.use_buffers:
            return (itertools.chain(self.module.parameters(), self.module.buffers()),
                    itertools.chain(model.parameters(), model.buffers()))
        return self.parameters(), model.parameters()

    def update_parameters(self, model) -> None:
        mine, theirs = self._averaged(model)
        pairs = [(averaged.detach(), current.detach()) for averaged, current in zip(mine, theirs)]
        if bool(self.n_averaged == 0):
            for averaged, current in pairs:
                averaged.copy_(current)
        elif self.avg_fn is not None:
            for averaged, current in pairs:
                averaged.copy_(self.avg_fn(averaged, current, self.n_averaged))
        elif self.multi_avg_fn is not None:
            for group in _by_dtype(pairs):
                self.multi_avg_fn([a for a, _ in group], [c for _, c in group], self.n_averaged)
        else:
            average = get_swa_avg_fn()
            for averaged, current in pairs:
                averaged.copy_(average(averaged, current, self.n_averaged))
        if not self.use_buffers:
            for mine_, theirs_ in zip(self.module.buffers(), model.buffers(), strict=True):
                mine_.detach().copy_(theirs_.detach())
        self.n_averaged += 1


def _by_dtype(pairs) -> list:
    """The pairs grouped by dtype, in first-seen order (PyTorch's grouping by device and dtype)."""
    groups: dict = {}
    for pair in pairs:
        groups.setdefault(pair[0].dtype, []).append(pair)
    return list(groups.values())


@no_grad()
def update_bn(loader, model, device=None) -> None:
    """Recomputes every BatchNorm's running statistics as the plain mean over one pass of
    ``loader`` (momentum None), then restores the momenta and the training mode."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's rate to ``swa_lr`` over ``anneal_epochs`` (cosine or linear), then
    holds it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for rate, group in zip(per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups, strict=True):
            group["swa_lr"] = rate.clone() if isinstance(rate, Tensor) else rate
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    def _set_anneal_func(self, anneal_strategy) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self) -> list:
        """The rate a fraction ``alpha`` of the way from where the schedule started (recovered
        from the current rate and the previous fraction) to ``swa_lr``."""
        self._warn_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        previous = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        rates = []
        for group in self.optimizer.param_groups:
            start = group["swa_lr"] if previous == 1 else (group["lr"] - previous * group["swa_lr"]) / (1 - previous)
            rates.append(group["swa_lr"] * alpha + start * (1 - alpha))
        return rates

    def state_dict(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
