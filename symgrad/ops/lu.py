"""The LU factorization with partial pivoting: ``linalg.lu_factor`` (packed factors and LAPACK's
pivots), ``linalg.lu`` (P, L, U), ``lu_unpack`` and ``linalg.lu_solve``, each one op with
PyTorch's backward node; gradients flow through the IR's LU head and triangular solves."""
from __future__ import annotations

import jax
import numpy as np
import sympy as sp

from symgrad import dtypes, engine
from symgrad.creation import tensor as _tensor
from symgrad.ir import broadcast_shapes
from symgrad.ir.indexing import triangle
from symgrad.ir.linalg import Lu, PivotPermutation, _rows, emit, triangular_solve, unit_lower
from symgrad.ops.linalg import _matrices, return_type
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import apply

LuFactorReturn = return_type("linalg_lu_factor", ("LU", "pivots"))
LuFactorExReturn = return_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
LuReturn = return_type("linalg_lu", ("P", "L", "U"))
LuUnpackReturn = return_type("lu_unpack", ("P", "L", "U"))


def _lu_shapes(shape):
    *batch, m, n = shape
    k = min(m, n)
    return [(*batch, m, m), (*batch, m, k), (*batch, k, n)]


def _infer_lu_factor(nodes, part):
    (A,) = nodes
    if len(A.shape) < 2:
        raise ValueError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} "
                         "instead")
    _matrices("linalg.lu_factor", A, square=False)
    *batch, m, n = A.shape
    return ((*batch, m, n), A.dtype) if part == 0 else ((*batch, min(m, n)), dtypes.int32)


LU_FACTOR = register(Op("lu_factor", "LinalgLuFactorExBackward0", _infer_lu_factor,
                        lambda p, node, a: emit(p, Lu, a, sp.Integer(node.attrs[0]), hint="lu"),
                        reference=lambda a, part: jax.lax.linalg.lu(a)[0] if part == 0 else jax.lax.linalg.lu(a)[1] + 1,
                        torch_fn=lambda t, a, part: t.linalg.lu_factor(a)[part],
                        examples=(Example(((3, 3),), (0,)), Example(((2, 4, 4),), (0,))), domain=("invertible",)))


def _infer_lu(nodes, part):
    (A,) = nodes
    _matrices("linalg.lu", A, square=False)
    return _lu_shapes(A.shape)[part], A.dtype


def _build_lu(p, node, a):
    part = node.attrs[0]
    if part == 0:
        return emit(p, Lu, a, sp.Integer(2), hint="lu_p")
    packed = emit(p, Lu, a, sp.Integer(0), hint="lu")
    k = min(p.shape_of(packed)[-2:])
    return unit_lower(p, packed) if part == 1 else triangle(p, _rows(p, packed, 0, k), 0, True)


LU = register(Op("lu", lambda nodes, part: "LinalgLuBackward0" if part else None, _infer_lu, _build_lu))


def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False):
    """Packed L and U, LAPACK's pivots, and per matrix the first zero on U's diagonal (1-based), or 0."""
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    LU_, pivots = (apply(LU_FACTOR, A, attrs=(part,)) for part in (0, 1))
    diagonal = np.asarray(engine.concrete_array(LU_._node)).diagonal(0, -2, -1)
    zero = diagonal == 0
    info = np.where(zero.any(-1), zero.argmax(-1) + 1, 0).astype(np.int32)
    if check_errors and info.any():
        first = int(info.reshape(-1)[info.reshape(-1) > 0][0])
        raise RuntimeError(f"torch.linalg.lu_factor_ex: U[{first},{first}] is zero and using it on lu_solve would "
                           "result in a division by zero. If you still want to perform the factorization, consider "
                           "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return LuFactorExReturn(LU_, pivots, _tensor(info, dtype=dtypes.int32))


def lu_factor(A, *, pivot: bool = True):
    """Packed L and U with LAPACK's 1-based pivots; a zero on U's diagonal is PyTorch's error."""
    LU_, pivots, info = lu_factor_ex(A, pivot=pivot)
    codes = info.numpy().reshape(-1)
    if codes.any():
        first = int(codes[codes > 0][0])
        raise RuntimeError(f"torch.linalg.lu_factor: U[{first},{first}] is zero and using it on lu_solve would "
                           "result in a division by zero. If you still want to perform the factorization, consider "
                           "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return LuFactorReturn(LU_, pivots)


def lu(A, *, pivot: bool = True):
    """P, L (unit lower, m by k) and U (upper, k by n) with ``A = P L U``."""
    if not pivot:
        raise RuntimeError("linalg.lu: LU without pivoting is not implemented on the CPU")
    return LuReturn(*(apply(LU, A, attrs=(part,)) for part in range(3)))


def _infer_lu_unpack(nodes, part):
    data, pivots = nodes
    if len(data.shape) < 2:
        raise ValueError("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                         f"{list(data.shape)} instead")
    if pivots.dtype is not dtypes.int32:
        raise ValueError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
                         "dtype.\nNote: this function is intended to be used with the output produced by torch.linalg.lu_factor")
    return _lu_shapes(data.shape)[part], data.dtype


def _build_lu_unpack(p, node, data, pivots):
    part = node.attrs[0]
    m, n = p.shape_of(data)[-2:]
    if part == 0:
        return emit(p, PivotPermutation, pivots, sp.Integer(m), sp.Symbol(node.dtype.name), hint="lu_p")
    return unit_lower(p, data) if part == 1 else triangle(p, _rows(p, data, 0, min(m, n)), 0, True)


LU_UNPACK = register(Op("lu_unpack", lambda nodes, part: "LuUnpackBackward0" if part else None, _infer_lu_unpack,
                        _build_lu_unpack))


@LU_UNPACK.publish(Names(function=("lu_unpack",)))
def lu_unpack(LU_data, LU_pivots, unpack_data: bool = True, unpack_pivots: bool = True):
    """P, L and U from ``lu_factor``'s packed factors and pivots (empty tensors for what is not unpacked)."""
    empty = lambda: _tensor(np.zeros((0,)), dtype=LU_data.dtype)  # noqa: E731
    P = apply(LU_UNPACK, LU_data, LU_pivots, attrs=(0,)) if unpack_pivots else empty()
    L, U = (apply(LU_UNPACK, LU_data, LU_pivots, attrs=(part,)) if unpack_data else empty() for part in (1, 2))
    return LuUnpackReturn(P, L, U)


def _infer_lu_solve(nodes, left, adjoint):
    LU_, pivots, B = nodes
    if LU_.dtype is not B.dtype:
        raise ValueError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                         f"{dtypes.torch_name(LU_.dtype)} and B of type {dtypes.torch_name(B.dtype)} instead")
    if len(B.shape) < 2:
        raise ValueError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    _matrices("linalg.lu_solve", LU_)
    n = LU_.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ValueError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                         f"{'AX' if left else 'XA'} = B ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    return (*broadcast_shapes(LU_.shape[:-2], B.shape[:-2]), *B.shape[-2:]), B.dtype


def _build_lu_solve(p, node, LU_, pivots, B):
    """``A X = B`` with ``A = P L U``: ``U^-1 L^-1 P^T B``, or ``P L^-T U^-T B`` for A^T; X A = B
    is the transposed equation, the other of the two."""
    left, adjoint = node.attrs
    batch, n = node.shape[:-2], p.shape_of(LU_)[-1]
    LU_ = p.broadcast_to(LU_, (*batch, n, n))
    pivots = p.broadcast_to(pivots, (*batch, n))
    B = p.broadcast_to(B, node.shape)
    if not left:
        B, adjoint = p.swap_last(B), not adjoint
    P = emit(p, PivotPermutation, pivots, sp.Integer(n), sp.Symbol(node.dtype.name), hint="lu_p")
    L, U = unit_lower(p, LU_), triangle(p, LU_, 0, True)
    if adjoint:
        X = triangular_solve(p, p.swap_last(U), B, False, True)
        X = p.matmul(P, triangular_solve(p, p.swap_last(L), X, True, True, True))
    else:
        X = triangular_solve(p, L, p.matmul(p.swap_last(P), B), False, True, True)
        X = triangular_solve(p, U, X, True, True)
    return X if left else p.swap_last(X)


LU_SOLVE = register(Op("lu_solve", "LinalgLuSolveBackward0", _infer_lu_solve, _build_lu_solve))


def lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False):
    """X with ``A X = B`` (``X A = B`` unless ``left``; A^T for ``adjoint``), A given by ``lu_factor``."""
    return apply(LU_SOLVE, LU, pivots, B, attrs=(bool(left), bool(adjoint)))
