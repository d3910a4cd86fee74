"""Bags of embeddings: ``F.embedding_bag`` sums, averages or takes the largest of the weight rows
each bag names, without making the rows one by one; ``nn.EmbeddingBag`` holds the weight.

Bags are ragged (offsets into a flat index list), programs are not: the bags are laid out as a
(bags, longest bag) table of positions into the index list, with a mask of the slots in use,
made on the host from the offsets.  Slots out of use, and entries equal to ``padding_idx``, are
left out by a ``select``: they add nothing, count for nothing in a mean and send no gradient.
A max routes its gradient to the first largest entry of each bag, as PyTorch's kernel does.
"""
from __future__ import annotations

import warnings

import numpy as np
import sympy as sp

from symgrad import dtypes, engine, ir
from symgrad.grad_mode import no_grad
from symgrad.ir.indexing import take
from symgrad.nn import init
from symgrad.nn.layers import _empty
from symgrad.nn.module import Module, Parameter
from symgrad.nodes import leaf
from symgrad.ops.reductions import vector_norm
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply


def _infer(nodes, mode, padding_idx):
    positions, weight = nodes[2], nodes[1]
    return (positions.shape[0], weight.shape[1]), weight.dtype


def _build(p, node, indices, weight, positions, slots, *per_sample_weights):
    """Rows (bags, slots, D) gathered at the bags' indices, the unused and padding slots masked."""
    mode, padding_idx = node.attrs
    dtype = node.dtype.name
    bags, width = node.inputs[2].shape
    if node.inputs[0].shape[0]:
        index = take(p, indices, [positions], (0,))
    else:  # no indices at all: every slot is unused, any row will do
        index = p.materialize(sp.S.Zero, (bags, width), "int64")
    rows = take(p, weight, [index], (0,))
    kept = slots if padding_idx is None else ir.logical_and(slots, ir.not_equal(index, padding_idx))
    kept = p.assign(kept, (bags, width), dtype, "kept")  # of the rows' dtype, as the select's derivative is
    mask = p.reshape(kept, (bags, width, 1))
    count = p.reduce_sum(kept, (1,), keepdim=True)
    if mode == "max":
        candidates = p.assign(ir.select(mask, rows, -sp.oo), p.shape_of(rows), dtype, "candidates")
        largest = p.take_along(candidates, p.arg_reduce(candidates, 1, keepdim=True), 1)
        return p.assign(ir.select(ir.greater(count, 0), p.reshape(largest, node.shape), 0), node.shape, dtype, "bag")
    if per_sample_weights:
        scales = take(p, per_sample_weights[0], [positions], (0,))
        rows = p.assign(rows * p.reshape(scales, (bags, width, 1)), p.shape_of(rows), dtype, "scaled")
    total = p.reduce_sum(p.assign(ir.select(mask, rows, 0), p.shape_of(rows), dtype, "slot"), (1,), keepdim=False)
    if mode == "sum":
        return total
    return p.assign(total / ir.select(ir.equal(count, 0), 1, count), node.shape, dtype, "bag")


EMBEDDING_BAG = register(Op("embedding_bag", "EmbeddingBagBackward0", _infer, _build,
                            shown_inputs=lambda inputs: inputs[1:2]))
# No generic examples: tests/test_nn_grid_fold_bag.py checks values and gradients against PyTorch.


def _values(tensor, what):
    values = engine.concrete_array(tensor._node)
    if values is None:
        raise RuntimeError(f"embedding_bag needs the values of its {what} to lay out the bags, which a JAX trace "
                           "does not have")
    return np.asarray(values).astype(np.int64)


def _check_dtypes(input, weight, offsets, per_sample_weights):
    for tensor in (input, offsets):
        if tensor.dtype not in (dtypes.int64, dtypes.int32):
            raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                               f"Long, Int; but got torch.{dtypes.torch_name(tensor.dtype).capitalize()}Tensor instead "
                               "(while checking arguments for embedding_bag)")
    if not weight.dtype.is_floating_point:
        raise RuntimeError("Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, "
                           f"BFloat16, Float, Double; but got torch.{dtypes.torch_name(weight.dtype).capitalize()}"
                           "Tensor instead (while checking arguments for embedding_bag)")
    if per_sample_weights is not None and per_sample_weights.dtype != weight.dtype:
        raise RuntimeError("Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
                           f"'per_sample_weights'; but type torch.{dtypes.torch_name(weight.dtype).capitalize()}Tensor "
                           f"does not equal torch.{dtypes.torch_name(per_sample_weights.dtype).capitalize()}Tensor "
                           "(while checking arguments for embedding_bag)")


def _layout(starts, length, include_last_offset, mode):
    """(positions, slots in use): row b holds bag b's positions in the index list.  PyTorch's max
    takes the last bag to the end of the list even when the last offset ends it earlier."""
    if starts.size and starts[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                           f"position 0. However, got {starts[0]}")
    if starts.size and starts[-1] > length:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {length} but got offsets[-1] of "
                           f"{starts[-1]}")
    ends = starts[1:] if include_last_offset else np.append(starts[1:], length)
    starts = starts[:len(ends)]
    if mode == "max" and ends.size:
        ends[-1] = length
    sizes = ends - starts
    if sizes.size and sizes.min() < 0:
        raise RuntimeError("Expected i < index_size to be true, but got false.  (Could this error message be "
                           "improved?  If so, please report an enhancement request to PyTorch.)")
    slot = np.arange(max(int(sizes.max(initial=0)), 1))
    used = slot[None, :] < sizes[:, None]
    return np.where(used, starts[:, None] + slot[None, :], 0), used


def _padding_index(padding_idx, rows):
    if padding_idx is None:
        return None
    if not -rows <= padding_idx < rows:
        raise RuntimeError(f"padding_idx must be within the number of embeddings, -{rows} through {rows - 1}, but got "
                           f"{padding_idx}")
    return int(padding_idx) % rows


def _check_indices(input, rows, mode, bag_starts):
    """PyTorch's complaint about the first index out of range, worded as its kernel for the mode
    (sum and mean: another when that index is in the last of several bags)."""
    values = engine.concrete_array(input._node)
    values = np.asarray(values) if values is not None else np.zeros(0, np.int64)
    bad = np.flatnonzero((values < 0) | (values >= rows))
    if not bad.size:
        return
    first, value = int(bad[0]), int(values[bad[0]])
    if mode == "max":
        raise RuntimeError(f"embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be {value}")
    if len(bag_starts) > 1 and first >= bag_starts[-1]:
        raise RuntimeError("Expected i < index_size to be true, but got false.  (Could this error message be "
                           "improved?  If so, please report an enhancement request to PyTorch.)")
    raise RuntimeError(f"Index {first} of input takes value {value} which is not in the valid range [0, {rows})")


def _flattened(input, offsets, per_sample_weights, include_last_offset):
    """The 1-D form of the input: (indices, offsets' values, per-sample weights, include_last_offset)."""
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        starts = np.arange(0, input.numel(), max(input.shape[1], 1), dtype=np.int64)[:input.shape[0]]
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
        return input.reshape(-1), Tensor(leaf(starts, input.dtype)), per_sample_weights, False
    if input.dim() != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.dim() != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    return input, offsets, per_sample_weights, include_last_offset


def _renorm(weight, input, max_norm, norm_type):
    """PyTorch's embedding_renorm_, in place and unrecorded: each row the input names whose
    norm exceeds max_norm is scaled by max_norm / (norm + 1e-7), that scale taken in double."""
    rows = np.unique(_values(input, "indices"))
    if not rows.size:
        return
    with no_grad():
        index = Tensor(leaf(rows, dtypes.int64))
        norms = np.asarray(vector_norm(weight[index], norm_type, dim=1).numpy(), np.float64)
        over = norms > max_norm
        if over.any():
            scale = np.asarray(max_norm / (norms[over] + 1e-7)).astype(np.dtype(weight.dtype.name))[:, None]
            chosen = Tensor(leaf(rows[over], dtypes.int64))
            weight[chosen] = weight[chosen] * Tensor(leaf(scale, weight.dtype))


@EMBEDDING_BAG.publish(Names(functional=("embedding_bag",)))
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    if weight.dtype is dtypes.int64 and input.dtype.is_floating_point:
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, "
                      "input, ...)` is deprecated, and should now be `embedding_bag(input, weight, ...)`.",
                      stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights (torch.Size({list(per_sample_weights.shape)})) is not "
                         f"None, then it must have the same shape as the input (torch.Size({list(input.shape)}))")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    input, offsets, per_sample_weights, include_last_offset = _flattened(input, offsets, per_sample_weights,
                                                                         include_last_offset)
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:
        _renorm(weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    if scale_grad_by_freq or sparse:
        given = ", ".join(name for name, on in (("scale_grad_by_freq", scale_grad_by_freq), ("sparse", sparse)) if on)
        raise NotImplementedError(f"embedding_bag: the argument(s) {given} are not supported by symgrad")
    _check_dtypes(input, weight, offsets, per_sample_weights)
    starts = _values(offsets, "offsets")
    positions, used = _layout(starts, input.shape[0], include_last_offset, mode)
    padding_idx = _padding_index(padding_idx, weight.shape[0])
    _check_indices(input, weight.shape[0], mode, starts[:len(positions)])
    tables = [Tensor(leaf(positions, dtypes.int64)), Tensor(leaf(used, dtypes.bool_))]
    extra = [] if per_sample_weights is None else [per_sample_weights]
    return apply(EMBEDDING_BAG, input, weight, *tables, *extra, attrs=(mode, padding_idx))


class EmbeddingBag(Module):
    """Bags of rows of ``weight``, drawn from N(0, 1) as PyTorch draws them (the padding row zeroed)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False, _weight=None,
                 include_last_offset: bool = False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        if padding_idx is not None:
            if padding_idx > 0 and padding_idx >= num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            if padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("padding_idx must be within num_embeddings")
                padding_idx += num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = _empty(num_embeddings, embedding_dim, dtype=dtype, device=device)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight)
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input, offsets=None, per_sample_weights=None):
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                             self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx!r}"
        return text

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, max_norm=None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False, padding_idx=None):
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                  padding_idx)
        bag.weight.requires_grad = not freeze
        return bag
