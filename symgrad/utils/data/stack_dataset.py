"""``StackDataset``: datasets of one length side by side, a sample being the tuple (or, given
by keyword, the dict) of their samples at an index: inputs and targets kept apart."""
from __future__ import annotations

from symgrad.utils.data.datasets import Dataset


class StackDataset(Dataset):
    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args or kwargs.values())
        self._length = len(parts[0])
        if any(len(dataset) != self._length for dataset in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args or kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __getitems__(self, indices: list):
        """A batch of samples, each part fetched in one call where its dataset can (``__getitems__``)."""
        named = isinstance(self.datasets, dict)
        columns = {key: self._column(dataset, indices)
                   for key, dataset in (self.datasets.items() if named else enumerate(self.datasets))}
        if named:
            return [{key: column[i] for key, column in columns.items()} for i in range(len(indices))]
        return [tuple(column[i] for column in columns.values()) for i in range(len(indices))]

    @staticmethod
    def _column(dataset, indices: list) -> list:
        many = getattr(dataset, "__getitems__", None)
        if not callable(many):
            return [dataset[i] for i in indices]
        items = many(indices)
        if len(items) != len(indices):
            raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, got {len(items)}")
        return items

    def __len__(self) -> int:
        return self._length
