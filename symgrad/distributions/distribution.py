"""``torch.distributions.Distribution``: the contract every family keeps.

A distribution holds tensors of parameters; its ``batch_shape`` is the shape of independent
distributions held at once, its ``event_shape`` the shape of one draw.  ``sample`` draws with
PyTorch's generator and calls (so a seeded script prints PyTorch's numbers) without history;
``rsample`` draws the same way but as a differentiable function of the parameters.  Validation,
on by default as in PyTorch, checks parameters at construction and values at ``log_prob``, with
PyTorch's ValueError messages.
"""
from __future__ import annotations

import warnings

from symgrad.dtypes import Size
from symgrad.grad_mode import no_grad
from symgrad.tensor import Tensor

from symgrad.distributions import constraints
from symgrad.distributions.utils import lazy_property

__all__ = ["Distribution"]


class Distribution:
    """A batch of probability distributions with PyTorch's methods and shapes."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()

    def _check_parameters(self) -> None:
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}` "
                          "or initialize the distribution with `validate_args=False` to turn off validation.")
            return
        for name, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if name not in self.__dict__ and isinstance(getattr(type(self), name, None), lazy_property):
                continue  # a parameter derived only when asked for
            value = getattr(self, name)
            if not constraint.check(value).all():
                raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"of distribution {self!r} to satisfy the constraint {constraint!r}, but found "
                                 f"invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError

    def _expanded(self, cls, batch_shape, event_shape=None, _instance=None):
        """A new instance of ``cls`` with ``batch_shape`` (its parameters set by the caller), for
        ``expand``: no validation, this instance's validation flag."""
        if _instance is None and type(self).__init__ is not cls.__init__:
            raise NotImplementedError(f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        new = type(self).__new__(type(self)) if _instance is None else _instance
        Distribution.__init__(new, batch_shape, self._event_shape if event_shape is None else event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape=()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        raise NotImplementedError

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()) -> Size:
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value) -> None:
        """``value`` fits the shapes (its rightmost dims the event's, the rest broadcastable with the
        batch's) and lies in the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        actual, event = Size(value.shape), self._event_shape
        if Size(actual[len(actual) - len(event):]) != event:
            raise ValueError(f"The right-most size of value must match event_shape: {actual} vs {event}.")
        expected = Size(self._batch_shape + event)
        if any(i != 1 and j != 1 and i != j for i, j in zip(reversed(actual), reversed(expected))):
            raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.")
            return
        if not support.check(value).all():
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def __repr__(self) -> str:
        shown = (f"{name}: {p if p.numel() == 1 else p.size()}"
                 for name, p in ((n, self.__dict__[n]) for n in self.arg_constraints if n in self.__dict__))
        return f"{type(self).__name__}({', '.join(shown)})"
