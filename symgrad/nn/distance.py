"""Distances: ``pdist`` (the p-norm distance of every pair of rows), and the modules
``CosineSimilarity`` and ``PairwiseDistance``, the functionals with their arguments stored (under
PyTorch's attribute names: PairwiseDistance keeps ``p`` as ``norm``)."""
from __future__ import annotations

import math

import numpy as np
import sympy as sp

from symgrad import dtypes, ir
from symgrad.ir.indexing import take
from symgrad.nn import functional as F
from symgrad.nn.module import Module
from symgrad.nodes import leaf
from symgrad.ops.reductions import _norm
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply


def _infer_pdist(nodes, ord):
    x, first = nodes[:2]
    return first.shape, x.dtype


def _build_pdist(p, node, x, first, second):
    """The rows' differences at each pair (i < j, row-major), then their norm as vector_norm takes
    it (PyTorch's _pdist_backward is norm_backward: 0 where two rows are equal), but for inf, whose
    gradient goes whole to every entry reaching the largest |difference| (not shared among them)."""
    (ord,) = node.attrs
    dtype, shape = node.dtype.name, (node.shape[0], node.inputs[0].shape[1])
    difference = p.assign(take(p, x, [first], (0,)) - take(p, x, [second], (0,)), shape, dtype, "difference")
    if not math.isinf(ord):
        return _norm(p, difference, ord, (1,), False, shape, node.shape, dtype)
    magnitude = p.assign(sp.Abs(difference, evaluate=False), shape, dtype, "abs")
    largest = p.reduce_max(magnitude, (1,), False, whole=True)
    reaches = ir.equal(magnitude, p.expand_reduced(largest, shape, (1,), False))
    slope = p.assign(ir.sign(difference) * reaches, shape, dtype, "slope")
    return p.reduced_with_slope(largest, difference, slope, (1,), False)


PDIST = register(Op("pdist", "PdistBackward0", _infer_pdist, _build_pdist, shown_inputs=lambda inputs: inputs[:1]))
# No generic examples: tests/test_nn_grid_fold_bag.py checks values and gradients against PyTorch.


@PDIST.publish(Names(function=("pdist",), functional=("pdist",)))
def pdist(input, p=2):
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    first, second = np.triu_indices(input.shape[0], 1)
    pairs = [Tensor(leaf(rows.astype(np.int64), dtypes.int64)) for rows in (first, second)]
    ord = float(p) if math.isinf(p) else int(p) if float(p).is_integer() else float(p)
    return apply(PDIST, input, *pairs, attrs=(ord,))


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
