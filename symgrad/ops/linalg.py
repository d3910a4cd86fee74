"""Matrix products with PyTorch's 1-D/2-D/batched rules, einsum, the cross product, and the
factorizations (inverse, determinants, solves, Cholesky, QR, eigh, SVD) with PyTorch's errors."""
from __future__ import annotations

import collections
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes, engine
from symgrad.ir import broadcast_shapes, ieee, matmul_shape, rerouted
from symgrad.ir.linalg import (LETTERS, Cholesky, Det, Einsum, Eigh, Inverse, Qr, SlogDet, Solve, Svd, einsum_sizes,
                               emit, label_name, triangular_solve)
from symgrad.nodes import Folded, leaf
from symgrad.ops.dims import dim_index, normalize_dims
from symgrad.ops.elementwise import where
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.ops.shape import UNSAFE_VIEW, refuse_expand
from symgrad.tensor import Tensor, apply


def _infer(nodes):
    a, b = nodes
    if a.dtype is not b.dtype:
        raise ValueError(f"expected m1 and m2 to have the same dtype, but got: {dtypes.type_id(a.dtype)} != "
                         f"{dtypes.type_id(b.dtype)}")
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


def _shown_inputs(inputs):
    """PyTorch's matmul of a vector by a matrix, or of a batch by a matrix or a vector, records a
    view of the first operand and an ``mm`` (``mv``) under the result's view, and of two batches
    alike a ``bmm`` of their views; a broadcast batch is shown as one node."""
    a, b = inputs
    ranks = len(a.shape), len(b.shape)
    if ranks == (1, 2):
        return (Folded("MmBackward0", (Folded("UnsqueezeBackward0", (a,)), b)),)
    if ranks[0] >= 3 and ranks[1] <= 2:
        return (Folded("MvBackward0" if ranks[1] == 1 else "MmBackward0", (Folded("ViewBackward0", (a,)), b)),)
    if ranks[0] == ranks[1] >= 3 and a.shape[:-2] == b.shape[:-2]:
        return (Folded("BmmBackward0", tuple(Folded("ViewBackward0", (Folded("ExpandBackward0", (x,)),)) for x in inputs)),)
    return inputs


MATMUL = register(Op("matmul", _grad_fn, _infer, lambda p, node, a, b: p.matmul(a, b), shown_inputs=_shown_inputs,
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
                     shown_inputs=lambda inputs: (inputs[2], inputs[0], Folded("TBackward0", (inputs[1],))),
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


def _infer_addmm(nodes, beta, alpha):
    input, mat1, mat2 = nodes
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if len(m.shape) != 2:
            raise ValueError(f"{name} must be a matrix, got {len(m.shape)}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise ValueError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
                         f"{mat2.shape[0]}x{mat2.shape[1]})")
    shape = (mat1.shape[0], mat2.shape[1])
    refuse_expand(input.shape, shape, input.dtype)
    for m in (mat1, mat2):
        if m.dtype is not input.dtype:
            names = [dtypes.torch_name(n.dtype).capitalize() for n in (input, m)]
            raise ValueError(f"self and mat2 must have the same dtype, but got {names[0]} and {names[1]}")
    if input.dtype is dtypes.bool_:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    return shape, input.dtype


def _build_addmm(p, node, input, mat1, mat2):
    """``beta * input + alpha * (mat1 @ mat2)`` (``scaled_sum``)."""
    beta, alpha = node.attrs
    return p.assign(scaled_sum(beta, input, alpha, p.matmul(mat1, mat2)), node.shape, node.dtype.name, "addmm")


def scaled_sum(beta, input, alpha, product):
    """``beta * input + alpha * product`` as PyTorch's kernels: a factor of 1 is no multiplication, and a
    ``beta`` of 0 leaves input's values out (its NaN and inf too), while its gradient is still
    ``0 * g`` (NaN for a NaN or infinite cotangent), as PyTorch's backward gives it."""
    product = _scaled(alpha, product)
    if beta == 0:
        return rerouted(product, ieee.unevaluated(lambda m, i: m + sp.S.Zero * i, product, input))
    return ieee.unevaluated(lambda x, y: x + y, _scaled(beta, input), product)


def _scaled(factor, x):
    return x if factor == 1 else ieee.unevaluated(lambda f, y: f * y, ieee.constant(factor), x)


ADDMM = register(Op("addmm", "AddmmBackward0", _infer_addmm, _build_addmm,
                    reference=lambda i, a, b, beta, alpha: beta * i + alpha * (a @ b),
                    torch_fn=lambda t, i, a, b, beta, alpha: t.addmm(i, a, b, beta=beta, alpha=alpha),
                    examples=(Example(((3,), (2, 4), (4, 3)), (1, 1)), Example(((2, 3), (2, 4), (4, 3)), (0.5, -2.0)),
                              Example(((2, 1), (2, 4), (4, 3)), (0, 1)), Example(((), (2, 4), (4, 3)), (1, 3.0)))))


@ADDMM.publish(Names(function=("addmm",), method=("addmm",), inplace=("addmm_",)))
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` (AddmmBackward0); integer tensors take the
    factors' integer parts, as PyTorch's kernel does."""
    integral = not input.dtype.is_floating_point
    beta, alpha = (int(beta), int(alpha)) if integral else (float(beta), float(alpha))
    return apply(ADDMM, input, mat1, mat2, attrs=(beta, alpha))


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


def _infer_batched_sum(name):
    """baddbmm's and addbmm's rules: batches of matrices that multiply, and an input that expands to
    the result (a batch of products, or their sum)."""
    def infer(nodes, beta, alpha):
        input, a, b = nodes
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"batch1 and batch2 must have same number of batches, got {a.shape[0]} and {b.shape[0]}")
        if b.shape[1] != a.shape[2]:
            raise ValueError(f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, "
                             f"{a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
        if not input.dtype is a.dtype is b.dtype:
            raise ValueError(f"Input dtypes must be the same, got: input {input.dtype.name}, batch1: {a.dtype.name}, "
                             f"batch2: {b.dtype.name}".replace("float32", "float").replace("float64", "double"))
        shape = (a.shape[1], b.shape[2]) if name == "addbmm" else (a.shape[0], a.shape[1], b.shape[2])
        refuse_expand(input.shape, shape, input.dtype)
        return shape, input.dtype
    return infer


def _build_scaled_sum(product):
    """``beta * input + alpha * product(a, b)`` (``scaled_sum``)."""
    def build(p, node, input, a, b):
        beta, alpha = node.attrs
        return p.assign(scaled_sum(beta, input, alpha, product(p, a, b)), node.shape, node.dtype.name, node.op.name)
    return build


BADDBMM = register(Op("baddbmm", "BaddbmmBackward0", _infer_batched_sum("baddbmm"),
                      _build_scaled_sum(lambda p, a, b: p.matmul(a, b)),
                      reference=lambda i, a, b, beta, alpha: beta * i + alpha * (a @ b),
                      torch_fn=lambda t, i, a, b, beta, alpha: t.baddbmm(i, a, b, beta=beta, alpha=alpha),
                      examples=(Example(((2, 3, 5), (2, 3, 4), (2, 4, 5)), (1, 1)),
                                Example(((5,), (2, 3, 4), (2, 4, 5)), (0.5, -2.0)),
                                Example(((3, 1), (2, 3, 4), (2, 4, 5)), (0, 1)))))
ADDBMM = register(Op("addbmm", "AddbmmBackward0", _infer_batched_sum("addbmm"),
                     _build_scaled_sum(lambda p, a, b: p.reduce_sum(p.matmul(a, b), (0,), False)),
                     reference=lambda i, a, b, beta, alpha: beta * i + alpha * (a @ b).sum(0),
                     torch_fn=lambda t, i, a, b, beta, alpha: t.addbmm(i, a, b, beta=beta, alpha=alpha),
                     examples=(Example(((3, 5), (2, 3, 4), (2, 4, 5)), (1, 1)),
                               Example(((), (2, 3, 4), (2, 4, 5)), (2.0, 0.5)))))


def _batches_of(name, *tensors):
    """PyTorch reads size(2) of each batch first: fewer dims is its IndexError, more its RuntimeError."""
    for label, t in zip(("batch1", "batch2"), tensors):
        if t.ndim < 3:
            rank = max(t.ndim, 1)
            raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got 2)")
        if t.ndim > 3:
            raise RuntimeError(f"{label} must be a 3D tensor")


def _factors(input, beta, alpha):
    integral = not input.dtype.is_floating_point
    return (int(beta), int(alpha)) if integral else (float(beta), float(alpha))


@BADDBMM.publish(Names(function=("baddbmm",), method=("baddbmm",), inplace=("baddbmm_",)))
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * (batch1 @ batch2)``, a batch of products (BaddbmmBackward0)."""
    _batches_of("baddbmm", batch1, batch2)
    return apply(BADDBMM, input, batch1, batch2, attrs=_factors(input, beta, alpha))


@ADDBMM.publish(Names(function=("addbmm",), method=("addbmm",), inplace=("addbmm_",)))
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])`` (AddbmmBackward0)."""
    _batches_of("addbmm", batch1, batch2)
    return apply(ADDBMM, input, batch1, batch2, attrs=_factors(input, beta, alpha))


def _infer_addmv(nodes, beta, alpha):
    input, mat, vec = nodes
    if len(mat.shape) != 2 or len(vec.shape) != 1 or mat.shape[1] != vec.shape[0] or (
            input.shape and input.shape[-1] not in (1, mat.shape[0])) or len(input.shape) > 1:
        shape = "x".join(map(str, mat.shape))
        raise ValueError(f"size mismatch, got input ({', '.join(map(str, input.shape))}), mat ({shape}), "
                         f"vec ({', '.join(map(str, vec.shape))})")
    if not input.dtype is mat.dtype is vec.dtype:
        names = [dtypes.torch_name(n.dtype).removesuffix("Tensor") for n in nodes]
        raise ValueError(f"addmv input tensors must have the same dtype, but got {names[0]}, {names[1]}, and "
                         f"{names[2]}")
    return (mat.shape[0],), input.dtype


ADDMV = register(Op("addmv", "AddmvBackward0", _infer_addmv, _build_scaled_sum(lambda p, a, b: p.matmul(a, b)),
                    reference=lambda i, a, b, beta, alpha: beta * i + alpha * (a @ b),
                    torch_fn=lambda t, i, a, b, beta, alpha: t.addmv(i, a, b, beta=beta, alpha=alpha),
                    examples=(Example(((3,), (3, 4), (4,)), (1, 1)), Example(((), (3, 4), (4,)), (0.5, 2.0)),
                              Example(((1,), (3, 4), (4,)), (0, -1.0)))))


@ADDMV.publish(Names(function=("addmv",), method=("addmv",), inplace=("addmv_",)))
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)`` (AddmvBackward0)."""
    return apply(ADDMV, input, mat, vec, attrs=_factors(input, beta, alpha))


@MATMUL.publish(Names(function=("tensordot",)))
def tensordot(a, b, dims=2):
    """The sum over the paired ``dims`` of ``a`` and ``b`` (the last ``dims`` of a with the first of b,
    for an int): each permuted to a matrix, multiplied, and viewed back, as PyTorch does."""
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    for d_a, d_b in zip(dims_a, dims_b):
        n_a, n_b = a.shape[dim_index(d_a, a.ndim)], b.shape[dim_index(d_b, b.ndim)]
        if n_a != n_b:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {n_a} in dim {d_a} and "
                               f"second has size {n_b} in dim {d_b}")
    normalize_dims(dims_a, a.ndim)  # PyTorch's error for a dim given twice
    normalize_dims(dims_b, b.ndim)
    axes_a = [dim_index(d, a.ndim) for d in dims_a]
    axes_b = [dim_index(d, b.ndim) for d in dims_b]
    free_a = [d for d in range(a.ndim) if d not in axes_a]
    free_b = [d for d in range(b.ndim) if d not in axes_b]
    size = math.prod(a.shape[d] for d in axes_a)
    left = a.permute(*free_a, *axes_a).reshape(math.prod(a.shape[d] for d in free_a), size)
    right = b.permute(*axes_b, *free_b).reshape(size, math.prod(b.shape[d] for d in free_b))
    return mm(left, right).reshape(*(a.shape[d] for d in free_a), *(b.shape[d] for d in free_b))


@MATMUL.publish(Names(function=("kron",), method=("kron",)))
def kron(input, other):
    """The Kronecker product: along each axis (ranks padded with leading 1s), every entry of
    ``input`` times all of ``other``; a product spread over paired axes, then merged, as PyTorch's."""
    rank = max(input.ndim, other.ndim)
    a_shape = (1,) * (rank - input.ndim) + tuple(input.shape)
    b_shape = (1,) * (rank - other.ndim) + tuple(other.shape)
    a = input.reshape(*(v for n in a_shape for v in (n, 1)))
    b = other.reshape(*(v for n in b_shape for v in (1, n)))
    return apply(UNSAFE_VIEW, a * b, attrs=(tuple(m * n for m, n in zip(a_shape, b_shape)),))


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
    operands, inputs = zip(*(_diagonals(o, labels, k) for k, (o, labels) in enumerate(zip(operands, inputs))))
    if len(operands) == 1 and sorted(inputs[0]) == sorted(output):  # nothing summed: PyTorch's einsum gives a
        return operands[0].permute(*[inputs[0].index(label) for label in output])  # view (a write reaches it)
    return apply(EINSUM, *operands, attrs=(inputs, output))


def _diagonals(operand, labels, k):
    """An operand whose subscripts repeat (``ii``) as its diagonals, each a last axis with one label."""
    labels = list(labels)
    for label in [label for i, label in enumerate(labels) if label in labels[:i]]:
        first, second = labels.index(label), labels.index(label, labels.index(label) + 1)
        if operand.shape[first] != operand.shape[second]:
            raise RuntimeError(f"einsum(): subscript {label_name(label)} is repeated for operand {k} but the sizes "
                               f"don't match, {operand.shape[second]} != {operand.shape[first]}")
        operand = operand.diagonal(0, first, second)
        labels = [x for i, x in enumerate(labels) if i not in (first, second)] + [label]
    return operand, tuple(labels)


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
    dim %= len(shape)
    a, b = p.broadcast_to(a, shape), p.broadcast_to(b, shape)

    def component(x, i):
        spec = [(1, 0, n, 1) for n in shape]
        spec[dim] = (1, i, i + 1, 1)
        return p.index(x, spec)

    part_shape = p.shape_of(component(a, 0))
    parts = [_fused_difference(p, component(a, j), component(b, k), component(a, k), component(b, j), part_shape, dtype)
             for j, k in ((1, 2), (2, 0), (0, 1))]
    return p.concatenate(parts, dim, shape, dtype)


def _fused_difference(p, u, v, w, z, shape, dtype):
    """``u v - w z`` as PyTorch's CPU kernel computes it, ``fma(u, v, -(w z))``: the first product
    exact.  XLA fuses two distinct products so itself, but merges the equal ones of ``cross(x, x)``
    (then ``p - p`` is 0 where PyTorch has the rounding error of ``0.3 * 0.3``); in float32 the exact
    product is a float64 one.  float64 is left to XLA (docs/api.md)."""
    if dtype != "float32":
        return p.assign(ieee.unevaluated(lambda u, v, w, z: u * v - w * z, u, v, w, z), shape, dtype, "cross")
    rounded = p.assign(ieee.unevaluated(lambda w, z: w * z, w, z), shape, dtype, "product")
    wide = [p.astype(x, "float64") for x in (u, v, rounded)]
    exact = p.assign(ieee.unevaluated(lambda u, v, r: u * v - r, *wide), shape, "float64", "fused")
    return p.astype(exact, dtype)


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
    dim_index(dim, max(input.ndim, other.ndim))  # in range; kept as written, for PyTorch's messages
    return apply(CROSS, input, other, attrs=(dim,))


# ----------------------------------------------------------------------- factorizations


class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: the matrix is singular, or not positive-definite."""


def return_type(name: str, fields: tuple):
    """PyTorch's ``torch.return_types.<name>``, printed as PyTorch prints it."""
    kind = collections.namedtuple(name, fields)
    kind.__repr__ = lambda self: (f"torch.return_types.{name}(\n"
                                  + ",\n".join(f"{f}={getattr(self, f)!r}" for f in fields) + ")")
    return kind


def _matrices(name: str, x, square: bool = True):
    """PyTorch's checks of a factorization's input, in its order and wording."""
    if len(x.shape) < 2:
        raise ValueError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if x.dtype is dtypes.float16:
        raise ValueError(f"{name}: Low precision dtypes not supported. Got Half")
    if not x.dtype.is_floating_point:
        raise ValueError(f"{name}: Expected a floating point or complex tensor as input. Got "
                         f"{dtypes.torch_name(x.dtype)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: A must be batches of square matrices, but they are {x.shape[-2]} by "
                         f"{x.shape[-1]} matrices")


def _infer_square(name):
    def infer(nodes, *attrs):
        _matrices(name, nodes[0])
        return nodes[0].shape, nodes[0].dtype
    return infer


def _factor(head, hint):
    """A build that applies ``head`` to the input, its attributes the op's (as SymPy atoms)."""
    def build(p, node, a):
        return emit(p, head, a, *(_atom(v) for v in node.attrs), hint=hint)
    return build


def _atom(value):
    if isinstance(value, bool):
        return sp.true if value else sp.false
    return sp.Symbol(value) if isinstance(value, str) else sp.Integer(value)


def _batches(values):
    """(label, matrix) for each matrix of a batch: the label is PyTorch's ``(Batch element k): ``."""
    matrices = values.reshape(-1, *values.shape[-2:])
    return [("" if values.ndim == 2 else f"(Batch element {k}): ", m) for k, m in enumerate(matrices)]


def _singular_batches(result, A, shape):
    """(label, k) for each matrix of A (broadcast to ``shape``) whose LU factorization has an exact
    zero pivot k (1-based), looked for only when the result has an inf or a NaN, as LAPACK reports it."""
    values = engine.concrete_array(result._node)
    if values is None or np.isfinite(np.asarray(values)).all():
        return []
    import scipy.linalg  # late: 0.14-0.2 s of every import of symgrad, for an error message's detail

    found = []
    for label, matrix in _batches(np.broadcast_to(np.asarray(engine.concrete_array(A._node)), shape)):
        if np.isfinite(matrix).all():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # scipy's warning about the zero pivot
                zero = np.diagonal(scipy.linalg.lu_factor(matrix, check_finite=False)[0]) == 0
            if zero.any():
                found.append((label, int(np.argmax(zero)) + 1))
    return found


INV = register(Op("inv", "LinalgInvExBackward0", _infer_square("linalg.inv"), _factor(Inverse, "inv"),
                  reference=jnp.linalg.inv, torch_fn=lambda t, a: t.linalg.inv(a),
                  examples=(Example(((3, 3),)), Example(((2, 4, 4),))), domain=("invertible",)))


@INV.publish(Names(function=("inverse",), method=("inverse",)))
def inverse(input):
    """``A^-1``; an exactly singular matrix raises LinAlgError (PyTorch's LU pivot message)."""
    result = apply(INV, input)
    for label, k in _singular_batches(result, input, tuple(input.shape))[:1]:
        raise LinAlgError(f"linalg.inv: {label}The diagonal element {k} is zero, the inversion could not be "
                          "completed because the input matrix is singular.")
    return result


def _infer_determinant(name):
    def infer(nodes, *attrs):
        _matrices(name, nodes[0])
        return nodes[0].shape[:-2], nodes[0].dtype
    return infer


DET = register(Op("det", "LinalgDetBackward0", _infer_determinant("linalg.det"), _factor(Det, "det"),
                  reference=jnp.linalg.det, torch_fn=lambda t, a: t.linalg.det(a),
                  examples=(Example(((3, 3),)), Example(((2, 4, 4),)), Example(((1, 1),))), domain=("invertible",)))
SLOGDET = register(Op("slogdet", "LinalgSlogdetBackward0", _infer_determinant("linalg.slogdet"),
                      _factor(SlogDet, "slogdet"), reference=lambda a, part: jnp.linalg.slogdet(a)[part],
                      torch_fn=lambda t, a, part: t.linalg.slogdet(a)[part],
                      examples=(Example(((2, 3, 3),), (1,)), Example(((4, 4),), (1,))), domain=("invertible",)))
SlogdetReturn, LinalgSlogdetReturn = (return_type(n, ("sign", "logabsdet")) for n in ("slogdet", "linalg_slogdet"))


@DET.publish(Names(function=("det",), method=("det",)))
def det(input):
    return apply(DET, input)


def slogdet_parts(A):
    """The sign and the log of the absolute value of ``det A``."""
    return apply(SLOGDET, A, attrs=(0,)), apply(SLOGDET, A, attrs=(1,))


@SLOGDET.publish(Names(function=("slogdet",), method=("slogdet",)))
def slogdet(input):
    return SlogdetReturn(*slogdet_parts(input))


@SLOGDET.publish(Names(function=("logdet",), method=("logdet",)))
def logdet(input):
    """``log det A``, NaN for a negative determinant (composed as PyTorch composes it)."""
    sign, logabsdet = slogdet_parts(input)
    return where(sign < 0, math.nan, logabsdet)


def _infer_solve(nodes, vector, left):
    A, B = nodes
    _matrices("linalg.solve", A)
    if A.dtype is not B.dtype:
        raise ValueError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                         f"{dtypes.torch_name(A.dtype)} and B of type {dtypes.torch_name(B.dtype)} instead")
    matrix = (*B.shape, 1) if vector or len(B.shape) == 1 else B.shape
    n = A.shape[-1]
    if (matrix[-2] if left else matrix[-1]) != n:
        raise ValueError(f"linalg.solve: Incompatible shapes of A and B for the equation {'AX' if left else 'XA'} = B "
                         f"({n}x{n} and {matrix[-2]}x{matrix[-1]})")
    batch = broadcast_shapes(A.shape[:-2], B.shape[:-1] if vector else B.shape[:-2])
    return (*batch, *B.shape[-1 if vector else -2:]), A.dtype


def _build_solve(p, node, A, B):
    """``A X = B`` (``X A = B`` is ``A^T X^T = B^T``), B a column if it is a vector, batches broadcast."""
    vector, left = node.attrs
    if vector:
        B = p.reshape(B, (*p.shape_of(B), 1))
    if not left:
        A, B = p.swap_last(A), p.swap_last(B)
    batch = broadcast_shapes(p.shape_of(A)[:-2], p.shape_of(B)[:-2])
    A = p.broadcast_to(A, (*batch, *p.shape_of(A)[-2:]))
    B = p.broadcast_to(B, (*batch, *p.shape_of(B)[-2:]))
    X = emit(p, Solve, A, B, hint="solve")
    return p.reshape(X if left else p.swap_last(X), node.shape)


def _reference_solve(A, B, vector, left):
    if vector:
        return jnp.linalg.solve(A, B[..., None])[..., 0]
    return jnp.linalg.solve(A, B) if left else jnp.linalg.solve(A.mT, B.mT).mT


SOLVE = register(Op("solve", "LinalgSolveExBackward0", _infer_solve, _build_solve, reference=_reference_solve,
                    torch_fn=lambda t, a, b, vector, left: t.linalg.solve(a, b, left=left),
                    examples=(Example(((2, 3, 3), (3, 2)), (False, True)), Example(((3, 3), (3,)), (True, True)),
                              Example(((2, 3, 3), (2, 3)), (True, True)), Example(((3, 3), (2, 4, 3)), (False, False))),
                    domain=("invertible", "real")))


def solve(A, B, *, left: bool = True):
    """``torch.linalg.solve``: B is a vector when it is 1-D or A's shape without its last axis."""
    vector = left and (B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1])))
    result = apply(SOLVE, A, B, attrs=(vector, bool(left)))
    batch = tuple(result.shape[:-1 if vector else -2])
    for label, _ in _singular_batches(result, A, (*batch, *A.shape[-2:]))[:1]:
        raise LinAlgError(f"torch.linalg.solve: {label}The solver failed because the input matrix is singular.")
    return result


def _build_cholesky(p, node, a):
    """L, or its transpose for ``upper`` (still from A's lower triangle, as PyTorch)."""
    L = emit(p, Cholesky, a, hint="cholesky")
    return p.swap_last(L) if node.attrs[0] else L


def _infer_solve_triangular(nodes, upper, left, unit):
    A, B = nodes
    for name, x in (("A", A), ("B", B)):
        if len(x.shape) < 2:
            raise ValueError(f"linalg.solve_triangular: The input tensor {name} must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f'"triangular_solve_cpu" not implemented for \'{dtypes.torch_name(A.dtype)}\'')
    _matrices("linalg.solve_triangular", A)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ValueError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation "
                         f"{'AX' if left else 'XA'} = B ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    return (*broadcast_shapes(A.shape[:-2], B.shape[:-2]), *B.shape[-2:]), A.dtype


def _build_solve_triangular(p, node, A, B):
    """In A's dtype (PyTorch's result dtype), batches broadcast."""
    upper, left, unit = node.attrs
    batch = node.shape[:-2]
    A = p.broadcast_to(A, (*batch, *p.shape_of(A)[-2:]))
    B = p.broadcast_to(p.astype(B, node.dtype.name), node.shape)
    return triangular_solve(p, A, B, upper, left, unit)


def _reference_solve_triangular(A, B, upper, left, unit):
    batch = jnp.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    A, B = jnp.broadcast_to(A, (*batch, *A.shape[-2:])), jnp.broadcast_to(B, (*batch, *B.shape[-2:]))
    return jax.lax.linalg.triangular_solve(A, B, left_side=left, lower=not upper, unit_diagonal=unit)


SOLVE_TRIANGULAR = register(Op(
    "solve_triangular", "LinalgSolveTriangularBackward0", _infer_solve_triangular, _build_solve_triangular,
    reference=_reference_solve_triangular,
    torch_fn=lambda t, a, b, upper, left, unit: t.linalg.solve_triangular(a, b, upper=upper, left=left,
                                                                           unitriangular=unit),
    examples=(Example(((2, 3, 3), (3, 2)), (True, True, False)), Example(((3, 3), (2, 3, 2)), (False, True, True)),
              Example(((3, 3), (2, 4, 3)), (False, False, False)), Example(((4, 4), (2, 4)), (True, False, True))),
    domain=("invertible", "real")))


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False):
    """``torch.linalg.solve_triangular``: only A's ``upper`` (or lower) triangle is read (its diagonal
    taken as ones when ``unitriangular``); a zero on the diagonal gives inf or NaN, not an error."""
    return apply(SOLVE_TRIANGULAR, A, B, attrs=(bool(upper), bool(left), bool(unitriangular)))


def _reference_cholesky(A, upper, name):
    L = jnp.linalg.cholesky(A)  # of (A + A^T) / 2: PyTorch's gradient is the symmetric one
    return L.mT if upper else L


def _torch_cholesky(t, A, upper, name):
    return t.linalg.cholesky(A, upper=upper) if name.startswith("Linalg") else t.cholesky(A, upper)


CHOLESKY = register(Op("cholesky", lambda nodes, upper, name: name, _infer_square("linalg.cholesky"), _build_cholesky,
                       reference=_reference_cholesky, torch_fn=_torch_cholesky,
                       examples=(Example(((3, 3),), (False, "LinalgCholeskyExBackward0")),
                                 Example(((2, 4, 4),), (True, "LinalgCholeskyExBackward0")),
                                 Example(((3, 3),), (True, "CholeskyBackward0"))), domain=("spd",)))


def _failed_minor(matrix) -> int | None:
    """The order of the first leading minor that is not positive-definite, as LAPACK's potrf finds it
    (from the lower triangle; a NaN fails)."""
    n = matrix.shape[-1]
    L = np.zeros_like(matrix)
    for j in range(n):
        pivot = matrix[j, j] - L[j, :j] @ L[j, :j]
        if not pivot > 0:
            return j + 1
        L[j, j] = np.sqrt(pivot)
        L[j + 1:, j] = (matrix[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return None


def _cholesky(A, upper, name, prefix):
    result = apply(CHOLESKY, A, attrs=(bool(upper), name))
    values = engine.concrete_array(result._node)
    if values is not None and np.isnan(np.asarray(values)).any():
        for label, matrix in _batches(np.asarray(engine.concrete_array(A._node), dtype=np.float64)):
            order = _failed_minor(matrix)
            if order is not None:
                raise LinAlgError(f"{prefix}: {label}The factorization could not be completed because the input is "
                                  f"not positive-definite (the leading minor of order {order} is not "
                                  "positive-definite).")
    return result


def linalg_cholesky(A, *, upper: bool = False):
    """``torch.linalg.cholesky``: L from A's lower triangle; LinAlgError if A is not positive-definite."""
    return _cholesky(A, upper, "LinalgCholeskyExBackward0", "linalg.cholesky")


CHOLESKY_DEPRECATED = ("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
                       "PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)"
                       "\nand\nU = torch.cholesky(A, upper=True)\nshould be replaced with\n"
                       "U = torch.linalg.cholesky(A).mH\nThis transform will produce equivalent results for all valid "
                       "(symmetric positive definite) inputs.")


@CHOLESKY.publish(Names(function=("cholesky",), method=("cholesky",)))
def cholesky(input, upper: bool = False):
    warnings.warn(CHOLESKY_DEPRECATED, UserWarning, stacklevel=2)
    return _cholesky(input, upper, "CholeskyBackward0", "cholesky")


def _infer_qr(nodes, part, mode):
    (A,) = nodes
    _matrices("linalg.qr", A, square=False)
    *batch, m, n = A.shape
    k = m if mode == "complete" else min(m, n)
    return ((*batch, m, k) if part == 0 else (*batch, k, n)), A.dtype


QR = register(Op("qr", "LinalgQrBackward0", _infer_qr, _factor(Qr, "qr"),
                 reference=lambda a, part, mode: jnp.linalg.qr(a, mode=mode)[part],
                 torch_fn=lambda t, a, part, mode: t.linalg.qr(a, mode=mode)[part],
                 examples=(Example(((4, 3),), (0, "reduced"), up_to_sign=True),
                           Example(((2, 4, 3),), (1, "reduced"), up_to_sign=True),
                           Example(((3, 5),), (0, "reduced"), up_to_sign=True),
                           Example(((2, 3, 5),), (1, "complete"), up_to_sign=True),
                           Example(((3, 3),), (0, "complete"), up_to_sign=True)), domain=("spread",)))
QrReturn, LinalgQrReturn = (return_type(n, ("Q", "R")) for n in ("qr", "linalg_qr"))


def qr_parts(A, mode: str = "reduced"):
    """Q and R; mode 'r' computes R only (Q is empty, and R's gradient raises, as in PyTorch)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    if mode == "r":
        return Tensor(leaf(jnp.zeros((0,), A.dtype.numpy), A.dtype)), apply(QR, A, attrs=(1, "r"))
    return apply(QR, A, attrs=(0, mode)), apply(QR, A, attrs=(1, mode))


QR_DEPRECATED = ("torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch release.\n"
                 "The boolean parameter 'some' has been replaced with a string parameter 'mode'.\nQ, R = torch.qr(A, "
                 "some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if some else 'complete')")


@QR.publish(Names(function=("qr",), method=("qr",)))
def qr(input, some: bool = True):
    warnings.warn(QR_DEPRECATED, UserWarning, stacklevel=2)
    return QrReturn(*qr_parts(input, "reduced" if some else "complete"))


def _infer_eigh(nodes, part, uplo):
    (A,) = nodes
    _matrices("linalg.eigh", A)
    return (A.shape[:-1] if part == 0 else A.shape), A.dtype


EIGH = register(Op("eigh", "LinalgEighBackward0", _infer_eigh, _factor(Eigh, "eigh"),
                   # of (A + A^T) / 2, whose gradient is symmetric, as PyTorch's
                   reference=lambda a, part, uplo: jnp.linalg.eigh(a, UPLO=uplo)[part],
                   torch_fn=lambda t, a, part, uplo: t.linalg.eigh(a, UPLO=uplo)[part],
                   examples=(Example(((2, 4, 4),), (1, "L"), up_to_sign=True), Example(((3, 3),), (0, "L")),
                             Example(((3, 3),), (1, "U"), up_to_sign=True), Example(((2, 3, 3),), (0, "U"))),
                   domain=("spd",)))


def eigh_parts(A, UPLO: str = "L"):
    """Eigenvalues (ascending) and eigenvectors of the symmetric matrix in A's ``UPLO`` triangle."""
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return apply(EIGH, A, attrs=(0, UPLO)), apply(EIGH, A, attrs=(1, UPLO))


def _infer_svd(nodes, part, full):
    (A,) = nodes
    _matrices("linalg.svd", A, square=False)
    *batch, m, n = A.shape
    k = min(m, n)
    return [(*batch, m, m if full else k), (*batch, k), (*batch, n if full else k, n)][part], A.dtype


SVD = register(Op("svd", "LinalgSvdBackward0", _infer_svd, _factor(Svd, "svd"),
                  # full matrices only where the factor is the reduced one (extra columns are any basis;
                  # JAX refuses to differentiate them), so the reference computes the reduced SVD
                  reference=lambda a, part, full: jnp.linalg.svd(a, full_matrices=False)[part],
                  torch_fn=lambda t, a, part, full: t.linalg.svd(a, full_matrices=full)[part],
                  examples=(Example(((4, 3),), (0, False), up_to_sign=True), Example(((2, 3, 5),), (1, False)),
                            Example(((3, 5),), (2, False), up_to_sign=True),
                            Example(((2, 5, 3),), (2, True), up_to_sign=True),
                            Example(((3, 5),), (0, True), up_to_sign=True), Example(((4, 3),), (1, True)),
                            Example(((2, 3, 3),), (0, False), up_to_sign=True)), domain=("spread",)))
SvdReturn = return_type("svd", ("U", "S", "V"))


def svd_parts(A, full_matrices: bool = True):
    """U, S (descending) and Vh of ``A = U diag(S) Vh``."""
    return tuple(apply(SVD, A, attrs=(part, bool(full_matrices))) for part in range(3))


def svdvals(A):
    return apply(SVD, A, attrs=(1, False))


@SVD.publish(Names(function=("svd",), method=("svd",)))
def svd(input, some: bool = True, compute_uv: bool = True):
    """``torch.svd``: V, not Vh; without ``compute_uv``, S and square zero matrices (as PyTorch returns)."""
    if compute_uv:
        U, S, Vh = svd_parts(input, not some)
        return SvdReturn(U, S, Vh.mT)
    *batch, m, n = input.shape
    zeros = [Tensor(leaf(jnp.zeros((*batch, k, k), input.dtype.numpy), input.dtype)) for k in (m, n)]
    return SvdReturn(zeros[0], svdvals(input), zeros[1])
