"""symgrad's public names, made from the op registry: ``torch.exp``, ``torch.nn.functional.relu``,
``Tensor.exp``, ``Tensor.__add__``, ``Tensor.add_`` ... each where its op's ``Names`` say.

An op module registers its ops and their public functions (symgrad.ops.registry); nothing else
lists them.  ``publish`` runs once, when ``symgrad`` is imported.
"""
from __future__ import annotations

import functools

from symgrad.grad_mode import _state as _grad_state
from symgrad.inplace import apply_inplace, replayed_write
from symgrad.ops.registry import REGISTRY
from symgrad.out_argument import accepting_out
from symgrad.tensor import Tensor


def publish(namespace: dict, functional) -> None:
    """Put every public function where its names say: ``namespace`` is symgrad's, ``functional``
    the ``symgrad.nn.functional`` module."""
    for op in REGISTRY.values():
        for function, names in op.public:
            for name in names.function:
                namespace[name] = accepting_out(function, name)
            for name in names.functional:
                setattr(functional, name, _taking_inplace(function, name) if names.functional_inplace else function)
            for name in names.method:
                setattr(Tensor, name, function)
            for name in names.reflected:
                setattr(Tensor, name, _reflected(function, name))
            for name in names.inplace:
                setattr(Tensor, name, _inplace(function, name, op if names.plain else None))


def _reflected(function, name):
    """``other <op> tensor``: Python calls ``tensor.__rop__(other)``."""
    def method(self, other):
        return function(other, self)
    method.__name__ = name
    return method


def _taking_inplace(function, name):
    """``F.relu(input, inplace=True)``: with ``inplace``, the result is written into ``input``."""
    @functools.wraps(function)
    def taking(input, *args, inplace: bool = False, **kwargs):
        if inplace:
            return apply_inplace(input, name, lambda: function(input, *args, **kwargs), args)
        return function(input, *args, **kwargs)
    return taking


def _inplace(function, name, op=None):
    """``tensor.op_(...)``: the result of ``function(tensor, ...)`` written into the tensor.  A
    replayed step (symgrad.replaying) checks the write at once: ``w -= lr * w.grad`` runs every
    step, and the closure ``apply_inplace`` takes costs a fifth of it.  Given the ``op`` that
    ``function`` applies to its two operands (``Names.plain``), it checks the op and the write
    together, without a result for the op."""
    @functools.wraps(function)
    def method(self, *args, **kwargs):
        cycle = _grad_state.cycle
        if cycle is not None and cycle.replaying:
            if op is not None and len(args) == 1 and not kwargs and cycle.update(op, self, (self, *args)):
                return self
            result = function(self, *args, **kwargs)
            if replayed_write(cycle, self, result):
                return self  # (else it fell back: the usual path writes what was computed)
            return apply_inplace(self, name, lambda: result, (*args, *kwargs.values()))
        return apply_inplace(self, name, lambda: function(self, *args, **kwargs), (*args, *kwargs.values()))
    method.__name__ = name
    return method
