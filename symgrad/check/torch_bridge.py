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


def _rebind(fn, new_globals, closure):
    rebound = types.FunctionType(fn.__code__, new_globals, fn.__name__, fn.__defaults__, closure)
    rebound.__kwdefaults__ = fn.__kwdefaults__
    rebound.__qualname__ = fn.__qualname__
    return rebound


def on_torch(fn, torch, cls=None):
    """``fn`` running against PyTorch wherever its module says symgrad.

    ``cls``: the class a method now belongs to, so its zero-argument ``super()`` finds it."""
    swap = _counterparts(torch)
    module_globals = fn.__globals__
    new_globals = {name: swap.get(id(value), value) for name, value in module_globals.items()}
    for name, value in module_globals.items():
        if isinstance(value, types.FunctionType) and value.__globals__ is module_globals:
            new_globals[name] = _rebind(value, new_globals, value.__closure__)
    closure = fn.__closure__
    if cls is not None and "__class__" in fn.__code__.co_freevars:
        closure = tuple(types.CellType(cls) if name == "__class__" else cell
                        for name, cell in zip(fn.__code__.co_freevars, closure))
    return _rebind(fn, new_globals, closure)

