"""Distance modules: ``CosineSimilarity`` and ``PairwiseDistance``, the functionals with their
arguments stored (under PyTorch's attribute names: PairwiseDistance keeps ``p`` as ``norm``)."""
from __future__ import annotations

from symgrad.nn import functional as F
from symgrad.nn.module import Module


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
