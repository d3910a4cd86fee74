"""Tensor's operator overloads and methods: each one line into an op function."""
from __future__ import annotations

from symgrad import dtypes
from symgrad.grad_mode import is_grad_enabled
from symgrad.nn import functional as F
from symgrad.ops import elementwise as E
from symgrad.ops import linalg as L
from symgrad.ops import reductions as R
from symgrad.ops import shape as S
from symgrad.tensor import Tensor, _write_values, apply, apply_inplace, fill_inplace, record


def _to(self, *args, **kwargs):
    """``to(dtype)`` / ``to(device)`` / ``to(other)``: only dtype conversions do anything here."""
    target = kwargs.get("dtype")
    for a in args:
        if isinstance(a, dtypes.dtype):
            target = a
        elif isinstance(a, Tensor):
            target = a.dtype
    return S.to_dtype(self, target) if target is not None else self


def _assign(self, src):
    """``copy_``: the tensor takes src's values (and, under grad mode, its history)."""
    node = self._node
    if is_grad_enabled() and node.requires_grad and node.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if tuple(src.shape) != tuple(self.shape):
        src = S.expand(src, *self.shape)
    new = S.copy(S.to_dtype(src, self.dtype))._node
    if new.requires_grad:
        self._rebind(new)
    elif is_grad_enabled() and node.requires_grad:  # recorded: the old values' history gets no gradient
        self._rebind(record(S.COPY_OVER, (node, new)))
    else:
        _write_values(self, new)
    return self


def _setitem(self, key, value):
    raise NotImplementedError("indexed assignment (x[i] = v) is not supported yet; build the tensor "
                              "out of place (for example with torch.where once it exists) instead")


METHODS = {
    "__add__": lambda a, b: apply(E.ADD, a, b),
    "__radd__": lambda a, b: apply(E.ADD, a, b),
    "__sub__": lambda a, b: apply(E.SUB, a, b),
    "__rsub__": lambda a, b: apply(E.RSUB, a, b),
    "__mul__": lambda a, b: apply(E.MUL, a, b),
    "__rmul__": lambda a, b: apply(E.MUL, a, b),
    "__truediv__": lambda a, b: apply(E.DIV, a, b),
    "__rtruediv__": lambda a, b: apply(E.RDIV, a, b),
    "__pow__": lambda a, b: E.pow(a, b),
    "__rpow__": lambda a, b: E.pow(b, a),
    "__matmul__": lambda a, b: L.matmul(a, b),
    "__rmatmul__": lambda a, b: L.matmul(b, a),
    "__neg__": lambda a: E.neg(a),
    "__pos__": lambda a: a,
    "__abs__": lambda a: E.abs(a),
    "__iadd__": lambda a, b: apply_inplace(a, E.ADD, b),
    "__isub__": lambda a, b: apply_inplace(a, E.SUB, b),
    "__imul__": lambda a, b: apply_inplace(a, E.MUL, b),
    "__itruediv__": lambda a, b: apply_inplace(a, E.DIV, b),
    "add": E.add, "sub": E.sub, "mul": E.mul, "div": E.div, "pow": E.pow, "neg": E.neg,
    "exp": E.exp, "log": E.log, "sqrt": E.sqrt, "sin": E.sin, "cos": E.cos, "tanh": E.tanh,
    "sigmoid": E.sigmoid, "relu": E.relu, "abs": E.abs, "square": E.square,
    "maximum": E.maximum, "minimum": E.minimum,
    "add_": lambda a, b, alpha=1: apply_inplace(a, E.ADD, b if alpha == 1 else E.mul(b, alpha)),
    "sub_": lambda a, b, alpha=1: apply_inplace(a, E.SUB, b if alpha == 1 else E.mul(b, alpha)),
    "mul_": lambda a, b: apply_inplace(a, E.MUL, b),
    "div_": lambda a, b: apply_inplace(a, E.DIV, b),
    "zero_": lambda a: fill_inplace(a, 0, "ZeroBackward0"),
    "fill_": lambda a, value: fill_inplace(a, value),
    "copy_": _assign,
    "sum": R.sum, "mean": R.mean, "max": R.max, "amax": R.amax, "logsumexp": R.logsumexp,
    "matmul": L.matmul, "mm": L.mm, "dot": L.dot,
    "reshape": S.reshape, "view": S.reshape, "flatten": S.flatten, "unsqueeze": S.unsqueeze,
    "squeeze": S.squeeze, "permute": S.permute, "transpose": S.transpose, "t": S.t,
    "expand": S.expand, "clone": S.clone,
    "to": _to,
    "float": lambda a: S.to_dtype(a, dtypes.float32),
    "double": lambda a: S.to_dtype(a, dtypes.float64),
    "long": lambda a: S.to_dtype(a, dtypes.int64),
    "int": lambda a: S.to_dtype(a, dtypes.int32),
    "bool": lambda a: S.to_dtype(a, dtypes.bool_),
    "softmax": F.softmax, "log_softmax": F.log_softmax,
    "cpu": lambda a: a,
    "__gt__": E.gt, "__ge__": E.ge, "__lt__": E.lt, "__le__": E.le, "__eq__": E.eq, "__ne__": E.ne,
    "gt": E.gt, "ge": E.ge, "lt": E.lt, "le": E.le, "eq": E.eq, "ne": E.ne,
    "where": lambda a, condition, other: E.where(condition, a, other),
    "__getitem__": S.getitem,
    "__setitem__": _setitem,
    "T": property(S.matrix_transpose),
    "mT": property(lambda a: S.transpose(a, -2, -1)),
}


def attach() -> None:
    for name, method in METHODS.items():
        setattr(Tensor, name, method)


attach()
