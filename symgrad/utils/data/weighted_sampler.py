"""``WeightedRandomSampler``: indices drawn in proportion to per-sample weights (to rebalance
classes), by ``multinomial`` over the weights as float64, so a seeded draw is PyTorch's."""
from __future__ import annotations

from symgrad import dtypes
from symgrad.creation import as_tensor, multinomial
from symgrad.utils.data.samplers import Sampler


class WeightedRandomSampler(Sampler):
    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights = as_tensor(weights, dtype=dtypes.float64)
        if weights.dim() != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(weights.shape)}")
        self.weights, self.num_samples, self.replacement, self.generator = weights, num_samples, replacement, generator

    def __iter__(self):
        """A new draw each epoch."""
        yield from multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator).tolist()

    def __len__(self) -> int:
        return self.num_samples
