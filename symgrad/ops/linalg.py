"""Matrix products with PyTorch's 1-D/2-D/batched rules."""
from __future__ import annotations

import math

import jax.numpy as jnp

from symgrad.ir import matmul_shape
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import apply


def _infer(nodes):
    a, b = nodes
    if a.dtype is not b.dtype:
        raise ValueError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")
    return matmul_shape(a.shape, b.shape), a.dtype


def _grad_fn(nodes):
    ranks = tuple(len(n.shape) for n in nodes)
    named = {(1, 1): "DotBackward0", (2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 2): "SqueezeBackward4"}
    if ranks in named:
        return named[ranks]
    a, b = nodes
    shape = matmul_shape(a.shape, b.shape)
    # PyTorch copies a matrix it has to broadcast over batches (CloneBackward0), else reshapes.
    a_batch = math.prod(a.shape[:-2]) if len(a.shape) >= 2 else None
    expanded = a_batch == 1 and math.prod(shape[:-2]) > 1
    return "CloneBackward0" if expanded else "UnsafeViewBackward0"


MATMUL = register(Op("matmul", _grad_fn, _infer, lambda p, node, a, b: p.matmul(a, b),
                     reference=jnp.matmul, torch_fn=lambda t, a, b: t.matmul(a, b),
                     examples=(Example(((5,), (5, 3))), Example(((4, 5), (5, 3))), Example(((4, 5), (5,))),
                               Example(((5,), (5,))), Example(((2, 4, 5), (5, 3))),
                               Example(((2, 4, 5), (1, 5, 3))), Example(((5,), (2, 5, 3))))))


@MATMUL.publish(Names(function=("matmul",), method=("matmul", "__matmul__"), reflected=("__rmatmul__",)))
def matmul(input, other):
    return apply(MATMUL, input, other)


@MATMUL.publish(Names(function=("dot",), method=("dot",)))
def dot(input, other):
    """``torch.dot``: 1-D tensors only (``matmul`` is the general product)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return apply(MATMUL, input, other)


@MATMUL.publish(Names(function=("mm",), method=("mm",)))
def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: both arguments must be matrices, got shapes {tuple(input.shape)} and "
                           f"{tuple(mat2.shape)}")
    return apply(MATMUL, input, mat2)


def _infer_linear(nodes):
    x, weight, bias = nodes
    if x.shape[-1] != weight.shape[-1]:
        raise ValueError(f"mat1 and mat2 shapes cannot be multiplied ({x.shape[0]}x{x.shape[1]} and "
                         f"{weight.shape[1]}x{weight.shape[0]})")
    if not x.dtype is weight.dtype is bias.dtype:
        raise ValueError(f"expected m1, m2 and bias to have the same dtype, but got: {x.dtype}, {weight.dtype}, "
                         f"{bias.dtype}")
    return (x.shape[0], weight.shape[0]), x.dtype


def _build_linear(p, node, x, weight, bias):
    product = p.matmul(x, p.swap_last(weight))
    return p.assign(product + bias, node.shape, node.dtype.name, "linear")


LINEAR = register(Op("linear", "AddmmBackward0", _infer_linear, _build_linear,
                     reference=lambda x, w, b: x @ w.T + b, torch_fn=lambda t, x, w, b: t.nn.functional.linear(x, w, b),
                     examples=(Example(((2, 4), (3, 4), (3,))), Example(((5, 2), (1, 2), (1,))))))


@LINEAR.publish(Names(functional=("linear",)))
def linear(input, weight, bias=None):
    """``x @ weight.T + bias`` as PyTorch records it: one addmm for a matrix with a bias, viewed
    back for other ranks; without a bias, a matmul."""
    if bias is None:
        return matmul(input, weight.t())
    if input.ndim == 2:
        return apply(LINEAR, input, weight, bias)
    rows = input.reshape(-1, input.shape[-1]) if input.ndim else input.reshape(1, 1)
    return apply(LINEAR, rows, weight, bias).reshape(*input.shape[:-1], weight.shape[0])
