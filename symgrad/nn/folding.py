"""Sliding blocks: ``F.unfold`` (im2col) copies every kernel-sized block of a batch of images into
a column, ``F.fold`` (col2im) adds columns back into images; ``nn.Unfold`` and ``nn.Fold``.

Both are one indexing of the zero-padded image: unfold gathers it at each block's rows and
columns (index arrays made on the host), fold scatter-adds into it and cuts the padding off.  Each
is the other's adjoint, so the gradient of one is the other's form, derived by the IR.
"""
from __future__ import annotations

import functools

import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.ir.indexing import TakeAdd, take
from symgrad.ir.linalg import Pad, emit
from symgrad.nn.module import Module
from symgrad.nodes import leaf
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply


def _pair(value, name):
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(value)}")
        return int(value[0]), int(value[1])
    return int(value), int(value)


@functools.lru_cache(maxsize=128)
def _blocks(spatial, kernel, dilation, stride, blocks):
    """Per axis, the padded image's index of each (kernel offset, block) pair, shaped to broadcast
    as (kh, kw, bh, bw)."""
    (kh, kw), (dh, dw), (sh, sw), (bh, bw) = kernel, dilation, stride, blocks
    rows = (np.arange(kh) * dh)[:, None] + (np.arange(bh) * sh)[None, :]
    cols = (np.arange(kw) * dw)[:, None] + (np.arange(bw) * sw)[None, :]
    return rows.reshape(kh, 1, bh, 1).astype(np.int64), cols.reshape(1, kw, 1, bw).astype(np.int64)


def _block_count(size, kernel, dilation, padding, stride):
    return (size + 2 * padding - (dilation * (kernel - 1) + 1)) // stride + 1


def _padding(padding):
    return sp.Tuple(sp.Tuple(0, 0), sp.Tuple(0, 0), *(sp.Tuple(q, q) for q in padding))


def _infer_unfold(nodes, kernel, dilation, padding, stride, blocks):
    x = nodes[0]
    *lead, c = x.shape[:-2]
    return (*lead, c * kernel[0] * kernel[1], blocks[0] * blocks[1]), x.dtype


def _build_unfold(p, node, x, rows, cols):
    """(N, C, H, W) padded, gathered to (N, C, kh, kw, bh, bw), then laid out as columns (an
    unbatched image taken as a batch of one)."""
    padding = node.attrs[2]
    x = p.reshape(x, ((1,) + node.inputs[0].shape)[-4:])
    if any(padding):
        x = emit(p, Pad, x, sp.S.Zero, _padding(padding), hint="padded")
    return p.reshape(take(p, x, [rows, cols], (2, 3)), node.shape)


def _infer_fold(nodes, output_size, kernel, padding):
    x = nodes[0]
    *lead, rows, _ = x.shape
    return (*lead, rows // (kernel[0] * kernel[1]), *output_size), x.dtype


def _build_fold(p, node, x, rows, cols):
    """Columns as (N, C, kh, kw, bh, bw), added into the padded image, the padding cut off."""
    output_size, kernel, padding = node.attrs
    n, c = ((1,) + node.shape)[-4:-2]
    blocks = p.shape_of(rows)[2], p.shape_of(cols)[3]
    x = p.reshape(x, (n, c, *kernel, *blocks))
    padded = (n, c, *(size + 2 * q for size, q in zip(output_size, padding)))
    image = p.assign(TakeAdd(x, rows, cols, sp.Tuple(2, 3), sp.Tuple(*padded)), padded, node.dtype.name, "folded")
    if any(padding):
        image = emit(p, Pad, image, sp.S.Zero, _padding(tuple(-q for q in padding)), hint="cropped")
    return p.reshape(image, node.shape)


UNFOLD = register(Op("unfold", "Im2ColBackward0", _infer_unfold, _build_unfold, saves=False,
                     shown_inputs=lambda inputs: inputs[:1]))
FOLD = register(Op("fold", "Col2ImBackward0", _infer_fold, _build_fold, saves=False,
                   shown_inputs=lambda inputs: inputs[:1]))
# No generic examples: tests/test_nn_grid_fold_bag.py checks values and gradients against PyTorch.


def _options(kernel_size, dilation, padding, stride):
    """PyTorch's checks of the four pairs, in its order."""
    kernel, dilation, padding, stride = (_pair(v, name) for v, name in (
        (kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"), (stride, "stride")))
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {kernel[0]} "
                           f"kernel_width: {kernel[1]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    if min(padding) < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {padding[0]} "
                           f"pad_width: {padding[1]}")
    if min(stride) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {stride[0]} "
                           f"stride_width: {stride[1]}")
    return kernel, dilation, padding, stride


def _refuse_integers(input, kernel_name):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for "
                                  f"'{dtypes.torch_name(input.dtype).capitalize()}'")


def _index_arrays(spatial, kernel, dilation, stride, blocks):
    return [Tensor(leaf(a, dtypes.int64)) for a in _blocks(spatial, kernel, dilation, stride, blocks)]


@UNFOLD.publish(Names(functional=("unfold",)))
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    kernel, dilation, padding, stride = _options(kernel_size, dilation, padding, stride)
    shape = tuple(input.shape)
    if len(shape) not in (3, 4) or 0 in shape[-3:]:
        if len(shape) < 3:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{len(shape)}, "
                             f"{len(shape) - 1}], but got 2)")
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: [{', '.join(map(str, shape))}]")
    spatial = shape[-2:]
    blocks = tuple(_block_count(*args) for args in zip(spatial, kernel, dilation, padding, stride))
    if min(blocks) < 1:
        raise RuntimeError(f"Given input with spatial size {spatial}, kernel_size={kernel}, dilation={dilation}, "
                           f"padding={padding}, calculated shape of the array of sliding blocks as {blocks}, but "
                           "its components must be at least one.")
    _refuse_integers(input, "im2col_out_cpu")
    return apply(UNFOLD, input, *_index_arrays(spatial, kernel, dilation, stride, blocks),
                 attrs=(kernel, dilation, padding, stride, blocks))


@FOLD.publish(Names(functional=("fold",)))
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    output_size = _pair(output_size, "output_size")
    kernel, dilation, padding, stride = _options(kernel_size, dilation, padding, stride)
    shape = tuple(input.shape)
    if len(shape) not in (2, 3) or 0 in shape[-2:]:
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: [{', '.join(map(str, shape))}]")
    if shape[-2] % (kernel[0] * kernel[1]):
        raise RuntimeError(f"Expected size of input's dimension {len(shape) - 2} to be divisible by the product of "
                           f"kernel_size, but got input.size({len(shape) - 2})={shape[-2]} and "
                           f"kernel_size={kernel}.")
    blocks = tuple(_block_count(*args) for args in zip(output_size, kernel, dilation, padding, stride))
    if blocks[0] * blocks[1] != shape[-1] or min(blocks) < 1:
        raise RuntimeError(f"Given output_size={output_size}, kernel_size={kernel}, dilation={dilation}, "
                           f"padding={padding}, stride={stride}, expected size of input's dimension "
                           f"{len(shape) - 1} to match the calculated number of sliding blocks {blocks[0]} * "
                           f"{blocks[1]} = {blocks[0] * blocks[1]}, but got input.size({len(shape) - 1})="
                           f"{shape[-1]}.")
    _refuse_integers(input, "col2im_out_cpu")
    return apply(FOLD, input, *_index_arrays(output_size, kernel, dilation, stride, blocks),
                 attrs=(output_size, kernel, padding))


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")
