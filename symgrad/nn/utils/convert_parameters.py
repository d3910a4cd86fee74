"""``parameters_to_vector`` and ``vector_to_parameters``: a model's parameters as one flat vector
and back (for optimizers and tools that work on a single vector), in iteration order."""
from __future__ import annotations

from symgrad.ops.shape import cat
from symgrad.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters) -> Tensor:
    """The parameters flattened and joined; differentiable, so a loss on it reaches them."""
    return cat([param.view(-1) for param in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Gives each parameter its slice of ``vec`` as its values (the parameter objects stay).
    Every slice is cut before any is written, so a too short ``vec`` changes nothing."""
    if not isinstance(vec, Tensor):
        kind = type(vec)
        name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        raise TypeError(f"expected torch.Tensor, but got: {name}")
    parameters, pieces, start = list(parameters), [], 0
    for param in parameters:
        pieces.append(vec[start:start + param.numel()].view_as(param))
        start += param.numel()
    for param, piece in zip(parameters, pieces):
        param.data = piece.data
