"""``torch.autograd.Variable``: the old name of a tensor that records history, kept by PyTorch for
old code.  ``Variable(t, requires_grad=...)`` is a leaf sharing ``t``'s values, and every tensor is
an instance of it."""
from __future__ import annotations

from symgrad.tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, instance):
        return isinstance(instance, Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)
