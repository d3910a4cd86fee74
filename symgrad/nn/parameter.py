"""``torch.nn.parameter``: ``Parameter``, and the placeholders a lazy module holds until its first
call tells it their shapes: ``UninitializedParameter`` and ``UninitializedBuffer``.

A placeholder knows its dtype, device and ``requires_grad`` but not its shape: any op given one
refuses it with PyTorch's ValueError.  Every op reaches a tensor's values through its graph node
(``_node``), so the placeholder guards that one door; ``materialize`` gives it a node of the
shape found and turns it into an ordinary Parameter (Tensor), the same object (a module, an
optimizer, a user may hold it).
"""
from __future__ import annotations

import sys

from symgrad import creation, devices, dtypes
from symgrad.nn.module import Parameter
from symgrad.nodes import constant, lazy_leaf
from symgrad.tensor import Tensor, _relabel

__all__ = ["Parameter", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]

_NODE = Tensor.__dict__["_node"]  # the slot holding a tensor's node, under the guard


def _entry_point() -> str:
    """The symgrad function the user's code called (the outermost symgrad frame on the stack),
    which is what PyTorch names in its message."""
    frame, entry = sys._getframe(2), None
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("symgrad"):
            entry = frame
        elif entry is not None:
            break
        frame = frame.f_back
    return f"<function {entry.f_code.co_qualname}>" if entry is not None else "<unknown>"


class UninitializedTensorMixin:
    """What the two placeholders share: the guarded node, the attributes that stay readable, and
    ``materialize``."""

    __slots__ = ()
    cls_to_become: type

    @property
    def _node(self):
        raise ValueError(f"Attempted to use an uninitialized parameter in {_entry_point()}. This error happens when "
                         f"you are using a `LazyModule` or explicitly manipulating "
                         f"`torch.nn.parameter.{type(self).__name__}` objects. When using LazyModules Call `forward` "
                         f"with a dummy batch to initialize the parameters before calling torch functions")

    @_node.setter
    def _node(self, node):
        _NODE.__set__(self, node)

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Take the shape (and dtype) found, with zeros the module's initialisation overwrites, and
        become the ordinary class."""
        devices.check(device)
        placeholder = _NODE.__get__(self)
        zeros = lazy_leaf(constant(0.0, tuple(shape), dtype or placeholder.dtype))
        Tensor.__init__(self, _relabel(zeros, placeholder.requires_grad))
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually happens "
                           "in `load_state_dict` when trying to load an uninitialized parameter into an initialized "
                           "one. Call `forward` to initialize the parameters before accessing their attributes.")

    @property
    def requires_grad(self) -> bool:
        return _NODE.__get__(self).requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool):  # (``requires_grad_``, a function, refuses a placeholder, as PyTorch's)
        _NODE.__set__(self, _relabel(_NODE.__get__(self), bool(flag)))

    @property
    def dtype(self):
        return _NODE.__get__(self).dtype

    @property
    def ndim(self) -> int:
        return 1  # of the empty tensor standing in, as PyTorch's

    def size(self, dim=None):
        return dtypes.Size((0,)) if dim is None else dtypes.size_at((0,), dim)

    def is_floating_point(self) -> bool:
        return _NODE.__get__(self).dtype.is_floating_point

    @property
    def is_leaf(self) -> bool:
        return True

    @property
    def grad(self):
        return self._grad

    @property
    def data(self) -> Tensor:
        return Tensor(lazy_leaf(_NODE.__get__(self)))

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape the first call of its lazy module decides."""

    __slots__ = ()
    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        devices.check(device)
        super().__init__(creation.empty(0, dtype=dtype), requires_grad)

    def __deepcopy__(self, memo):
        copied = memo[id(self)] = type(self)(self.requires_grad, dtype=self.dtype)
        return copied


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer (running statistics) whose shape the first call of its lazy module decides."""

    __slots__ = ()
    cls_to_become = Tensor

    def __init__(self, requires_grad: bool = False, device=None, dtype=None):
        devices.check(device)
        super().__init__(_relabel(creation.empty(0, dtype=dtype)._node, requires_grad))

    def __deepcopy__(self, memo):
        copied = memo[id(self)] = type(self)(self.requires_grad, dtype=self.dtype)
        return copied


def is_lazy(param) -> bool:
    """Whether ``param`` is a placeholder still waiting for its shape."""
    return isinstance(param, UninitializedTensorMixin)
