"""Matrix products with PyTorch's 1-D/2-D/batched rules, einsum and the cross product."""
from __future__ import annotations

import math
import warnings

import jax.numpy as jnp
import sympy as sp

from symgrad import dtypes
from symgrad.ir import broadcast_shapes, ieee, matmul_shape
from symgrad.ir.linalg import LETTERS, Einsum, einsum_sizes, emit, label_name
from symgrad.ops.dims import dim_index
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


def _infer_bmm(nodes):
    a, b = nodes
    if len(a.shape) != 3:
        raise ValueError("batch1 must be a 3D tensor")
    if len(b.shape) != 3:
        raise ValueError("batch2 must be a 3D tensor")
    if b.shape[:2] != (a.shape[0], a.shape[2]):
        raise ValueError(f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, {a.shape[2]}] "
                         f"but got: [{b.shape[0]}, {b.shape[1]}].")
    return _infer(nodes)


BMM = register(Op("bmm", "BmmBackward0", _infer_bmm, lambda p, node, a, b: p.matmul(a, b),
                  reference=jnp.matmul, torch_fn=lambda t, a, b: t.bmm(a, b),
                  examples=(Example(((2, 3, 4), (2, 4, 5))), Example(((1, 2, 1), (1, 1, 3))))))


@BMM.publish(Names(function=("bmm",), method=("bmm",)))
def bmm(input, mat2):
    return apply(BMM, input, mat2)


@MATMUL.publish(Names(function=("mv",), method=("mv",)))
def mv(input, vec):
    """``torch.mv``: a matrix and a vector (MvBackward0, as ``matmul`` records it)."""
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat ({input.shape[0]}x{input.shape[1]}), "
                           f"vec ({vec.shape[0]})")
    return apply(MATMUL, input, vec)


@MATMUL.publish(Names(function=("outer", "ger"), method=("outer", "ger")))
def outer(input, vec2):
    """``input[:, None] * vec2``, composed as PyTorch composes it (MulBackward0)."""
    for name, v in (("self", input), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return input.reshape(-1, 1) * vec2


# ------------------------------------------------------------------------------- einsum


def _einsum_grad_fn(nodes, inputs, output):
    """The node PyTorch's einsum ends in: a sum or a permute for one operand; for more, the view
    after a contraction, or a product when nothing is summed."""
    summed = set().union(*map(set, inputs)) - set(output)
    if len(nodes) == 1:
        return "SumBackward1" if summed else "PermuteBackward0"
    return "ViewBackward0" if summed else "MulBackward0"


def _infer_einsum(nodes, inputs, output):
    """PyTorch contracts one dtype only, but an einsum that sums nothing is its products, promoted."""
    dtype = nodes[0].dtype
    contracts = bool(set().union(*map(set, inputs)) - set(output))
    for n in nodes[1:]:
        if n.dtype is not dtype and contracts:
            raise ValueError(f"expected scalar type {dtypes.torch_name(dtype).capitalize()} but found "
                             f"{dtypes.torch_name(n.dtype).capitalize()}")
    dtype = dtypes.promote([(n.dtype, 2) for n in nodes])
    sizes = einsum_sizes(inputs, [n.shape for n in nodes])
    return tuple(sizes[label] for label in output), dtype


def _build_einsum(p, node, *arrays):
    inputs, output = node.attrs
    arrays = [p.astype(a, node.dtype.name) for a in arrays]
    return emit(p, Einsum, *arrays, sp.Tuple(*(sp.Tuple(*s) for s in inputs)), sp.Tuple(*output), hint="einsum")


def _reference_einsum(*args):
    *arrays, inputs, output = args
    letters = lambda labels: "".join(LETTERS[i] for i in labels)  # noqa: E731
    return jnp.einsum(",".join(map(letters, inputs)) + "->" + letters(output), *arrays)


def _torch_einsum(t, *args):
    *arrays, inputs, output = args
    letters = lambda labels: "".join(LETTERS[i] for i in labels)  # noqa: E731
    return t.einsum(",".join(map(letters, inputs)) + "->" + letters(output), *arrays)


EINSUM = register(Op(
    "einsum", _einsum_grad_fn, _infer_einsum, _build_einsum, reference=_reference_einsum, torch_fn=_torch_einsum,
    examples=(Example(((3, 4), (4, 5)), ((((0, 1), (1, 2))), (0, 2))),
              Example(((3, 4), (4, 5)), (((0, 1), (1, 2)), (2, 0))),
              Example(((2, 3, 4), (2, 4, 5)), (((0, 1, 2), (0, 2, 3)), (0, 1, 3))),
              Example(((3, 4), (4,)), (((0, 1), (1,)), (1, 0))),
              Example(((3, 4),), (((0, 1),), (1,))),
              Example(((3, 4),), (((0, 1),), (1, 0))),
              Example(((3, 1), (1, 4), (4, 2)), (((0, 1), (1, 2), (2, 3)), (0, 3))),
              Example(((4,), (3, 4)), (((1,), (0, 1)), ())))))


def _parse_einsum(equation: str, shapes):
    """PyTorch's einsum equation as labels per operand and for the output (integers: A-Z 0-25,
    a-z 26-51, the ellipsis's axes 52 on, aligned from the right as broadcasting aligns them)."""
    equation = equation.replace(" ", "")
    left, arrow, right = equation.partition("->")
    terms = left.split(",")
    if len(terms) > len(shapes):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    ellipsis_rank = max([len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t] or [0])
    inputs = [_labels(term, shape, k, ellipsis_rank) for k, (term, shape) in enumerate(zip(terms, shapes))]
    if arrow:
        output = _labels(right, None, None, ellipsis_rank)
        for label in output:
            if not any(label in labels for labels in inputs):
                raise RuntimeError(f"einsum(): output subscript {label_name(label)} does not appear in the equation "
                                   "for any input operand")
    else:
        counts = {}
        for labels in inputs:
            for label in labels:
                counts[label] = counts.get(label, 0) + 1
        ellipsis = tuple(range(52 + 0, 52 + ellipsis_rank)) if "..." in left else ()
        output = ellipsis + tuple(sorted(label for label, n in counts.items() if n == 1 and label < 52))
    for k, labels in enumerate(inputs):
        if len(set(labels)) != len(labels):
            raise NotImplementedError(f"einsum(): operand {k} repeats a subscript (a diagonal); symgrad does not "
                                      "support that")
    return tuple(inputs), tuple(output)


def _labels(term, shape, operand, ellipsis_rank):
    labels = []
    before, dots, after = term.partition("...")
    for part in (before, "..." if dots else "", after):
        if part == "...":
            rank = len(shape) - len(before) - len(after) if shape is not None else ellipsis_rank
            labels += range(52 + ellipsis_rank - rank, 52 + ellipsis_rank)
            continue
        for c in part:
            if not c.isalpha() or not c.isascii():
                raise RuntimeError(f"einsum(): invalid subscript given at index {term.index(c)} in the equation "
                                   f"string, subscripts must be in [a-zA-Z]")
            labels.append(ord(c) - ord("A") if c.isupper() else ord(c) - ord("a") + 26)
    if shape is not None and not dots and len(labels) != len(shape):
        raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(labels)}) does not match the "
                           f"number of dimensions ({len(shape)}) for operand {operand} and no ellipsis was given")
    if shape is not None and dots and len(labels) > len(shape):
        raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(labels)}) is more than the "
                           f"number of dimensions ({len(shape)}) for operand {operand}")
    return tuple(labels)


@EINSUM.publish(Names(function=("einsum",)))
def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    inputs, output = _parse_einsum(equation, [tuple(o.shape) for o in operands])
    return apply(EINSUM, *operands, attrs=(inputs, output))


# -------------------------------------------------------------------------------- cross


def _infer_cross(nodes, dim):
    a, b = nodes
    if a.dtype is not b.dtype:
        raise ValueError(f"expected scalar type {dtypes.torch_name(a.dtype).capitalize()} but found "
                         f"{dtypes.torch_name(b.dtype).capitalize()}")
    if len(a.shape) != len(b.shape):
        raise ValueError("linalg.cross: inputs must have the same number of dimensions.")
    shape = broadcast_shapes(a.shape, b.shape)
    if a.shape[dim] != 3 or b.shape[dim] != 3:
        raise ValueError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[dim]} and "
                         f"{b.shape[dim]}")
    return shape, a.dtype


def _build_cross(p, node, a, b):
    """Each component ``a[j] b[k] - a[k] b[j]``, written unevaluated (at cross(x, x) it is 0 only
    where x is finite), joined along ``dim``."""
    (dim,), shape, dtype = node.attrs, node.shape, node.dtype.name
    a, b = p.broadcast_to(a, shape), p.broadcast_to(b, shape)

    def component(x, i):
        spec = [(1, 0, n, 1) for n in shape]
        spec[dim] = (1, i, i + 1, 1)
        return p.index(x, spec)

    parts = [p.assign(ieee.unevaluated(lambda u, v, w, z: u * v - w * z, component(a, j), component(b, k),
                                       component(a, k), component(b, j)), p.shape_of(component(a, 0)), dtype, "cross")
             for j, k in ((1, 2), (2, 0), (0, 1))]
    return p.concatenate(parts, dim, shape, dtype)


CROSS = register(Op("cross", "LinalgCrossBackward0", _infer_cross, _build_cross,
                    reference=lambda a, b, dim: jnp.cross(a, b, axis=dim),
                    torch_fn=lambda t, a, b, dim: t.linalg.cross(a, b, dim=dim),
                    examples=(Example(((4, 3), (4, 3)), (1,)), Example(((3, 2), (3, 1)), (0,)),
                              Example(((3,), (3,)), (0,)))))


@CROSS.publish(Names(function=("cross",), method=("cross",)))
def cross(input, other, dim=None):
    """``torch.cross``: without ``dim``, the first axis of size 3 (PyTorch warns that this will change)."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        shape = broadcast_shapes(tuple(input.shape), tuple(other.shape))
        dim = next((i for i, n in enumerate(shape) if n == 3), -1)
    return apply(CROSS, input, other, attrs=(dim_index(dim, max(input.ndim, other.ndim)),))
