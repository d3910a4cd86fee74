"""``torch.utils.data``: datasets, samplers and the ``DataLoader`` that batches them, drawing
PyTorch's random numbers (a seeded program shuffles as PyTorch does)."""
from symgrad.utils.data.collate import default_collate, default_convert  # noqa: F401
from symgrad.utils.data.datasets import (ChainDataset, ConcatDataset, Dataset, IterableDataset,  # noqa: F401
                                         Subset, TensorDataset, random_split)
from symgrad.utils.data.loader import DataLoader, get_worker_info  # noqa: F401
from symgrad.utils.data.samplers import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                                         SubsetRandomSampler)
from symgrad.utils.data.distributed import DistributedSampler  # noqa: F401
from symgrad.utils.data.stack_dataset import StackDataset  # noqa: F401
from symgrad.utils.data.weighted_sampler import WeightedRandomSampler  # noqa: F401
