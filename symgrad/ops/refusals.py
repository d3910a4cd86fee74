"""Backward passes PyTorch refuses with words of its own, reproduced: the value passes through, and a
gradient that reaches it raises PyTorch's RuntimeError when the backward is built (``vander``, whose
kernel writes its result in place after saving it; ``dist`` with p = 0, whose gradient is undefined)."""
from __future__ import annotations

import sympy as sp

from symgrad.ir.refused import Underivable


class RefusedBackward(Underivable):
    """``args[0]`` unchanged; ``args[1]`` holds PyTorch's message."""

    def vjp(self, p, g, out):
        raise RuntimeError(str(self.args[1]))


def refused(p, value, shape, dtype: str, message: str):
    """``value`` assigned, with a backward that raises ``message``."""
    return p.assign(RefusedBackward(value, sp.Symbol(message)), shape, dtype, "refused")
