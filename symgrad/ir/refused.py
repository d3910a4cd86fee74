"""A head for an op whose derivative PyTorch does not implement (``//``): the value passes
through, and a gradient that reaches it raises PyTorch's error when the backward is built, as
PyTorch's backward raises when it reaches the op."""
from __future__ import annotations

from symgrad.ir.functions import Structural


class Underivable(Structural):
    """``args[0]`` unchanged; ``args[1]`` names the ATen op in the error."""

    display = "underivable"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def _jax_source(self, printer):
        return printer._print(self.args[0])

    def vjp(self, p, g, out):
        raise RuntimeError(f"derivative for aten::{self.args[1]} is not implemented")


class UnderivableInPlace(Underivable):
    """PyTorch's in-place spellings whose backward it never wrote (``asinh_``: AsinhBackward1)."""

    def vjp(self, p, g, out):
        raise NotImplementedError(f"the derivative for 'inplace version of {self.args[1]}' is not implemented.")
