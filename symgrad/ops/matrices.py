"""Matrices built from vectors, and positions in them: diag_embed and diagflat (vectors on a
diagonal), block_diag (blocks on the diagonal), vander (powers), tril_indices and triu_indices (the
positions of a triangle) and combinations (entries taken at the positions of a triangle's tuples)."""
from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.ir import indexing as IX
from symgrad.nodes import leaf
from symgrad.ops.dims import dim_index
from symgrad.ops.indexing import index_select
from symgrad.ops.refusals import refused
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.ops.shape import STACK, ravel, stack
from symgrad.tensor import Tensor, apply
from symgrad.uploads import from_host


def _int64(values) -> Tensor:
    return Tensor(leaf(from_host(np.asarray(values, np.int64)), dtypes.int64))


# --------------------------------------------------------------------------- diagonals


def _embedded_shape(shape, offset, axis1, axis2):
    """The batch dims of ``shape`` (all but its last) around two new square dims at ``axis1`` and ``axis2``."""
    n = shape[-1] + abs(offset)
    batch = iter(shape[:-1])
    return tuple(n if d in (axis1, axis2) else next(batch) for d in range(len(shape) + 1))


def _build_diag_embed(p, node, x):
    """The last axis on diagonal ``offset`` of two new last axes, those moved to ``axis1`` (rows) and
    ``axis2`` (columns)."""
    offset, axis1, axis2 = node.attrs
    n = node.shape[axis1]
    embedded = IX.diag_embed(p, x, offset, n, n)
    rank = len(node.shape)
    batch = iter(range(rank - 2))
    perm = [rank - 2 if d == axis1 else rank - 1 if d == axis2 else next(batch) for d in range(rank)]
    return p.permute(embedded, perm)


def _reference_diag_embed(x, offset, axis1, axis2):
    n = x.shape[-1] + abs(offset)
    square = jnp.zeros((*x.shape[:-1], n, n), x.dtype)
    rows, columns = jnp.arange(x.shape[-1]) + max(-offset, 0), jnp.arange(x.shape[-1]) + max(offset, 0)
    return jnp.moveaxis(square.at[..., rows, columns].set(x), (-2, -1), (axis1, axis2))


DIAG_EMBED = register(Op("diag_embed_dims", "DiagEmbedBackward0",
                         lambda nodes, offset, axis1, axis2: (_embedded_shape(nodes[0].shape, offset, axis1, axis2),
                                                              nodes[0].dtype),
                         _build_diag_embed, saves=False, reference=_reference_diag_embed,
                         torch_fn=lambda t, x, offset, axis1, axis2: t.diag_embed(x, offset, axis1, axis2),
                         examples=(Example(((2, 3),), (0, 1, 2)), Example(((2, 3),), (1, 0, 2)),
                                   Example(((2, 3),), (-1, 2, 0)))))


@DIAG_EMBED.publish(Names(function=("diag_embed",), method=("diag_embed",)))
def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Each vector along the last dim on diagonal ``offset`` of a matrix in dims ``dim1``, ``dim2``."""
    rank = input.ndim + 1
    axis1, axis2 = dim_index(dim1, rank), dim_index(dim2, rank)
    if axis1 == axis2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(DIAG_EMBED, input, attrs=(int(offset), axis1, axis2))


@DIAG_EMBED.publish(Names(function=("diagflat",), method=("diagflat",)))
def diagflat(input, offset: int = 0):
    """The flattened input on diagonal ``offset`` of a square matrix."""
    return diag_embed(input if input.ndim == 1 else ravel(input), offset)


# ------------------------------------------------------------------------------ blocks


def _block(shape) -> tuple:
    """The matrix a block_diag input is: a 0-d tensor (1, 1), a vector one row."""
    return (1, 1) if not shape else (1, shape[0]) if len(shape) == 1 else tuple(shape)


def _infer_block_diag(nodes):
    blocks = [_block(n.shape) for n in nodes]
    shape = (sum(b[0] for b in blocks), sum(b[1] for b in blocks)) if nodes else (1, 0)
    return shape, dtypes.promote([(n.dtype, 2 if n.shape else 1) for n in nodes] or [(dtypes.get_default_dtype(), 2)])


def _build_block_diag(p, node, *blocks):
    """Zeros, each block written at its place along the diagonal."""
    out = p.materialize(sp.S.Zero, node.shape, node.dtype.name)
    row = column = 0
    for block, given in zip(blocks, node.inputs):
        rows, columns = _block(given.shape)
        value = p.astype(p.reshape(p.materialize(block, given.shape, given.dtype.name), (rows, columns)),
                         node.dtype.name)
        out = IX.index_set(p, out, value, ((1, row, row + rows, 1), (1, column, column + columns, 1)))
        row, column = row + rows, column + columns
    return out


BLOCK_DIAG = register(Op("block_diag", "BlockDiagBackward0", _infer_block_diag, _build_block_diag, saves=False,
                         torch_fn=lambda t, *blocks: t.block_diag(*blocks)))


@BLOCK_DIAG.publish(Names(function=("block_diag",)))
def block_diag(*tensors):
    """The tensors (0-d: 1x1, 1-D: one row, 2-D) along the diagonal of one matrix, zeros elsewhere,
    in the dtype they promote to."""
    for number, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {number} "
                               f"has {t.ndim} dimensions")
    return apply(BLOCK_DIAG, *tensors)


# ------------------------------------------------------------------------------ powers

VANDER_BACKWARD = ("one of the variables needed for gradient computation has been modified by an inplace "
                   "operation: torch.vander's result, which PyTorch's kernel fills in place after its cumprod "
                   "saved it (its backward refuses it)")


def _build_vander(p, node, x):
    """Columns of ones, x, x*x ... (a running product, in float64 for floats as PyTorch's cumprod
    runs), reversed unless ``increasing``; PyTorch's backward raises."""
    columns, increasing = node.attrs
    n, dtype = node.shape[0], node.dtype.name
    wide = "float64" if node.dtype.is_floating_point else dtype
    repeated = p.materialize(p.reshape(p.astype(x, wide), (n, 1)), (n, columns - 1), wide)
    powers = p.astype(p.cumprod(repeated, 1), dtype)
    ones = p.materialize(sp.S.One, (n, 1), dtype)
    matrix = p.concatenate([ones, powers], 1, node.shape, dtype)
    matrix = matrix if increasing else IX.flip(p, matrix, (1,))
    return refused(p, matrix, node.shape, dtype, VANDER_BACKWARD)


def _vander_dtype(dtype):
    return dtype if dtype.is_floating_point else dtypes.int64


VANDER = register(Op("vander", lambda nodes, columns, increasing: "CopySlices" if increasing else "FlipBackward0",
                     lambda nodes, columns, increasing: ((nodes[0].shape[0], columns), _vander_dtype(nodes[0].dtype)),
                     _build_vander, saves=False))


@VANDER.publish(Names(function=("vander",)))
def vander(x, N=None, increasing: bool = False):
    """The powers of x, up to ``N`` columns (x's length if not given): x**(N-1) ... x**0, or the
    other way round if ``increasing``; integers in int64."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    columns = x.shape[0] if N is None else int(N)
    if columns < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = _vander_dtype(x.dtype)
    if columns < 2:  # ones or nothing: PyTorch's result keeps no history
        return Tensor(leaf(from_host(np.ones((x.shape[0], columns), dtype.numpy)), dtype))
    return apply(VANDER, x, attrs=(columns, bool(increasing)))


# -------------------------------------------------------------------- triangles' positions


def _triangle_indices(name: str, make):
    def indices(row: int, col: int, offset: int = 0, *, dtype=dtypes.int64, device=None, layout=None):
        for given, value in (("row", row), ("col", col)):
            if value < 0:
                raise RuntimeError(f"{given} must be non-negative, got{value}")
        if dtype not in (dtypes.int32, dtypes.int64):
            raise NotImplementedError(f'"{name}" not implemented for '
                                      f"'{dtypes.torch_name(dtype).removesuffix('Tensor')}'")
        positions = np.stack(make(row, offset, col))
        return Tensor(leaf(from_host(positions.astype(dtype.numpy)), dtype))
    indices.__name__ = indices.__qualname__ = name
    indices.__doc__ = (f"The (row, column) positions of the {name[:4]} triangle of a row x col matrix, in row-major "
                       f"order.")
    return STACK.publish(Names(function=(name,)))(indices)


tril_indices = _triangle_indices("tril_indices", np.tril_indices)
triu_indices = _triangle_indices("triu_indices", np.triu_indices)


@STACK.publish(Names(function=("combinations",)))
def combinations(input, r: int = 2, with_replacement: bool = False):
    """The ``r``-tuples of a vector's entries (with_replacement: repeats allowed), one per row, in
    itertools' order: one index_select per column, stacked."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return Tensor(leaf(from_host(np.zeros(0, input.dtype.numpy)), input.dtype))
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    tuples = np.array(list(choose(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    return stack([index_select(input, 0, _int64(tuples[:, k])) for k in range(r)], 1)
