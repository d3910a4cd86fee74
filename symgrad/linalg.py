"""``torch.linalg``: the norms and the cross product so far (the decompositions are to come)."""
from __future__ import annotations

from symgrad.ops import linalg as _ops
from symgrad.ops.reductions import matrix_norm, vector_norm

__all__ = ["cross", "matrix_norm", "vector_norm"]


def cross(input, other, *, dim: int = -1):
    """``torch.linalg.cross``: along ``dim`` (default the last), unlike ``torch.cross``'s first of size 3."""
    return _ops.cross(input, other, dim=dim)
