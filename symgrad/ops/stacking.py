"""NumPy's splitting and stacking along named axes: tensor_split, hsplit, vsplit, dsplit (slices
of the input, views), dstack, column_stack, row_stack (joins), and atleast_1d/2d/3d, the shapes
those joins give their inputs first."""
from __future__ import annotations

from symgrad import dtypes
from symgrad.ops.dims import dim_index
from symgrad.ops.registry import Names
from symgrad.ops.shape import CAT, PIECE, RESHAPE, cat, hstack, reshape, unsqueeze, vstack
from symgrad.tensor import Tensor, apply

# ---------------------------------------------------------------------------- splitting


def _slices(input, axis: int, bounds):
    """The pieces of ``input`` between consecutive ``bounds`` along ``axis``, each a slice as Python
    reads one (negative bounds count from the end, a piece may be empty): views, SliceBackward0,
    each the middle piece of a split in three."""
    size = input.shape[axis]
    pieces = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        start, stop, _ = slice(start, stop).indices(size)
        stop = max(start, stop)
        pieces.append(apply(PIECE, input, attrs=(axis, (start, stop - start, size - stop), 1, "SliceBackward0")))
    return tuple(pieces)


def _split_points(indices_or_sections, size: int) -> list:
    """Where tensor_split cuts: an int is a number of sections (the first ``size % sections`` one
    longer), a sequence or a 1-D int64 tensor the indices, a 0-d int64 tensor a number of sections."""
    given = indices_or_sections
    if isinstance(given, Tensor):
        if given.dtype is not dtypes.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{dtypes.torch_name(given.dtype).removesuffix('Tensor')}")
        if given.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {given.ndim} dims")
        given = given.item() if given.ndim == 0 else given.tolist()
    if isinstance(given, int):
        if given <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {given}")
        short, longer = divmod(size, given)
        points = [0]
        for section in range(given):
            points.append(points[-1] + short + (section < longer))
        return points
    return [0, *(int(i) for i in given), size]


@PIECE.publish(Names(function=("tensor_split",), method=("tensor_split",)))
def tensor_split(input, indices_or_sections, dim: int = 0):
    """Pieces of ``input`` along ``dim``: as many sections as an int says, or cut at the indices
    given; every piece a view."""
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    axis = dim_index(dim, input.ndim)
    return _slices(input, axis, _split_points(indices_or_sections, input.shape[axis]))


def _numpy_split(name: str, least: int, axis_of):
    """hsplit, vsplit, dsplit: tensor_split along one axis, with an int that must divide it."""
    def split(input, indices_or_sections):
        if input.ndim < least:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {least} dimension, but got a tensor "
                               f"with {input.ndim} dimensions!")
        axis = axis_of(input.ndim)
        if isinstance(indices_or_sections, int) and (
                indices_or_sections == 0 or input.shape[axis] % indices_or_sections):
            raise RuntimeError(f"torch.{name} attempted to split along dimension {axis}, but the size of the "
                               f"dimension {input.shape[axis]} is not divisible by the split_size "
                               f"{indices_or_sections}!")
        return tensor_split(input, indices_or_sections, axis)
    split.__name__ = split.__qualname__ = name
    return PIECE.publish(Names(function=(name,), method=(name,)))(split)


hsplit = _numpy_split("hsplit", 1, lambda ndim: 1 if ndim > 1 else 0)
vsplit = _numpy_split("vsplit", 2, lambda ndim: 0)
dsplit = _numpy_split("dsplit", 3, lambda ndim: 2)

# ------------------------------------------------------------------------- at least n-d


def _at_least(name: str, rank: int, raise_rank):
    """atleast_1d/2d/3d: each tensor with fewer than ``rank`` dims reshaped (a 0-d one, ViewBackward0)
    or unsqueezed (``raise_rank``); one that has them is returned as it is.  Several tensors, or one
    sequence of them, give a tuple."""
    def at_least(*tensors):
        many = len(tensors) != 1 or isinstance(tensors[0], (list, tuple))
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tuple(tensors[0])
        raised = tuple(t if t.ndim >= rank else reshape(t, *(1,) * rank) if t.ndim == 0 else raise_rank(t)
                       for t in tensors)
        return raised if many else raised[0]
    at_least.__name__ = at_least.__qualname__ = name
    return RESHAPE.publish(Names(function=(name,)))(at_least)


atleast_1d = _at_least("atleast_1d", 1, None)
atleast_2d = _at_least("atleast_2d", 2, lambda t: unsqueeze(t, 0))
atleast_3d = _at_least("atleast_3d", 3, lambda t: unsqueeze(t, -1) if t.ndim == 2 else unsqueeze(unsqueeze(t, 0), -1))

# ------------------------------------------------------------------------------ joining


def _nonempty(name: str, tensors) -> list:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


@CAT.publish(Names(function=("dstack",)))
def dstack(tensors):
    """Along the third axis, each tensor made at least 3-D first."""
    return cat(atleast_3d(_nonempty("dstack", tensors)), 2)


@CAT.publish(Names(function=("column_stack",)))
def column_stack(tensors):
    """Columns: 0-d and 1-D tensors become columns, then hstack."""
    return hstack([reshape(t, t.numel(), 1) if t.ndim <= 1 else t for t in _nonempty("column_stack", tensors)])


@CAT.publish(Names(function=("row_stack",)))
def row_stack(tensors):
    """vstack's other name."""
    return vstack(tensors)
