"""Running a function written for ``import symgrad as torch`` on the real PyTorch.

The function's module-level names that refer to symgrad modules are pointed at their
PyTorch counterparts; functions of the same module that it calls are rebound the same way,
so helpers work too.  Tensors captured in closures are not converted.
"""
from __future__ import annotations

import types


def _counterparts(torch):
    import symgrad
    return {id(symgrad): torch, id(symgrad.nn): torch.nn, id(symgrad.nn.functional): torch.nn.functional,
            id(symgrad.autograd): torch.autograd}


def _rebind(fn, new_globals):
    rebound = types.FunctionType(fn.__code__, new_globals, fn.__name__, fn.__defaults__, fn.__closure__)
    rebound.__kwdefaults__ = fn.__kwdefaults__
    return rebound


def on_torch(fn, torch):
    """``fn`` running against PyTorch wherever its module says symgrad."""
    swap = _counterparts(torch)
    module_globals = fn.__globals__
    new_globals = {name: swap.get(id(value), value) for name, value in module_globals.items()}
    for name, value in module_globals.items():
        if isinstance(value, types.FunctionType) and value.__globals__ is module_globals:
            new_globals[name] = _rebind(value, new_globals)
    return _rebind(fn, new_globals)
