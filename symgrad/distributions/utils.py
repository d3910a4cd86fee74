"""``torch.distributions.utils``: what the families share, each written with the ops PyTorch's
helpers use so values, gradients and random draws agree with its."""
from __future__ import annotations

import numpy as np

from symgrad import dtypes
from symgrad.creation import randn, tensor
from symgrad.grad_mode import enable_grad
from symgrad.nn.functional import softmax
from symgrad.ops.broadcasting import broadcast_tensors
from symgrad.tensor import Tensor

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits"]

NUMBER = (int, float, bool)


def broadcast_all(*values) -> tuple:
    """Tensors and numbers broadcast to one shape; numbers become tensors of the first tensor's dtype
    (the default dtype when there is none)."""
    if not all(isinstance(v, (Tensor,) + NUMBER) for v in values):
        raise ValueError("Input arguments must all be instances of Number, torch.Tensor or objects implementing "
                         "__torch_function__.")
    dtype = next((v.dtype for v in values if isinstance(v, Tensor)), None) or dtypes.get_default_dtype()
    return broadcast_tensors(*(v if isinstance(v, Tensor) else tensor(v, dtype=dtype) for v in values))


def standard_normal(shape, dtype) -> Tensor:
    """PyTorch's ``empty(shape).normal_()``: the draws of ``randn``."""
    return randn(size=tuple(shape), dtype=dtype)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """``value`` summed over its last ``dim`` dims (as one flattened dim, PyTorch's order)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def finfo(dtype):
    return np.finfo(dtype.numpy)


def one_parameter(probs, logits):
    """The one of ``probs`` and ``logits`` given (PyTorch's error for neither or both)."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    return ("probs", probs) if probs is not None else ("logits", logits)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    return logits.sigmoid() if is_binary else softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Kept ``eps`` away from 0 and 1, so that their logits stay finite."""
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    clamped = clamp_probs(probs)
    return clamped.log() - (-clamped).log1p() if is_binary else clamped.log()


class lazy_property:
    """A parameter derived from another on first use (a Categorical's probs from its logits), then
    stored on the instance; derived with grad on, so it stays differentiable whoever asks first."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.__name__, value)
        return value
