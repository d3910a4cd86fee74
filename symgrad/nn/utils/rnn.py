"""``torch.nn.utils.rnn``: a batch of sequences of different lengths, padded to one length or packed.

A packed sequence holds only the steps that exist, time-major: the first step of every sequence,
then the second step of those that have one, and so on; ``batch_sizes[t]`` counts the sequences
still running at step ``t`` (so the batch is sorted longest first, and ``sorted_indices`` remembers
the order it came in).  The recurrent layers (symgrad.nn.recurrent) run a packed batch without
computing, or back-propagating through, the padding.  Packing and padding are slices and joins of
the data, so gradients flow through them as through any op.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

from symgrad import dtypes
from symgrad.creation import as_tensor, full
from symgrad.ops.shape import cat, stack
from symgrad.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence"]


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """What ``pack_padded_sequence`` returns and the recurrent layers accept; a named tuple, as PyTorch's."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:  # PackedSequence((data, batch_sizes), sorted_indices=...)
            data, batch_sizes = data
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        """``data.to(...)``; the sizes and indices stay as they are (they are never cast)."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes, self.sorted_indices,
                                                           self.unsorted_indices)

    def cpu(self) -> "PackedSequence":
        return self

    def float(self) -> "PackedSequence":
        return self.to(dtype=dtypes.float32)

    def double(self) -> "PackedSequence":
        return self.to(dtype=dtypes.float64)

    @property
    def is_cuda(self) -> bool:
        return False


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes ``permutation`` (None stays None)."""
    return None if permutation is None else permutation.argsort()


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Sequences of shape ``(L_i, *)`` padded with ``padding_value`` to the longest and stacked:
    ``(L, B, *)``, or ``(B, L, *)`` with ``batch_first``; in the first sequence's dtype."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    sequences = list(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing, dtype = tuple(sequences[0].shape[1:]), sequences[0].dtype
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:  # copied into the first's trailing sizes: broadcast, as PyTorch
            s = s.expand(s.shape[0], *trailing)
        s = s.to(dtype)
        if s.shape[0] < longest:
            padding = full((longest - s.shape[0], *trailing), padding_value, dtype=dtype)
            s = cat([s, padding] if padding_side == "right" else [padding, s])
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def _lengths_list(lengths) -> list:
    if isinstance(lengths, Tensor):
        if lengths.dim() != 1:
            raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.dim()}D "
                               f"{lengths.dtype} tensor")
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """The steps of a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) that the
    ``lengths`` say exist.  Unless ``enforce_sorted``, the batch is sorted by length first."""
    lengths = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    sorted_indices = None
    if not enforce_sorted:
        lengths_tensor = as_tensor(lengths, dtype=dtypes.int64)
        ordered = lengths_tensor.sort(descending=True)
        lengths, sorted_indices = ordered.values.tolist(), ordered.indices
        input = input.index_select(batch_dim, sorted_indices)
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    steps = input.transpose(0, 1) if batch_first else input
    batch = steps.shape[1]
    if len(lengths) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={batch})")
    if lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if any(later > earlier for earlier, later in zip(lengths, lengths[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                           "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                           "sidestep this requirement if you do not need ONNX exportability.")
    if lengths[0] > steps.shape[0]:
        raise RuntimeError(f"pack_padded_sequence: a sequence of length {lengths[0]} in an input of "
                           f"{steps.shape[0]} steps")
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = cat([steps[t, :size] for t, size in enumerate(batch_sizes)])
    return PackedSequence(data, as_tensor(batch_sizes, dtype=dtypes.int64), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None):
    """``(padded, lengths)``: the inverse of ``pack_padded_sequence``, in the batch's first order,
    padded with ``padding_value`` to the longest length (or to ``total_length``)."""
    data, batch_sizes = sequence.data, [int(n) for n in sequence.batch_sizes.tolist()]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    batch, trailing = batch_sizes[0], tuple(data.shape[1:])
    rows, start = [], 0
    for size in batch_sizes:
        step = data[start:start + size]
        if size < batch:
            step = cat([step, full((batch - size, *trailing), padding_value, dtype=data.dtype)])
        rows.append(step)
        start += size
    rows += [full((batch, *trailing), padding_value, dtype=data.dtype)] * (steps - len(batch_sizes))
    padded = stack(rows, 0 if not batch_first else 1)
    lengths = as_tensor([sum(1 for size in batch_sizes if size > b) for b in range(batch)], dtype=dtypes.int64)
    if sequence.unsorted_indices is not None:
        batch_dim = 0 if batch_first else 1
        return padded.index_select(batch_dim, sequence.unsorted_indices), lengths[sequence.unsorted_indices]
    return padded, lengths


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """``pack_padded_sequence`` of the padded ``sequences``, with their lengths."""
    lengths = as_tensor([s.size(0) for s in sequences], dtype=dtypes.int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)
