"""A symgrad ``nn.Module`` rebuilt under the real PyTorch, with the same weights.

The torch engine of a cross-check must run the *same model*, not our reading of it: a built-in
layer becomes PyTorch's own class (built from the attributes PyTorch's constructor asks for),
and a user's class becomes a copy of that class whose bases are PyTorch's and whose methods see
``torch`` wherever their module says ``symgrad`` (as ``torch_bridge`` does for functions).
Parameters, buffers and the train/eval flag are copied; PyTorch's random initialisation is
overwritten.
"""
from __future__ import annotations

import inspect
import types
from collections import OrderedDict

import numpy as np

from symgrad import nn
from symgrad.check.torch_bridge import on_torch
from symgrad.tensor import Tensor

_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")
_OWN = frozenset(("training", "_parameters", "_buffers", "_non_persistent", "_modules",
                  "_forward_pre_hooks", "_forward_hooks"))


def torch_module(module, torch):
    """``module`` as a ``torch.nn.Module`` of the matching classes, holding copies of its values."""
    cls = type(module)
    if _is_builtin(cls, nn):
        result = _builtin(module, cls.__name__, torch)
    else:
        twin = _user_class(cls, torch, {})
        result = twin.__new__(twin)
        torch.nn.Module.__init__(result)
        for name, value in module.__dict__.items():
            if name not in _OWN:
                object.__setattr__(result, name, _torch_value(value, torch))
        for name, child in module._modules.items():
            setattr(result, name, None if child is None else torch_module(child, torch))
        for name, value in module._parameters.items():
            setattr(result, name, None if value is None else torch.nn.Parameter(_tensor(value, torch),
                                                                              value.requires_grad))
        for name, value in module._buffers.items():
            result.register_buffer(name, None if value is None else _tensor(value, torch),
                                   persistent=name not in module._non_persistent)
    result.train(module.training)
    return result


def _is_builtin(cls, nn) -> bool:
    return cls.__module__.startswith("symgrad.nn.") and getattr(nn, cls.__name__, None) is cls


def _builtin(module, name: str, torch):
    """PyTorch's class of the same name, constructed from the attributes its signature names."""
    if not hasattr(torch.nn, name):
        raise TypeError(f"crosscheck: torch.nn has no {name}; cannot run this module under PyTorch")
    cls = getattr(torch.nn, name)
    if name == "Sequential":
        return cls(OrderedDict((k, torch_module(m, torch)) for k, m in module._modules.items()))
    if name == "ModuleList":
        return cls([torch_module(m, torch) for m in module._modules.values()])
    if name == "ModuleDict":
        return cls({k: torch_module(m, torch) for k, m in module._modules.items()})
    kwargs = {}
    for parameter in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if parameter.name in ("device", "dtype") or parameter.kind in (parameter.VAR_POSITIONAL,
                                                                       parameter.VAR_KEYWORD):
            continue
        if parameter.name in module._parameters or (hasattr(module, parameter.name) and
                                                     isinstance(parameter.default, bool) and
                                                     not isinstance(getattr(module, parameter.name), bool)):
            kwargs[parameter.name] = getattr(module, parameter.name, None) is not None  # bias=True/False
        elif hasattr(module, parameter.name):
            kwargs[parameter.name] = getattr(module, parameter.name)
        elif parameter.default is parameter.empty:
            raise TypeError(f"crosscheck: cannot rebuild {name} under PyTorch: it has no attribute "
                            f"{parameter.name!r}")
    result = cls(**kwargs).double()
    result.load_state_dict({k: _tensor(v, torch) for k, v in module.state_dict().items()})
    for k, v in module._parameters.items():
        if v is not None:
            getattr(result, k).requires_grad_(v.requires_grad)
    return result


def _user_class(cls, torch, made: dict):
    """``cls`` again, with PyTorch bases and methods that see ``torch`` for ``symgrad``."""
    if cls is nn.Module:
        return torch.nn.Module
    if _is_builtin(cls, nn):
        return getattr(torch.nn, cls.__name__)
    if cls in made:
        return made[cls]
    if cls is object:
        return object
    bases = tuple(_user_class(b, torch, made) for b in cls.__bases__)
    namespace = {k: v for k, v in cls.__dict__.items()
                 if k not in ("__dict__", "__weakref__") and not _is_function_like(v)}
    twin = made[cls] = types.new_class(cls.__name__, bases, exec_body=lambda ns: ns.update(namespace))
    twin.__qualname__ = cls.__qualname__
    for name, value in cls.__dict__.items():
        if _is_function_like(value):
            setattr(twin, name, _method_on_torch(value, twin, torch))
    return twin


def _is_function_like(value) -> bool:
    return isinstance(value, (types.FunctionType, staticmethod, classmethod, property))


def _method_on_torch(value, twin, torch):
    if isinstance(value, types.FunctionType):
        return on_torch(value, torch, cls=twin)
    if isinstance(value, (staticmethod, classmethod)):
        return type(value)(on_torch(value.__func__, torch, cls=twin))
    return property(*(None if f is None else on_torch(f, torch, cls=twin)
                      for f in (value.fget, value.fset, value.fdel)))


def _torch_value(value, torch):
    if isinstance(value, Tensor):
        return _tensor(value, torch)
    return value


def _tensor(value: Tensor, torch):
    array = np.asarray(value.detach().numpy())
    return torch.tensor(array.astype(np.float64) if array.dtype.kind == "f" else array)
