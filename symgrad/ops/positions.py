"""Positions of a tensor's nonzero elements: nonzero, argwhere and ``where(condition)``, and the
positions a mask selects (``x[mask]``, masked_select: symgrad.ops.indexing).

How many there are depends on the values, so the values are read when the call is made (a
computed tensor is computed for it) and each axis' positions become an int64 input: a loop that
asks every step records one node per call and reuses one compiled program.  Inside a JAX trace
the values are not known, and the call is refused.
"""
from __future__ import annotations

import numpy as np

from symgrad import dtypes, engine
from symgrad.nodes import leaf
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply
from symgrad.uploads import from_host


def positions(tensor: Tensor, what: str, shape=None) -> list:
    """Each axis' positions of the nonzero elements (NaN is nonzero), as int64 tensors; ``shape``:
    the tensor broadcast to it first.  ``what`` names the call a trace refuses."""
    values = engine.concrete_array(tensor._node)
    if values is None:
        raise NotImplementedError(f"symgrad: {what} inside a traced function (its result's shape depends on the "
                                  f"values)")
    values = np.asarray(values)
    if shape is not None:
        values = np.broadcast_to(values, shape)
    return [Tensor(leaf(from_host(p.astype(np.int64)), dtypes.int64)) for p in np.nonzero(values.reshape(
        values.shape or (1,)))]


def _build_nonzero(p, node, *columns):
    (ndim,) = node.attrs
    n = node.shape[0]
    stacked = p.concatenate([p.reshape(c, (n, 1)) for c in columns], 1, (n, len(columns)), "int64")
    return stacked if ndim else p.index(stacked, ((1, 0, n, 1), (1, 0, 0, 1)))  # a 0-d tensor's: no columns


NONZERO = register(Op("nonzero", None, lambda nodes, ndim: ((nodes[0].shape[0], ndim), dtypes.int64), _build_nonzero,
                      saves=False))


@NONZERO.publish(Names(function=("nonzero",), method=("nonzero",)))
def nonzero(input, *, as_tuple: bool = False):
    """The positions as rows of an (n, ndim) tensor, or (``as_tuple``) one tensor per axis (a 0-d
    tensor's as one axis, as PyTorch's)."""
    found = positions(input, "nonzero")
    if as_tuple:
        return tuple(found)
    return apply(NONZERO, *found, attrs=(input.ndim,))


@NONZERO.publish(Names(function=("argwhere",), method=("argwhere",)))
def argwhere(input):
    return nonzero(input)
