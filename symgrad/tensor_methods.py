"""Tensor methods that are no op's public function: conversions, in-place fills, properties.

The ops' own methods (``exp``, ``__add__``, ``add_`` ...) come from the registry
(symgrad.namespace); these are the rest.
"""
from __future__ import annotations

from symgrad import creation, devices, dtypes
from symgrad.inplace import copy_, data, fill_inplace
from symgrad.ops import shape as S
from symgrad.tensor import Tensor


def _to(self, *args, **kwargs):
    """``to(dtype)`` / ``to(device)`` / ``to(other)``: a device must be one JAX has (symgrad.devices:
    never a silent CPU tensor for "cuda"); the tensors live on the CPU, so a dtype is the change."""
    target = kwargs.get("dtype")
    if kwargs.get("device") is not None:
        devices.check(kwargs["device"])
    for a in args:
        if isinstance(a, dtypes.dtype):
            target = a
        elif isinstance(a, Tensor):
            target = a.dtype
        elif a is not None:
            devices.check(a)
    return S.to_dtype(self, target) if target is not None else self


METHODS = {
    "__pos__": lambda a: a,
    "zero_": lambda a: fill_inplace(a, 0, "ZeroBackward0"),
    "fill_": lambda a, value: fill_inplace(a, value),
    "copy_": copy_,
    "data": data,
    "to": _to,
    "float": lambda a: S.to_dtype(a, dtypes.float32),
    "double": lambda a: S.to_dtype(a, dtypes.float64),
    "long": lambda a: S.to_dtype(a, dtypes.int64),
    "int": lambda a: S.to_dtype(a, dtypes.int32),
    "bool": lambda a: S.to_dtype(a, dtypes.bool_),
    "cpu": lambda a: a,
    "cuda": lambda a, device=None: _to(a, device if device is not None else "cuda"),
    "is_cuda": property(lambda a: False),
    "uniform_": creation.uniform_, "normal_": creation.normal_, "random_": creation.random_,
    "exponential_": creation.exponential_, "bernoulli_": creation.bernoulli_, "bernoulli": creation.bernoulli,
    "T": property(S.matrix_transpose),
    "mT": property(lambda a: S.transpose(a, -2, -1)),
}


def attach() -> None:
    for name, method in METHODS.items():
        setattr(Tensor, name, method)


attach()
