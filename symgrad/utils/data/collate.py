"""How a ``DataLoader`` makes one batch of a list of samples, as PyTorch's ``default_collate``:
tensors stacked, numbers and NumPy arrays made tensors, and tuples, lists and dicts of them
collated field by field (a tuple's fields come back as a list, as PyTorch's do)."""
from __future__ import annotations

import collections.abc
import copy

import numpy as np

from symgrad import dtypes
from symgrad.creation import as_tensor, tensor
from symgrad.ops.shape import stack
from symgrad.tensor import Tensor

COLLATE_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def default_collate(batch):
    """One batch of the samples in the list ``batch``."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray | np.generic):
        if elem.dtype.kind in "SUO":  # strings and objects: PyTorch names the dtype
            raise TypeError(COLLATE_ERROR.format(elem.dtype))
        return default_collate([as_tensor(b) for b in batch]) if elem.shape else as_tensor(np.asarray(batch))
    if isinstance(elem, bool | int | float) or isinstance(elem, str | bytes):
        if isinstance(elem, float):
            return tensor(batch, dtype=dtypes.float64)
        return batch if isinstance(elem, str | bytes) else tensor(batch)
    if isinstance(elem, collections.abc.Mapping):
        return _same_mapping(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(samples) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(COLLATE_ERROR.format(type(elem)))


def default_convert(data):
    """A sample as it is, NumPy arrays made tensors (a loader without batches gives samples so)."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray | np.generic) and data.dtype.kind not in "SUO":
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _same_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, str | bytes):
        return [default_convert(d) for d in data]
    return data


def _same_mapping(like, items: dict):
    """``items`` in a mapping of ``like``'s type (a copy of it updated, for a mutable one: an
    ``OrderedDict`` or ``defaultdict`` stays one), or a dict when that type cannot be made so."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(items)
            return clone
        return type(like)(items)
    except TypeError:
        return items
