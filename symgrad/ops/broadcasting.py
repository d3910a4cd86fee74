"""Broadcasting as functions users call: ``broadcast_shapes`` (the shape alone), ``broadcast_to`` and
``broadcast_tensors`` (expanded views of their inputs, ExpandBackward0, as PyTorch's)."""
from __future__ import annotations

import operator

from symgrad import dtypes
from symgrad.ir import broadcast_shapes as common_shape
from symgrad.ops.registry import Names
from symgrad.ops.shape import EXPAND, _shape_arg, expand


def _as_shape(shape) -> tuple:
    """One argument of broadcast_shapes: an int is a 1-D shape."""
    if not isinstance(shape, (bool, float)) and hasattr(shape, "__index__"):
        return (operator.index(shape),)
    if not isinstance(shape, (tuple, list)):
        raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {shape}")
    return tuple(shape)


@EXPAND.publish(Names(function=("broadcast_shapes",)))
def broadcast_shapes(*shapes) -> dtypes.Size:
    """The shape the given shapes broadcast to, read from the last dimension, with PyTorch's errors
    naming the first argument that does not fit."""
    shapes = [_as_shape(s) for s in shapes if s is not None]
    result = [1] * max((len(s) for s in shapes), default=0)
    for number, shape in enumerate(shapes):
        for at in range(-1, -len(shape) - 1, -1):
            size = shape[at]
            if size == result[at]:
                continue
            if result[at] == 1:
                if size < 0:
                    raise ValueError("Attempting to broadcast a dimension with negative length!")
                result[at] = size
            elif size != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {size} at {at}! Mismatching "
                                   f"argument at index {number} had {shape}; but expected shape should be "
                                   f"broadcastable to {result}")
    return dtypes.Size(result)


@EXPAND.publish(Names(function=("broadcast_to",), method=("broadcast_to",)))
def broadcast_to(input, size):
    """``input.expand(size)``: a view."""
    return expand(input, *_shape_arg((size,)))


@EXPAND.publish(Names(function=("broadcast_tensors",)))
def broadcast_tensors(*tensors) -> tuple:
    """Each tensor expanded to the common shape; one already of that shape is returned as it is."""
    try:
        shape = common_shape(*(tuple(t.shape) for t in tensors))
    except ValueError as error:
        raise RuntimeError(str(error)) from None
    return tuple(t if tuple(t.shape) == shape else expand(t, *shape) for t in tensors)
