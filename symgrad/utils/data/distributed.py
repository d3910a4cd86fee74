"""``DistributedSampler``: the share of a dataset one of ``num_replicas`` processes visits (every
``num_replicas``-th index from ``rank``), padded or cut so the shares are equal, in a shuffle
seeded by ``seed + epoch`` (``set_epoch``), the same permutation PyTorch draws.

symgrad has no process group: ``num_replicas`` and ``rank`` must be given."""
from __future__ import annotations

import math

from symgrad import random
from symgrad.creation import randperm
from symgrad.utils.data.samplers import Sampler


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False):
        if num_replicas is None or rank is None:
            raise RuntimeError("Requires distributed package to be available")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank, self.epoch, self.drop_last = (dataset, num_replicas, rank, 0,
                                                                                  drop_last)
        if drop_last and len(dataset) % num_replicas != 0:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle, self.seed = shuffle, seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            generator = random.Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=generator).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:  # repeated from the start until every replica has as many
            indices = (indices * math.ceil(self.total_size / max(n, 1)))[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The next ``__iter__`` shuffles with ``seed + epoch``: each epoch a new order, the same
        on every replica."""
        self.epoch = epoch
