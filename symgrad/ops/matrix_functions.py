"""Functions of a square matrix defined by a power series: the matrix exponential."""
from __future__ import annotations

import jax

from symgrad import dtypes
from symgrad.ir.linalg import MatrixExp, emit
from symgrad.ops.linalg import _matrices
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import apply


def _infer_matrix_exp(nodes):
    """PyTorch's checks of a factorization's input, except that half precision is allowed."""
    (A,) = nodes
    if A.dtype is dtypes.float16 and len(A.shape) >= 2 and A.shape[-1] == A.shape[-2]:
        return A.shape, A.dtype
    _matrices("linalg.matrix_exp", A)
    return A.shape, A.dtype


MATRIX_EXP = register(Op("matrix_exp", "LinalgMatrixExpBackward0", _infer_matrix_exp,
                         lambda p, node, a: emit(p, MatrixExp, a, hint="matrix_exp"),
                         reference=jax.scipy.linalg.expm, torch_fn=lambda t, a: t.linalg.matrix_exp(a),
                         examples=(Example(((3, 3),)), Example(((2, 2, 2),))), domain=("spread",)))


@MATRIX_EXP.publish(Names(function=("matrix_exp",), method=("matrix_exp",)))
def matrix_exp(A):
    """``exp(A) = sum_k A^k / k!`` of each matrix in the last two dims."""
    return apply(MATRIX_EXP, A)
