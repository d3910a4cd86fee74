"""``torch.linalg``: norms, the cross product, and the factorizations with their named results;
the ``_ex`` spellings (an ``info`` code instead of an error), and the functions PyTorch composes
from others (``vecdot``, ``vander``, ``cond``, ``matrix_rank``, ``tensorinv``, ``tensorsolve``)."""
from __future__ import annotations

import math

import numpy as np

from symgrad import dtypes, engine
from symgrad.creation import tensor as _tensor
from symgrad.ops import linalg as _ops
from symgrad.ops.linalg import LinAlgError, det, matmul, svdvals
from symgrad.ops.factor_solves import lstsq, pinv
from symgrad.ops.householder import householder_product
from symgrad.ops.lu import lu, lu_factor, lu_factor_ex, lu_solve
from symgrad.ops.matrix_functions import matrix_exp
from symgrad.ops.reductions import matrix_norm, vector_norm
from symgrad.ops.products import matrix_power, multi_dot, vdot
from symgrad.ops.shape import cat

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eigh", "eigvalsh",
           "householder_product", "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul",
           "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet",
           "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
           "vector_norm"]

EighReturn = _ops.return_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
SvdReturn = _ops.return_type("linalg_svd", ("U", "S", "Vh"))
InvExReturn = _ops.return_type("linalg_inv_ex", ("inverse", "info"))
CholeskyExReturn = _ops.return_type("linalg_cholesky_ex", ("L", "info"))
SolveExReturn = _ops.return_type("linalg_solve_ex", ("result", "info"))
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


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """``torch.diagonal`` with the last two dims as the default matrix."""
    return A.diagonal(offset, dim1, dim2)


def vecdot(x, y, *, dim: int = -1):
    """The dot product along ``dim``, batches broadcast (a product and a sum, as PyTorch composes it)."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{dtypes.torch_name(x.dtype)} and y of type {dtypes.torch_name(y.dtype)} instead")
    return vdot(x, y) if x.ndim == y.ndim == 1 else (x * y).sum(dim)


def vander(x, *, N: int | None = None):
    """Columns ``x^0 .. x^(N-1)``, the powers as running products (PyTorch's values)."""
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    return cat([x.new_ones((*x.shape, 1)), x.unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)], -1)


def _codes(batch, found):
    """An int32 code per matrix of ``batch``: ``found`` maps a batch index to its LAPACK info."""
    codes = np.zeros(math.prod(batch), dtype=np.int32)
    for index, code in found:
        codes[index] = code
    return _tensor(codes.reshape(batch), dtype=dtypes.int32)


def _labelled(found):
    """(batch index, code) from ``(label, code)`` pairs whose label is ``(Batch element k): `` or empty."""
    return [(int(label.split()[2][:-2]) if label else 0, code) for label, code in found]


def inv_ex(A, *, check_errors: bool = False):
    """The inverse and, per matrix, the (1-based) zero pivot of its LU factorization, or 0."""
    if check_errors:
        return InvExReturn(_ops.inverse(A), _codes(tuple(A.shape[:-2]), []))
    result = _ops.apply(_ops.INV, A)
    found = _ops._singular_batches(result, A, tuple(A.shape))
    return InvExReturn(result, _codes(tuple(A.shape[:-2]), _labelled(found)))


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False):
    """``solve``'s result and, per matrix, the zero pivot of A's LU factorization, or 0."""
    if check_errors:
        result = solve(A, B, left=left)
        return SolveExReturn(result, _codes(tuple(A.shape[:-2]), []))
    vector = left and (B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1])))
    result = _ops.apply(_ops.SOLVE, A, B, attrs=(vector, bool(left)))
    batch = tuple(result.shape[:-1 if vector else -2])
    found = _ops._singular_batches(result, A, (*batch, *A.shape[-2:]))
    return SolveExReturn(result, _codes(batch, _labelled(found)))


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False):
    """The Cholesky factor and, per matrix, the order of the first leading minor that is not
    positive-definite, or 0."""
    if check_errors:
        return CholeskyExReturn(cholesky(A, upper=upper), _codes(tuple(A.shape[:-2]), []))
    result = _ops.apply(_ops.CHOLESKY, A, attrs=(bool(upper), "LinalgCholeskyExBackward0"))
    found = []
    if np.isnan(np.asarray(engine.concrete_array(result._node))).any():
        matrices = np.asarray(engine.concrete_array(A._node), dtype=np.float64).reshape(-1, *A.shape[-2:])
        found = [(k, _ops._failed_minor(m)) for k, m in enumerate(matrices) if _ops._failed_minor(m) is not None]
    return CholeskyExReturn(result, _codes(tuple(A.shape[:-2]), found))


def matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False):
    """How many singular values (eigenvalue magnitudes when ``hermitian``) exceed
    ``max(atol, rtol * largest)``; rtol defaults as in ``pinv``."""
    if rtol is None:
        rtol = float(np.finfo(A.dtype.numpy).eps) * max(A.shape[-2:]) if atol is None or atol <= 0 else 0.0
    values = (eigvalsh(A).abs() if hermitian else svdvals(A)).detach()
    largest = values.amax(-1, keepdim=True) if values.shape[-1] else values.sum(-1, keepdim=True)
    cutoff = (largest * rtol).clamp_min(float(atol or 0.0))
    return (values > cutoff).sum(-1)


def cond(A, p=None):
    """The condition number: ``s_max / s_min`` for p None or 2 (``s_min / s_max`` for -2), else
    ``norm(A, p) * norm(A^-1, p)`` (inf where A is singular, as PyTorch's NaN-to-inf)."""
    if p in (None, 2, -2):
        s = svdvals(A)
        big, small = s[..., :1], s[..., -1:]
        return (small / big if p == -2 else big / small).squeeze(-1)
    product = matrix_norm(A, p) * matrix_norm(_ops.apply(_ops.INV, A), p)
    return product.nan_to_num(float("inf"), float("inf"))


def tensorinv(A, ind: int = 2):
    """The inverse of A read as a matrix (its first ``ind`` dims as rows), its shape turned round."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(cols)} != {math.prod(rows)}")
    return inv(A.reshape(math.prod(rows), -1)).reshape(*cols, *rows)


def tensorsolve(A, B, dims=None):
    """X with ``tensordot(A, X, X.ndim) = B``: A read as a matrix with B's dims as rows (``dims``
    of A moved last first)."""
    if dims is not None:
        moved = [d % A.ndim for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in moved], *moved)
    result_shape = tuple(A.shape[B.ndim:])
    rows = B.numel()
    if math.prod(result_shape) != rows:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {math.prod(result_shape)} != {rows}")
    return solve(A.reshape(rows, rows), B.reshape(rows)).reshape(*result_shape)
