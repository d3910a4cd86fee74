"""Constructors PyTorch keeps beside ``tensor`` and ``arange``: ``scalar_tensor``, ``asarray`` (a tensor
passes through, as an alias) and the deprecated ``range``, whose end is included."""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from symgrad import devices, dtypes
from symgrad.creation import full, tensor
from symgrad.tensor import Tensor


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A 0-dim tensor of the default dtype (not the number's own: ``scalar_tensor(3)`` is ``3.``)."""
    if not isinstance(s, numbers.Number) or isinstance(s, complex):
        raise TypeError(f"scalar_tensor(): argument 's' (position 1) must be Number, not "
                        f"{'Tensor' if isinstance(s, Tensor) else type(s).__name__}")
    return full((), s, dtype=dtype or dtypes.get_default_dtype(), device=device, requires_grad=requires_grad)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad: bool = False) -> Tensor:
    """A tensor is returned as it is (the same object: it aliases itself), converted when ``dtype``
    differs (refused if ``copy=False``), cloned when ``copy=True``; other data becomes a new tensor."""
    devices.check(device)
    if not isinstance(obj, Tensor):
        if copy is False and isinstance(obj, np.ndarray):
            raise ValueError("symgrad: asarray(copy=False) cannot share a NumPy array's memory")
        return tensor(obj, dtype=dtype, requires_grad=requires_grad)
    if dtype is not None and dtype is not obj.dtype:
        if copy is False:
            raise ValueError(f"can't alias tensor with dtype '{dtypes.torch_name(obj.dtype)}' into dtype "
                             f"'{dtypes.torch_name(dtype)}'.")
        obj = obj.to(dtype)
    elif copy:
        obj = obj.clone()
    return obj.requires_grad_() if requires_grad else obj


def range(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``start, start + step, ...`` up to and including ``end`` (default dtype unless given); each value
    is ``start + i * step`` in double, as PyTorch's kernel, then rounded to the dtype."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    count = math.floor((end - start) / step) + 1
    dtype = dtype or dtypes.get_default_dtype()
    values = float(start) + np.arange(count, dtype=np.float64) * float(step)
    if not dtype.is_floating_point:
        values = np.trunc(values)
    return tensor(values.astype(dtype.numpy), dtype=dtype, device=device, requires_grad=requires_grad)
