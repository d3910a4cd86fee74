"""Solves with a matrix given by a factor (PyTorch's older API: ``cholesky_solve``,
``cholesky_inverse``, ``triangular_solve``), the pseudo-inverse and least squares through it,
each one op with PyTorch's backward node; their gradients are the IR heads' (symgrad.ir.linalg)."""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.ir import broadcast_shapes
from symgrad.ir.indexing import diag_embed
from symgrad.ir.linalg import CholeskySolve, Pinv, emit, triangular_solve as _triangular_solve
from symgrad.creation import tensor as _tensor
from symgrad.ops.linalg import SVD, _matrices, return_type
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import apply


def _batched(p, x, batch):
    return p.broadcast_to(x, (*batch, *p.shape_of(x)[-2:]))


def _infer_cholesky_solve(nodes, upper):
    B, L = nodes
    if len(B.shape) < 2:
        raise ValueError(f"b should have at least 2 dimensions, but has {len(B.shape)} dimensions instead")
    if len(L.shape) < 2:
        raise ValueError(f"u should have at least 2 dimensions, but has {len(L.shape)} dimensions instead")
    if B.dtype is not L.dtype:
        raise ValueError(f"Expected b and A to have the same dtype, but found b of type {dtypes.torch_name(B.dtype)} "
                         f"and A of type {dtypes.torch_name(L.dtype)} instead.")
    if L.shape[-1] != L.shape[-2] or L.shape[-1] != B.shape[-2]:
        raise ValueError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L.shape[-2]} by "
                         f"{L.shape[-1]} but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    return (*broadcast_shapes(B.shape[:-2], L.shape[:-2]), *B.shape[-2:]), B.dtype


def _build_cholesky_solve(p, node, B, L):
    batch = node.shape[:-2]
    return emit(p, CholeskySolve, _batched(p, L, batch), _batched(p, B, batch), sp.true if node.attrs[0] else sp.false,
                hint="cholesky_solve")


def _reference_cholesky_solve(B, L, upper):
    L = jnp.triu(L) if upper else jnp.tril(L)
    A = L.mT @ L if upper else L @ L.mT
    return jnp.linalg.solve(A, jnp.broadcast_to(B, (*jnp.broadcast_shapes(B.shape[:-2], A.shape[:-2]), *B.shape[-2:])))


CHOLESKY_SOLVE = register(Op("cholesky_solve", "CholeskySolveBackward0", _infer_cholesky_solve, _build_cholesky_solve,
                             reference=_reference_cholesky_solve,
                             # no generic examples: PyTorch differentiates the whole factor given while its
                             # value reads one triangle (tests/test_linalg_more.py compares with PyTorch)
                             torch_fn=lambda t, b, u, upper: t.cholesky_solve(b, u, upper)))


@CHOLESKY_SOLVE.publish(Names(function=("cholesky_solve",), method=("cholesky_solve",)))
def cholesky_solve(B, L, upper: bool = False):
    """X with ``L L^T X = B`` (``U^T U X = B`` for ``upper``): only the factor's triangle is read."""
    return apply(CHOLESKY_SOLVE, B, L, attrs=(bool(upper),))


def _infer_cholesky_inverse(nodes, upper):
    _matrices("cholesky_inverse", nodes[0])
    return nodes[0].shape, nodes[0].dtype


def _build_cholesky_inverse(p, node, L):
    n = node.shape[-1]
    identity = diag_embed(p, p.materialize(sp.S.One, (n,), node.dtype.name), 0, n, n)
    identity = p.materialize(identity, node.shape, node.dtype.name)
    return emit(p, CholeskySolve, L, identity, sp.true if node.attrs[0] else sp.false, hint="cholesky_inverse")


CHOLESKY_INVERSE = register(Op("cholesky_inverse", "CholeskyInverseBackward0", _infer_cholesky_inverse,
                               _build_cholesky_inverse,
                               reference=lambda L, upper: _reference_cholesky_solve(jnp.eye(L.shape[-1]), L, upper),
                               torch_fn=lambda t, u, upper: t.cholesky_inverse(u, upper)))  # as cholesky_solve


@CHOLESKY_INVERSE.publish(Names(function=("cholesky_inverse",), method=("cholesky_inverse",)))
def cholesky_inverse(L, upper: bool = False):
    """``(L L^T)^-1`` (``(U^T U)^-1``) from a Cholesky factor."""
    return apply(CHOLESKY_INVERSE, L, attrs=(bool(upper),))


TRIANGULAR_SOLVE_DEPRECATED = (
    "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed in a future "
    "PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does not return a copy of one of "
    "the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be replaced with\n"
    "X = torch.linalg.solve_triangular(A, B).")
TriangularSolveReturn = return_type("triangular_solve", ("solution", "cloned_coefficient"))


def _infer_triangular_solve(nodes, part, upper, transpose, unit):
    B, A = nodes
    for name, x in (("b", B), ("A", A)):
        if len(x.shape) < 2:
            raise ValueError(f"torch.triangular_solve: Expected {name} to have at least 2 dimensions, but it has "
                             f"{len(x.shape)} dimensions instead")
    if B.dtype is not A.dtype:
        raise ValueError(f"torch.triangular_solve: Expected b and A to have the same dtype, but found b of type "
                         f"{dtypes.torch_name(B.dtype)} and A of type {dtypes.torch_name(A.dtype)} instead.")
    if A.shape[-1] != A.shape[-2] or A.shape[-1] != B.shape[-2]:
        raise ValueError(f"Incompatible matrix sizes for triangular_solve: each A matrix is {A.shape[-2]} by "
                         f"{A.shape[-1]} but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    batch = broadcast_shapes(B.shape[:-2], A.shape[:-2])
    return (*batch, *(B.shape if part == 0 else A.shape)[-2:]), A.dtype


def _build_triangular_solve(p, node, B, A):
    """Part 0: X with ``op(A) X = B``, op transposing (its triangle with it); part 1: A, batched."""
    part, upper, transpose, unit = node.attrs
    batch = node.shape[:-2]
    A = _batched(p, A, batch)
    if part == 1:
        return p.assign(A * sp.S.One, node.shape, node.dtype.name, "cloned_coefficient")
    if transpose:
        A, upper = p.swap_last(A), not upper
    return _triangular_solve(p, A, _batched(p, B, batch), upper, True, unit)


def _reference_triangular_solve(B, A, part, upper, transpose, unit):
    batch = jnp.broadcast_shapes(B.shape[:-2], A.shape[:-2])
    A = jnp.broadcast_to(A, (*batch, *A.shape[-2:]))
    if part == 1:
        return A
    B = jnp.broadcast_to(B, (*batch, *B.shape[-2:]))
    return jax.lax.linalg.triangular_solve(A, B, left_side=True, lower=not upper, transpose_a=transpose,
                                           unit_diagonal=unit)


TRIANGULAR_SOLVE = register(Op(
    "triangular_solve", "TriangularSolveBackward0", _infer_triangular_solve, _build_triangular_solve,
    reference=_reference_triangular_solve,
    torch_fn=lambda t, b, a, part, upper, transpose, unit: t.triangular_solve(b, a, upper, transpose, unit)[part],
    examples=(Example(((3, 2), (2, 3, 3)), (0, True, False, False)),
              Example(((2, 3, 2), (3, 3)), (0, False, True, True)),
              Example(((3, 2), (2, 3, 3)), (1, True, False, False))),
    domain=("real", "invertible")))


@TRIANGULAR_SOLVE.publish(Names(function=("triangular_solve",), method=("triangular_solve",)))
def triangular_solve(input, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False):
    """Deprecated: the solution of ``op(A) X = input`` and a copy of A, batches broadcast."""
    warnings.warn(TRIANGULAR_SOLVE_DEPRECATED, UserWarning, stacklevel=2)
    attrs = (bool(upper), bool(transpose), bool(unitriangular))
    return TriangularSolveReturn(*(apply(TRIANGULAR_SOLVE, input, A, attrs=(part, *attrs)) for part in (0, 1)))


def _infer_pinv(nodes, atol, rtol, hermitian):
    (A,) = nodes
    _matrices("linalg.pinv", A, square=hermitian)
    *batch, m, n = A.shape
    return (*batch, n, m), A.dtype


PINV = register(Op("pinv", "LinalgPinvBackward0", _infer_pinv,
                   lambda p, node, a: emit(p, Pinv, a, *(sp.Float(v) for v in node.attrs[:2]),
                                           sp.true if node.attrs[2] else sp.false, hint="pinv"),
                   reference=lambda a, atol, rtol, hermitian: jnp.linalg.pinv(a, rtol=rtol, hermitian=hermitian),
                   torch_fn=lambda t, a, atol, rtol, hermitian: t.linalg.pinv(a, atol=atol, rtol=rtol,
                                                                              hermitian=hermitian),
                   examples=(Example(((4, 3),), (0.0, 1e-12, False)), Example(((2, 3, 5),), (0.0, 1e-12, False))),
                   domain=("spread",)))


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False):
    """``torch.linalg.pinv``: singular values at most ``max(atol, rtol * largest)`` count as zero;
    without either, rtol is ``eps * max(m, n)`` (and 0 when only atol is given)."""
    if rtol is None:
        rtol = float(np.finfo(A.dtype.numpy).eps) * max(A.shape[-2:]) if atol is None or atol <= 0 else 0.0
    return apply(PINV, A, attrs=(float(atol or 0.0), float(rtol), bool(hermitian)))


@PINV.publish(Names(function=("pinverse",), method=("pinverse",)))
def pinverse(input, rcond: float = 1e-15):
    return pinv(input, rtol=rcond)


LstsqReturn = return_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _infer_lstsq(nodes, part, rcond, residuals, vector):
    A, B = nodes
    *batch, m, n = A.shape
    columns = () if vector else B.shape[-1:]
    batch = broadcast_shapes(tuple(batch), B.shape[:-1] if vector else B.shape[:-2])
    if part == 0:
        return (*batch, n, *columns), A.dtype
    return ((*batch, *columns) if residuals else (0,)), A.dtype


def _build_lstsq(p, node, A, B):
    """The solution ``pinv(A) B`` (singular values under ``rcond`` times the largest dropped), so its
    gradient is the pseudo-inverse's, as PyTorch's; part 1 the squared residuals per column."""
    part, rcond, residuals, vector = node.attrs
    if vector:
        B = p.reshape(B, (*p.shape_of(B), 1))
    batch = broadcast_shapes(p.shape_of(A)[:-2], p.shape_of(B)[:-2])
    X = p.matmul(emit(p, Pinv, _batched(p, A, batch), sp.Float(0.0), sp.Float(rcond), sp.false, hint="pinv"),
                 _batched(p, B, batch))
    if part == 0:
        return p.reshape(X, node.shape)
    if not residuals:
        return p.materialize(sp.S.Zero, (0,), node.dtype.name)
    difference = p.assign(p.matmul(_batched(p, A, batch), X) - _batched(p, B, batch),
                          (*batch, *p.shape_of(B)[-2:]), node.dtype.name, "residual")
    squared = p.assign(difference * difference, p.shape_of(difference), node.dtype.name, "squared")
    return p.reshape(p.reduce_sum(squared, (len(batch),), False), node.shape)


LSTSQ = register(Op("lstsq", "LinalgLstsqBackward0", _infer_lstsq, _build_lstsq,
                    reference=lambda a, b, part, rcond, residuals, vector: jnp.linalg.pinv(a) @ b,
                    torch_fn=lambda t, a, b, part, rcond, residuals, vector: t.linalg.lstsq(a, b, rcond)[part],
                    examples=(Example(((5, 3), (5, 2)), (0, 1e-10, False, False)),), domain=("spread", "real")))


def lstsq(A, B, rcond=None, *, driver=None):
    """``torch.linalg.lstsq`` on the CPU: the least-squares (minimum-norm) solution, the squared
    residuals (for tall full-rank A, not with 'gelsy'), the numerical rank (not with 'gels') and the
    singular values ('gelsd', 'gelss'); B a vector when it has one dim fewer than A."""
    driver = "gelsy" if driver is None else driver
    if driver not in DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if not 0 <= A.ndim - B.ndim <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    vector = A.ndim - B.ndim == 1
    if A.shape[-2] != B.shape[-1 if vector else -2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2:]
    if rcond is None:
        rcond = float(np.finfo(A.dtype.numpy).eps) * max(m, n)
    values = apply(SVD, A.detach(), attrs=(1, False)) if driver != "gels" else None
    rank = None
    if values is not None:
        cutoff = values.amax(-1, keepdim=True) * rcond if values.shape[-1] else values.sum(-1, keepdim=True)
        rank = (values > cutoff).sum(-1)
    full_rank = rank is None or bool((rank == n).all())
    residuals = m > n and driver != "gelsy" and full_rank
    solution, squared = (apply(LSTSQ, A, B, attrs=(part, float(rcond), residuals, vector)) for part in (0, 1))
    empty = lambda dtype: _tensor(np.zeros((0,)), dtype=dtype)  # noqa: E731
    return LstsqReturn(solution, squared, rank if driver != "gels" else empty(dtypes.int64),
                       values if driver in ("gelsd", "gelss") else empty(A.dtype))
