"""``torch.gradient``: a function's derivative estimated from its samples, by central differences
inside and one-sided differences (first or second order) at the two ends.

It is a composition of slices, arithmetic and one ``cat`` per dim (``CatBackward0``, as PyTorch's),
so it has a gradient like any composition.  Samples are evenly spaced (a number per dim) or at
given coordinates (a 1-D tensor per dim).
"""
from __future__ import annotations

import numbers

from symgrad.ops.dims import dim_index
from symgrad.ops.registry import Names
from symgrad.ops.shape import CAT, cat
from symgrad.tensor import Tensor


@CAT.publish(Names(function=("gradient",)))
def gradient(input, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """One estimate per dim in ``dim`` (every dim by default), each of ``input``'s shape."""
    dims = _dims(input, dim)
    steps = _spacings(input, spacing, dims, dim is not None)
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if [d for d in dims if input.shape[d] < edge_order + 1]:
        raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    return tuple(_along(input, d, step, edge_order) for d, step in zip(dims, steps))


def _dims(input, dim) -> tuple:
    if dim is None:
        return tuple(range(input.ndim))
    dims = tuple(dim_index(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim))
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return dims


def _spacings(input, spacing, dims, dim_given: bool) -> list:
    """A number or a 1-D coordinates tensor for each of ``dims``, with PyTorch's errors."""
    if isinstance(spacing, numbers.Number):
        return [spacing] * len(dims)
    if isinstance(spacing, Tensor):
        raise TypeError("gradient() received an invalid combination of arguments: spacing must be a number or a "
                        "tuple of numbers or of tensors, not a Tensor")
    spacing = list(spacing)
    if len(spacing) != len(dims):
        if dim_given:
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length equal "
                           f"to 'self.dim() = {input.ndim}', since dim argument was not given, but got a list of "
                           f"length {len(spacing)}")
    for step in spacing:
        if isinstance(step, Tensor) and step.ndim != 1:
            raise RuntimeError(f"torch.gradient expected each element of spacing to have one dimension, but got an "
                               f"element with {step.ndim} dimensions!")
    return spacing


def _along(f, d: int, step, edge_order: int):
    """The estimate along dim ``d``: the first end, the inside, the last end, joined."""
    n = f.shape[d]

    def at(start, stop=n):  # f[start:stop] along d (Python's negative positions)
        start, stop = start % n, stop + n if stop < 0 else stop
        return f.narrow(d, start, stop - start)

    if isinstance(step, Tensor):
        first, inside, last = _at_coordinates(f, d, step, at, edge_order)
    else:
        inside = (at(2) - at(0, -2)) / (2 * step)
        if edge_order == 1:
            first, last = (at(1, 2) - at(0, 1)) / step, (at(-1) - at(-2, -1)) / step
        else:
            first = (-1.5 * at(0, 1) + 2 * at(1, 2) - 0.5 * at(2, 3)) / step
            last = (0.5 * at(-3, -2) - 2 * at(-2, -1) + 1.5 * at(-1)) / step
    return cat([first, inside, last], d)


def _at_coordinates(f, d: int, coordinates, at, edge_order: int):
    """Samples at ``coordinates``: each inside point weighs its two neighbours by the gaps to them."""
    gaps = coordinates[1:] - coordinates[:-1]
    shape = [1] * f.ndim
    shape[d] = -1
    left, right = gaps[:-1], gaps[1:]
    inside = ((-right / (left * (left + right))).reshape(shape) * at(0, -2)
              + ((right - left) / (left * right)).reshape(shape) * at(1, -1)
              + (left / (right * (left + right))).reshape(shape) * at(2))
    g0, g1, h1, h0 = gaps[0], gaps[1], gaps[-1], gaps[-2]
    if edge_order == 1:
        return (at(1, 2) - at(0, 1)) / g0, inside, (at(-1) - at(-2, -1)) / h1
    first = (-(2 * g0 + g1) / (g0 * (g0 + g1)) * at(0, 1) + (g0 + g1) / (g0 * g1) * at(1, 2)
             + -g0 / (g1 * (g0 + g1)) * at(2, 3))
    last = (h1 / (h0 * (h1 + h0)) * at(-3, -2) + -(h1 + h0) / (h1 * h0) * at(-2, -1)
            + (2 * h1 + h0) / (h1 * (h1 + h0)) * at(-1))
    return first, inside, last
