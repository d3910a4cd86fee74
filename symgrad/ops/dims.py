"""PyTorch's ``dim`` arguments as axes: negative dims, tuples of dims, 0-dim tensors."""
from __future__ import annotations


def normalize_dims(dim, ndim: int, *, empty_means_all: bool = False):
    """PyTorch's ``dim`` argument (None, an int or a sequence; negatives allowed) as sorted axes.

    None is None; an empty sequence means every axis where ``empty_means_all`` (reductions).
    """
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims and empty_means_all:
        return tuple(range(ndim))
    rank = max(ndim, 1)
    out = []
    for d in dims:
        if not -rank <= d < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {d})")
        if d % rank in out:
            raise RuntimeError(f"dim {d % rank} appears multiple times in the list of dims")
        out.append(d % rank)
    return tuple(sorted(out)) if ndim else ()


def dim_index(dim: int, ndim: int) -> int:
    """One ``dim`` argument as an axis; a 0-dim tensor accepts 0 and -1, as in PyTorch."""
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    return dim % rank
