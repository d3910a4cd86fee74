"""``F.adaptive_max_pool{1,2,3}d_with_indices``: PyTorch's spellings of the adaptive max pools
that always return the indices too (``return_indices`` is ignored, as PyTorch ignores it)."""
from __future__ import annotations

from symgrad.nn.pools import ADAPTIVE_MAX_POOL, adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d
from symgrad.ops.registry import Names


@ADAPTIVE_MAX_POOL.publish(Names(functional=("adaptive_max_pool1d_with_indices",)))
def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool1d(input, output_size, True)


@ADAPTIVE_MAX_POOL.publish(Names(functional=("adaptive_max_pool2d_with_indices",)))
def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool2d(input, output_size, True)


@ADAPTIVE_MAX_POOL.publish(Names(functional=("adaptive_max_pool3d_with_indices",)))
def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool3d(input, output_size, True)
