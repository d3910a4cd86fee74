"""Dropout: ``F.dropout``, channel-wise ``F.dropout1d/2d/3d``, ``F.alpha_dropout``,
``F.feature_alpha_dropout`` and their modules.

PyTorch's CPU kernel draws one ``bernoulli_(1 - p)`` mask, either of the input's shape or, for
feature dropout, of shape (N, C, 1, ...) so that a whole channel is kept or dropped; the mask is
drawn here with the same generator calls (symgrad.random), so a seeded call keeps PyTorch's
entries.  The arithmetic on the mask is PyTorch's too, op for op, so the result is
``input * noise`` (MulBackward0), plus ``b`` for alpha dropout (AddBackward0).
"""
from __future__ import annotations

import math
import warnings
from functools import partial

from symgrad import dtypes, random
from symgrad.creation import draws_like, zeros
from symgrad.nn.module import Module

_SELU_ALPHA = 1.7580993408473766  # -scale * alpha of SELU: where alpha dropout sends a dropped entry


def _checked(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _masked(input, p, training, inplace, feature: bool, alpha: bool, name: str):
    """PyTorch's ``_dropout_impl``: the input itself when nothing is dropped, a product with a 0-d
    zero when everything is, else the mask (per channel for ``feature``) scaled, and for ``alpha``
    the shift that keeps the mean and variance of SELU's outputs."""
    _checked(p)
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        return _times(input, zeros((), dtype=input.dtype), inplace)
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    # per channel a fresh (N, C, 1, ...) tensor; else one made like the input, drawn in its memory order
    like = zeros((*input.shape[:2], *(1,) * (input.dim() - 2)), dtype=input.dtype) if feature else input
    noise = draws_like(like, partial(random.bernoulli, p=1 - p))
    if not input.dtype.is_floating_point:  # PyTorch's scaling of the mask, in place, refuses (after the draw)
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{dtypes.torch_name(input.dtype).capitalize()}")
    if not alpha:
        return _times(input, noise / (1 - p), inplace)
    a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
    b = (noise + -1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    kept = _times(input, noise * a, inplace)
    return kept.add_(b) if inplace else kept + b


def _times(input, factor, inplace: bool):
    return input.mul_(factor) if inplace else input * factor


def dropout(input, p=0.5, training=True, inplace=False):
    """``input * noise``, the noise ``bernoulli_(1 - p) / (1 - p)`` drawn as PyTorch draws it (its
    numbers, seeded); the input itself when nothing is dropped."""
    return _masked(input, p, training, inplace, False, False, "dropout")


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Whole channels of an (N, C, L) or (C, L) input zeroed; an unbatched input is batched by one."""
    _checked(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.dim() == 3:
        return _masked(input, p, training, inplace, True, False, "dropout1d")
    return _masked(input.unsqueeze(0), p, training, inplace, True, False, "dropout1d").squeeze(0)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Whole channels zeroed; PyTorch warns of inputs not 3-D or 4-D, and reads a 3-D input as
    (N, C, L), not as an unbatched (C, H, W)."""
    _checked(p)
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).", stacklevel=2)
    if input.dim() == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=2)
    return _masked(input, p, training, inplace, True, False, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Whole channels of an (N, C, D, H, W) input zeroed; any other rank is warned of and taken as
    unbatched (batched by one)."""
    _checked(p)
    if input.dim() not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.dim()}-D input to dropout3d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).", stacklevel=2)
    if input.dim() == 5:
        return _masked(input, p, training, inplace, True, False, "dropout3d")
    return _masked(input.unsqueeze(0), p, training, inplace, True, False, "dropout3d").squeeze(0)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Entries dropped to SELU's negative saturation, the rest scaled and shifted so that mean and
    variance are kept (note PyTorch's default: not training)."""
    return _masked(input, p, training, inplace, False, True, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels."""
    return _masked(input, p, training, inplace, True, True, "feature_alpha_dropout")


class _DropoutNd(Module):
    function = None  # the functional form

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        _checked(p)
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return type(self).function(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    function = dropout


class Dropout1d(_DropoutNd):
    function = dropout1d


class Dropout2d(_DropoutNd):
    function = dropout2d


class Dropout3d(_DropoutNd):
    function = dropout3d


class AlphaDropout(_DropoutNd):
    """Its ``inplace`` is kept but not passed on, as PyTorch's."""

    def forward(self, input):
        return alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    def forward(self, input):
        return feature_alpha_dropout(input, self.p, self.training)
