"""``torch.linalg``: norms, the cross product, and the factorizations with their named results."""
from __future__ import annotations

from symgrad.ops import linalg as _ops
from symgrad.ops.linalg import LinAlgError, det, svdvals
from symgrad.ops.reductions import matrix_norm, vector_norm
from symgrad.ops.products import matrix_power, multi_dot

__all__ = ["LinAlgError", "cholesky", "cross", "det", "eigh", "eigvalsh", "inv", "matrix_norm", "matrix_power",
           "multi_dot", "norm", "qr", "slogdet", "solve", "solve_triangular", "svd", "svdvals", "vector_norm"]

EighReturn = _ops.return_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
SvdReturn = _ops.return_type("linalg_svd", ("U", "S", "Vh"))
solve, solve_triangular = _ops.solve, _ops.solve_triangular


def cross(input, other, *, dim: int = -1):
    """``torch.linalg.cross``: along ``dim`` (default the last), unlike ``torch.cross``'s first of size 3."""
    return _ops.cross(input, other, dim=dim)


def inv(A):
    return _ops.inverse(A)


def slogdet(A):
    return _ops.LinalgSlogdetReturn(*_ops.slogdet_parts(A))


def cholesky(A, *, upper: bool = False):
    return _ops.linalg_cholesky(A, upper=upper)


def qr(A, mode: str = "reduced"):
    return _ops.LinalgQrReturn(*_ops.qr_parts(A, mode))


def eigh(A, UPLO: str = "L"):
    return EighReturn(*_ops.eigh_parts(A, UPLO))


def eigvalsh(A, UPLO: str = "L"):
    return _ops.eigh_parts(A, UPLO)[0]


def svd(A, full_matrices: bool = True):
    return SvdReturn(*_ops.svd_parts(A, full_matrices))


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None):
    """``torch.linalg.norm``: a vector norm over one dim (or all, with no ord); a matrix norm over
    two dims (the last two of a matrix given an ord)."""
    if isinstance(dim, int) or (dim is not None and len(dim) == 1):
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None:
        if ord is None:
            return vector_norm(A, 2, None, keepdim, dtype=dtype)
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                               f"Got {A.ndim}D.")
        if A.ndim == 1:
            return vector_norm(A, ord, None, keepdim, dtype=dtype)
        dim = (-2, -1)
    return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
