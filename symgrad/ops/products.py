"""Products and distances built on matmul and the norms: inner, vdot, addr (beta * input + alpha *
an outer product), multi_dot and chain_matmul (PyTorch's order of the products), matrix_power
(PyTorch's squarings), dist (the norm of a difference) and renorm (slices scaled down to a norm)."""
from __future__ import annotations

import math
import warnings

import jax.numpy as jnp
import sympy as sp

from symgrad import dtypes
from symgrad.creation import eye
from symgrad.ir import broadcast_shapes, greater, ieee, select
from symgrad.ops.dims import dim_index
from symgrad.ops.linalg import MATMUL, inverse, mm, scaled_sum, tensordot
from symgrad.ops.reductions import _norm
from symgrad.ops.refusals import refused
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.ops.shape import COPY_OVER, clone, refuse_expand, reshape
from symgrad.tensor import apply

# ------------------------------------------------------------------------ inner and vdot


@MATMUL.publish(Names(function=("inner",), method=("inner",)))
def inner(input, other):
    """The sum over the last dims of every pair of input's and other's vectors (a product, with a
    number)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


VDOT = register(Op("vdot", "VdotBackward0", lambda nodes: ((), nodes[0].dtype), lambda p, node, a, b: p.matmul(a, b),
                   reference=jnp.vdot, torch_fn=lambda t, a, b: t.vdot(a, b), examples=(Example(((4,), (4,))),)))


@VDOT.publish(Names(function=("vdot",), method=("vdot",)))
def vdot(input, other):
    """The dot product of two vectors (conjugating the first, which for real numbers is nothing)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{other.shape[0]}] "
                           f"to have the same number of elements, but got {input.shape[0]} and {other.shape[0]} "
                           f"elements respectively")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{dtypes.torch_name(input.dtype)} and {dtypes.torch_name(other.dtype)}")
    return apply(VDOT, input, other)


# ----------------------------------------------------------------------------------- addr


def _infer_addr(nodes, beta, alpha):
    input, a, b = nodes
    shape = (a.shape[0], b.shape[0])
    refuse_expand(input.shape, shape, input.dtype)
    return shape, dtypes.promote([(n.dtype, 2 if n.shape else 1) for n in nodes])


def _build_addr(p, node, input, a, b):
    """``beta * input + alpha * a b^T`` in the promoted dtype; beta = 0 leaves input out (its NaN too)."""
    beta, alpha = node.attrs
    dtype = node.dtype.name
    _, first, second = node.inputs
    a = _refusing(p, p.astype(a, dtype), first, second, node)
    b = _refusing(p, p.astype(b, dtype), second, first, node)
    outer = p.assign(p.reshape(a, (node.shape[0], 1)) * b, node.shape, dtype, "outer")
    return p.assign(scaled_sum(beta, p.astype(input, dtype), alpha, outer), node.shape, dtype, "addr")


def _refusing(p, x, vector, other, node):
    """``x``, the operand of ``vector``: PyTorch's backward gets its gradient from the cotangent (of
    the result's dtype) and ``other`` with ``mv``, which refuses a vector of another dtype: that
    gradient alone raises."""
    if not (vector.requires_grad and other.dtype is not node.dtype):
        return x
    names = (dtypes.torch_name(d) for d in (other.dtype, node.dtype))
    message = "addmv input tensors must have the same dtype, but got {0}, {1}, and {0}".format(*names)
    return refused(p, x, vector.shape, node.dtype.name, message)


ADDR = register(Op("addr", "AddrBackward0", _infer_addr, _build_addr,
                   reference=lambda i, a, b, beta, alpha: beta * i + alpha * jnp.outer(a, b),
                   torch_fn=lambda t, i, a, b, beta, alpha: t.addr(i, a, b, beta=beta, alpha=alpha),
                   examples=(Example(((3, 4), (3,), (4,)), (1.0, 1.0)), Example(((4,), (3,), (4,)), (0.5, -2.0)))))


@ADDR.publish(Names(function=("addr",), method=("addr",), inplace=("addr_",)))
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)`` (AddrBackward0)."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    if not input.dtype.is_floating_point and input.dtype is not dtypes.bool_:
        for name, factor in (("beta", beta), ("alpha", alpha)):
            if isinstance(factor, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point number.")
    floating = dtypes.promote([(t.dtype, 2) for t in (input, vec1, vec2)]).is_floating_point
    return apply(ADDR, input, vec1, vec2, attrs=(float(beta), float(alpha)) if floating else (int(beta), int(alpha)))


# --------------------------------------------------------------------- chains of products


def _chain_order(shapes) -> dict:
    """PyTorch's multi_dot order: the cheapest parenthesization (fewest multiplications; the first
    found among equals), as split points ``(i, j) -> k``."""
    n = len(shapes)
    sizes = [s[0] for s in shapes] + [shapes[-1][1]]
    cost, split = {(i, i): 0 for i in range(n)}, {}
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i, j] = math.inf
            for k in range(i, j):
                total = cost[i, k] + cost[k + 1, j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if total < cost[i, j]:
                    cost[i, j], split[i, j] = total, k
    return split


def _multiplied(matrices, split, i, j):
    if i == j:
        return matrices[i]
    k = split[i, j]
    return mm(_multiplied(matrices, split, i, k), _multiplied(matrices, split, k + 1, j))


def _multi_dot_checks(tensors):
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for number, t in enumerate(tensors):
        place = "first" if number == 0 else "last" if number == len(tensors) - 1 else None
        if (place and t.ndim not in (1, 2)) or (not place and t.ndim != 2):
            kind = f"the {place} tensor must be 1D or 2D" if place else f"tensor {number} must be 2D"
            raise RuntimeError(f"multi_dot(): {kind} but got {t.ndim}D")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{tensors[0].dtype.name.replace('float32', 'float').replace('float64', 'double')} "
                               f"and tensor {number} "
                               f"{t.dtype.name.replace('float32', 'float').replace('float64', 'double')}")
    for number, (a, b) in enumerate(zip(tensors, tensors[1:])):
        if a.shape[-1] != b.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {number} and {number + 1} with shapes {list(a.shape)} and "
                               f"{list(b.shape)} cannot be multiplied")


def multi_dot(tensors):
    """The product of the matrices (the first may be a row vector, the last a column), in the order
    that needs the fewest multiplications, viewed in the result's shape."""
    tensors = list(tensors)
    _multi_dot_checks(tensors)
    shape = [*tensors[0].shape[:-1], *tensors[-1].shape[1:]]
    matrices = [reshape(tensors[0], 1, -1) if tensors[0].ndim == 1 else tensors[0], *tensors[1:-1],
                reshape(tensors[-1], -1, 1) if tensors[-1].ndim == 1 else tensors[-1]]
    if len(matrices) == 2:
        product = mm(*matrices)
    elif len(matrices) == 3:
        (a, b), (_, c), (_, d) = (m.shape for m in matrices)
        if (a * c) * (b + d) > (b * d) * (a + c):
            product = mm(matrices[0], mm(matrices[1], matrices[2]))
        else:
            product = mm(mm(matrices[0], matrices[1]), matrices[2])
    else:
        product = _multiplied(matrices, _chain_order([tuple(m.shape) for m in matrices]), 0, len(matrices) - 1)
    return reshape(product, *shape)


@MATMUL.publish(Names(function=("chain_matmul",)))
def chain_matmul(*matrices):
    """multi_dot of matrices given one by one (deprecated, as in PyTorch); one matrix is copied."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.", UserWarning, stacklevel=3)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for t in matrices:
        if t.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {t.ndim}, expected 2 instead.")
    return clone(matrices[0]) if len(matrices) == 1 else multi_dot(matrices)


@MATMUL.publish(Names(function=("matrix_power",), method=("matrix_power",)))
def matrix_power(input, n: int):
    """The n-th power of each square matrix: the identity (a copy over the input, no gradient) for 0,
    of the inverse for n < 0, and PyTorch's products: squarings for the bits of n, lowest first."""
    if input.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{input.shape[-2]} by {input.shape[-1]} matrices")
    n = int(n)
    if n == 0:
        identity = eye(input.shape[-1], dtype=input.dtype).expand(*input.shape)
        return apply(COPY_OVER, clone(input), identity)
    if n in (1, -1):
        return clone(input) if n == 1 else inverse(input)
    a = inverse(input) if n < 0 else input
    n = abs(n)
    if n in (2, 3):
        square = a.matmul(a)
        return square if n == 2 else square.matmul(a)
    power = result = None
    while n:
        n, bit = divmod(n, 2)
        power = a if power is None else power.matmul(power)
        if bit:
            result = power if result is None else result.matmul(power)
    return result


# ----------------------------------------------------------------------- dist and renorm

DIST_AT_ZERO_P = "Expected a proper Tensor but got None (or an undefined Tensor in C++) for argument #0 'self'"


def _infer_dist(nodes, ord):
    a, b = nodes
    dtype = dtypes.promote([(n.dtype, 2 if n.shape else 1) for n in nodes])
    if not dtype.is_floating_point:
        raise ValueError(f"norm(): input dtype should be either floating point or complex. Got "
                         f"{dtypes.torch_name(dtype)} instead.")
    broadcast_shapes(a.shape, b.shape)
    return (), dtype


def _build_dist(p, node, a, b):
    """The p-norm of the broadcast difference, with the norm's gradient.  For p = 0 PyTorch's has
    none: input gets no gradient, and other's (its negation) raises."""
    (ord,) = node.attrs
    dtype = node.dtype.name
    shape = broadcast_shapes(*(n.shape for n in node.inputs))
    difference = p.materialize(ieee.unevaluated(lambda u, v: u - v, p.astype(a, dtype), p.astype(b, dtype)), shape,
                               dtype)  # dist(x, x) is NaN where x is inf or NaN
    norm = _norm(p, difference, ord, tuple(range(len(shape))), False, shape, (), dtype)
    if ord != 0:
        return norm
    if node.inputs[1].requires_grad:
        return refused(p, norm, (), dtype, DIST_AT_ZERO_P)
    return p.stop_gradient(norm)


DIST = register(Op("dist", "DistBackward0", _infer_dist, _build_dist,
                   reference=lambda a, b, ord: jnp.linalg.vector_norm((a - b).ravel(), ord=ord),
                   torch_fn=lambda t, a, b, ord: t.dist(a, b, ord),
                   examples=(Example(((3, 4), (4,)), (2,)), Example(((5,), (5,)), (1,)),
                             Example(((2, 3), (2, 3)), (3,)))))


@DIST.publish(Names(function=("dist",), method=("dist",)))
def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast)."""
    ord = int(p) if float(p).is_integer() else float(p)
    return apply(DIST, input, other, attrs=(ord,))


def _build_renorm(p, node, x):
    """Each slice along the axis times ``maxnorm / (norm + 1e-7)`` where its p-norm exceeds maxnorm:
    the norm's gradient carries PyTorch's renorm_backward."""
    ord, axis, maxnorm = node.attrs
    shape, dtype = node.shape, node.dtype.name
    others = tuple(d for d in range(len(shape)) if d != axis)
    kept = tuple(n if d == axis else 1 for d, n in enumerate(shape))
    norm = p.materialize(_norm(p, x, ord, others, True, shape, kept, dtype), kept, dtype)
    limit = ieee.constant(maxnorm)
    scale = ieee.unevaluated(lambda m, n: m / (n + sp.Float(1e-7)), limit, norm)
    factor = p.assign(select(greater(norm, limit), scale, sp.S.One), kept, dtype, "factor")
    return p.assign(x * factor, shape, dtype, "renorm")


RENORM = register(Op("renorm", "RenormBackward0", lambda nodes, ord, axis, maxnorm: (nodes[0].shape, nodes[0].dtype),
                     _build_renorm))


@RENORM.publish(Names(function=("renorm",), method=("renorm",), inplace=("renorm_",)))
def renorm(input, p, dim: int, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to it."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{dtypes.torch_name(input.dtype)}")
    ord = int(p) if float(p).is_integer() else float(p)
    return apply(RENORM, input, attrs=(ord, dim_index(dim, input.ndim), float(maxnorm)))
