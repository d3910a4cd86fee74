"""``torch.set_printoptions``: the precision, summarization, line width and notation that
symgrad.formatting prints tensors with, read at each print as PyTorch's are."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class PrintOptions:
    precision: int = 4  # decimals (fixed or scientific notation)
    threshold: float = 1000  # more elements than this are summarized
    edgeitems: int = 3  # a summarized dim shows this many items at each end
    linewidth: int = 80  # characters per line before wrapping
    sci_mode: bool | None = None  # None: scientific notation when the magnitudes call for it


OPTIONS = PrintOptions()

# precision, threshold, edgeitems, linewidth of PyTorch's named profiles
PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None) -> None:
    """A profile's four settings first, then each option given; ``sci_mode`` is always set (so a
    call without it goes back to choosing the notation by magnitude), as PyTorch's."""
    if profile in PROFILES:
        OPTIONS.precision, OPTIONS.threshold, OPTIONS.edgeitems, OPTIONS.linewidth = PROFILES[profile]
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            setattr(OPTIONS, name, value)
    OPTIONS.sci_mode = sci_mode
