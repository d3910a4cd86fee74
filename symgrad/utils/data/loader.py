"""``DataLoader``: a dataset's samples in batches, in the order of a sampler.

It draws from PyTorch's generators exactly what PyTorch's loader draws (a seed for its workers at
each epoch, or once with persistent workers, then the sampler's own, at the first batch or, with
workers prefetching, at ``iter()``), so a seeded program shuffles as PyTorch does and the random
numbers it draws later are PyTorch's too.  Samples are loaded in this process: with workers,
PyTorch would copy an ``IterableDataset`` to each of them and seed their generators apart (a
sample drawing random numbers draws others here).

The batches of a ``TensorDataset`` with the default collation are taken from its tensors at once:
``x[i:i + n]`` in order, ``x[order[i:i + n]]`` shuffled, the same values PyTorch stacks sample by
sample, as a training loop's step can replay them (one program for every batch: the slice's
start is an input of the program and of the trace, symgrad.replaying)."""
from __future__ import annotations

import itertools
import warnings

from symgrad import dtypes
from symgrad.creation import randperm, zeros
from symgrad.utils.data.collate import default_collate, default_convert
from symgrad.utils.data.datasets import IterableDataset, TensorDataset
from symgrad.utils.data.samplers import BatchSampler, RandomSampler, SequentialSampler

_FIXED = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")
NO_ACCELERATOR = "'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be used."


def get_worker_info():
    """None: samples are loaded in the main process."""
    return None


class DataLoader:
    """PyTorch's ``DataLoader``, its arguments checked as PyTorch checks them (those about worker
    processes and pinned memory change nothing else)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if isinstance(dataset, IterableDataset):
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError(f"multiprocessing_context can only be used with multi-process loading (num_workers > 0), "
                             f"but got num_workers={num_workers}")
        if sampler is None and not isinstance(dataset, IterableDataset):
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and sampler is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.prefetch_factor, self.pin_memory, self.timeout = (num_workers, prefetch_factor,
                                                                                 pin_memory, timeout)
        self.worker_init_fn, self.persistent_workers, self.in_order = worker_init_fn, persistent_workers, in_order
        self.multiprocessing_context, self.pin_memory_device = multiprocessing_context, pin_memory_device
        batched = batch_sampler is not None or isinstance(dataset, IterableDataset) and batch_size is not None
        self._collates = collate_fn is None
        self.collate_fn = collate_fn or (default_collate if batched else default_convert)
        self._seeded = False  # persistent workers seed once; set last: the settings above are fixed from now on

    def __setattr__(self, name, value):
        if name in _FIXED and "_seeded" in self.__dict__:
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            length = len(self.dataset)
            if self.batch_size is None:
                return length
            return length // self.batch_size if self.drop_last else -(-length // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self):
        indices = None if self.sampler is None else iter(self.batch_sampler if self.batch_sampler is not None
                                                         else self.sampler)
        if not (self.persistent_workers and self._seeded):
            if self.pin_memory:
                if self.pin_memory_device:
                    warnings.warn(f"pin_memory_device is deprecated, the current accelerator will be used as the "
                                  f"device,ignore pin_memory_device='{self.pin_memory_device}'.", stacklevel=2)
                warnings.warn(NO_ACCELERATOR, stacklevel=2)
            zeros((), dtype=dtypes.int64).random_(generator=self.generator)  # PyTorch's seed for its workers
            self._seeded = True
        if isinstance(self.dataset, IterableDataset):
            batches = self._streamed()
        elif self._from_tensors():
            batches = self._tensor_batches()
        else:
            batches = self._batches(indices)
        return _Epoch(batches, self, started=self.num_workers > 0)

    def _from_tensors(self) -> bool:
        """Whether the batches can be taken from a ``TensorDataset``'s tensors at once (as tensors
        without history: a batch of tensors that require grad has PyTorch's ``StackBackward0``)."""
        sampler = self.sampler
        return (type(self.dataset) is TensorDataset and self._collates and type(self.batch_sampler) is BatchSampler
                and self.batch_sampler.sampler is sampler and getattr(sampler, "data_source", None) is self.dataset
                and not any(tensor.requires_grad for tensor in self.dataset.tensors)
                and (type(sampler) is SequentialSampler
                     or type(sampler) is RandomSampler and not sampler.replacement and sampler._num_samples is None))

    def _tensor_batches(self):
        size, count, sampler = self.batch_size, len(self.dataset), self.sampler
        order = None
        if type(sampler) is RandomSampler:  # drawn at the first batch, as PyTorch's sampler draws it
            order = randperm(count, generator=sampler.epoch_generator())
        for start in range(0, count, size):
            stop = min(start + size, count)
            if stop - start < size:
                self._exhausted(sampler)
                if self.drop_last:
                    return
            if order is None:  # a copy, as PyTorch's stacked batch is: writing it leaves the dataset alone
                yield [tensor[start:stop].clone() for tensor in self.dataset.tensors]
            else:
                rows = order[start:stop]
                yield [tensor[rows] for tensor in self.dataset.tensors]
        if count % size == 0:
            self._exhausted(sampler)

    @staticmethod
    def _exhausted(sampler) -> None:
        """PyTorch's random sampler, run out, draws one more permutation for the rest of its samples
        (none): from a generator of the user's, that changes what it draws next."""
        if type(sampler) is RandomSampler and sampler.generator is not None:
            randperm(len(sampler.data_source), generator=sampler.generator)

    def _batches(self, indices):
        dataset, collate = self.dataset, self.collate_fn
        if self.batch_sampler is None:
            for index in indices:
                yield collate(dataset[index])
            return
        many = getattr(dataset, "__getitems__", None)
        for batch in indices:
            yield collate(many(batch) if callable(many) else [dataset[i] for i in batch])

    def _streamed(self):
        samples, collate = iter(self.dataset), self.collate_fn
        if self.batch_size is None:
            for sample in samples:
                yield collate(sample)
            return
        while True:
            batch = list(itertools.islice(samples, self.batch_size))
            if not batch or len(batch) < self.batch_size and self.drop_last:
                return
            yield collate(batch)


class _Epoch:
    """One pass over a loader: its batches, and how many (``len``, as PyTorch's iterator answers).
    With workers, PyTorch's loader starts fetching at ``iter()`` (its sampler draws then): so
    does this one, holding the first batch."""

    def __init__(self, batches, loader, started):
        self._batches, self._loader = batches, loader
        self._first = next(batches, _END) if started else None

    def __iter__(self):
        return self

    def __next__(self):
        first = self._first
        if first is not None:
            self._first = None
            if first is _END:
                raise StopIteration
            return first
        return next(self._batches)

    def __len__(self) -> int:
        return len(self._loader)


_END = object()
