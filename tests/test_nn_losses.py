"""The losses, distances and Bilinear added after the first ones, against the installed PyTorch on the
same arrays: values, dtypes, grad_fn names and gradients for every reduction, in float32 and float64,
at the edges (margins hit exactly, overflow, NaN and inf, near-zero norms, clamped variances), the
errors PyTorch raises, and the modules' reprs, state and seeded weights."""
import math

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch
from test_nn_functional import check

RNG = np.random.default_rng(23)
NAN, INF = math.nan, math.inf


def normal(*shape):
    return RNG.standard_normal(shape)


def signs(*shape):
    return RNG.choice([-1.0, 1.0], size=shape)


def F(T):
    return T.nn.functional


X, SIGNS = normal(3, 4), signs(3, 4)
CLASSES = np.array([0, 3, 1])
LABEL_LISTS = np.array([[0, 3, -1, 2], [1, 1, -1, 0], [2, 0, 1, 3]])  # ended by -1, a repeat, all four
CLASS_WEIGHT = np.array([0.5, 2.0, 1.0, 1.5])
VARIANCE = RNG.uniform(0.1, 2.0, (3, 4))

# name -> (function of (T, *tensors), arrays, which arrays require grad)
REDUCED = {}
for r in ("none", "mean", "sum"):
    REDUCED.update({
        f"soft_margin_loss {r}": (lambda T, x, t, r=r: F(T).soft_margin_loss(x, t, reduction=r), [X, SIGNS], [1, 0]),
        f"hinge_embedding_loss {r}": (lambda T, x, t, r=r: F(T).hinge_embedding_loss(x, t, 0.5, reduction=r),
                                      [X, SIGNS], [1, 0]),
        f"multilabel_soft_margin_loss weight {r}": (
            lambda T, x, t, w, r=r: F(T).multilabel_soft_margin_loss(x, t, w, reduction=r),
            [X, (SIGNS > 0) * 1.0, CLASS_WEIGHT], [1, 1, 1]),
        f"multi_margin_loss {r}": (lambda T, x, t, r=r: F(T).multi_margin_loss(x, t, reduction=r), [X, CLASSES],
                                   [1, 0]),
        f"multi_margin_loss p=2 weight {r}": (
            lambda T, x, t, w, r=r: F(T).multi_margin_loss(x, t, 2, 0.7, w, reduction=r),
            [X, CLASSES, CLASS_WEIGHT], [1, 0, 0]),
        f"multilabel_margin_loss {r}": (lambda T, x, t, r=r: F(T).multilabel_margin_loss(x, t, reduction=r),
                                        [X, LABEL_LISTS], [1, 0]),
        f"gaussian_nll_loss {r}": (lambda T, x, t, v, r=r: F(T).gaussian_nll_loss(x, t, v, reduction=r),
                                   [X, normal(3, 4), VARIANCE], [1, 1, 1]),
        f"triplet_margin_with_distance_loss {r}": (
            lambda T, a, p, n, r=r: F(T).triplet_margin_with_distance_loss(a, p, n, reduction=r),
            [X, normal(3, 4), normal(3, 4)], [1, 1, 1]),
    })


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(REDUCED))
def test_every_reduction(torch, name, dtype):
    fn, arrays, grads = REDUCED[name]
    check(torch, fn, [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays], grads,
          rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6 if dtype == "float32" else 1e-12)


def f32(*values):
    return np.array(values, np.float32)


EDGES = {
    # log1p(exp(-x t)) overflows where PyTorch's does: inf, and a NaN gradient
    "soft_margin_loss overflow nan inf": (lambda T, x, t: F(T).soft_margin_loss(x, t, reduction="none"),
                                          [f32(-100.0, 100.0, 0.0, NAN, INF, -INF, 3.0), f32(1, 1, 1, 1, 1, 1, -1)]),
    "soft_margin_loss empty": (lambda T, x, t: F(T).soft_margin_loss(x, t), [np.zeros((0, 3)), np.zeros((0, 3))]),
    "mse_loss empty": (lambda T, x, t: F(T).mse_loss(x, t), [np.zeros(0, np.float32), np.zeros(0, np.float32)]),
    "soft_margin_loss target broadcast": (lambda T, x, t: F(T).soft_margin_loss(x, t), [normal(2, 4), signs(4)]),
    "soft_margin_loss float64 target": (lambda T, x, t: F(T).soft_margin_loss(x, t, reduction="sum"),
                                        [normal(2, 3).astype(np.float32), signs(2, 3)]),
    # margin - x exactly 0 (clamp_min's subgradient 1), a target of neither 1 nor -1, NaN and inf
    "hinge_embedding_loss margin hit": (
        lambda T, x, t: F(T).hinge_embedding_loss(x, t, reduction="none"),
        [f32(1.0, 1.0, NAN, NAN, INF, INF, -INF, 0.25), f32(-1, 1, -1, 1, -1, 1, -1, 0.5)]),
    "hinge_embedding_loss target broadcast": (
        lambda T, x, t: F(T).hinge_embedding_loss(x, t, margin=2.0, reduction="none"),
        [normal(2, 3), signs(2, 1, 3)]),
    "multilabel_soft_margin_loss 1e4 nan": (
        lambda T, x, t: F(T).multilabel_soft_margin_loss(x, t, reduction="none"),
        [f32([1e4, -1e4, 0.0], [NAN, 1.0, INF]), f32([1, 1, 0.5], [0, 1, 1])]),
    "multilabel_soft_margin_loss 1-d weight per entry": (
        lambda T, x, t, w: F(T).multilabel_soft_margin_loss(x, t, w), [normal(5), RNG.uniform(0, 1, 5), normal(2, 5)]),
    # z = margin - x[y] + x[i] exactly 0 sends nothing; NaN never passes z > 0
    "multi_margin_loss margins hit": (
        lambda T, x, t: F(T).multi_margin_loss(x, t, reduction="none"),
        [f32([1.5, 0.5, 0.25], [0.0, 1.0, 2.0], [NAN, 0.5, 0.0], [0.5, NAN, 0.0], [INF, 0.0, 1.0],
             [0.0, INF, 1.0]), np.array([0, 2, 1, 0, 0, 0])]),
    "multi_margin_loss p=2 margins hit weight": (
        lambda T, x, t, w: F(T).multi_margin_loss(x, t, p=2, weight=w),
        [f32([1.5, 0.5, 0.25], [0.0, 1.0, 2.0]), np.array([0, 2]), f32(2.0, 0.5, 3.0)]),
    "multi_margin_loss 1-d input": (lambda T, x, t: F(T).multi_margin_loss(x, t, reduction="none"),
                                    [normal(4), np.array([2])]),
    "multi_margin_loss 1-d input 0-d target": (lambda T, x, t: F(T).multi_margin_loss(x, t, margin=2.0),
                                               [normal(4), np.array(1)]),
    "multi_margin_loss 0-d input": (lambda T, x, t: F(T).multi_margin_loss(x, t, reduction="none"),
                                    [np.float32(0.5), np.array(0)]),
    "multilabel_margin_loss margins hit nan": (
        lambda T, x, t: F(T).multilabel_margin_loss(x, t, reduction="none"),
        [f32([1.0, 2.0, 0.0, 1.0], [0.5, NAN, 0.3, 0.2], [NAN, 0.0, 1.0, 2.0], [1.0, 2.0, 3.0, 4.0]),
         np.array([[1, 1, -1, 0], [0, -1, 2, 3], [0, 2, -1, -1], [-1, 0, 1, 2]])]),
    # reduced, PyTorch's result over an empty batch is uninitialised memory: see test_empty_batch_reduces_to_zero
    "multilabel_margin_loss empty batch": (lambda T, x, t: F(T).multilabel_margin_loss(x, t, reduction="none"),
                                           [np.zeros((0, 4)), np.zeros((0, 4), np.int64)]),
    "multilabel_margin_loss 1-d": (lambda T, x, t: F(T).multilabel_margin_loss(x, t, reduction="none"),
                                   [normal(5), np.array([4, 0, -1, 1, 1])]),
    # var below eps is clamped, and its gradient is taken there rather than masked
    "gaussian_nll_loss clamped variance": (
        lambda T, x, t, v: F(T).gaussian_nll_loss(x, t, v, reduction="none"),
        [f32(1.0, 2.0, 3.0, 1.0, NAN), f32(0.0, 2.5, 1.0, 1.0, 0.0), f32(1e-8, 0.0, 0.5, INF, 1.0)]),
    "gaussian_nll_loss eps full": (lambda T, x, t, v: F(T).gaussian_nll_loss(x, t, v, full=True, eps=0.3),
                                   [normal(3, 4), normal(3, 4), VARIANCE]),
    "gaussian_nll_loss a variance per row": (lambda T, x, t, v: F(T).gaussian_nll_loss(x, t, v, reduction="sum"),
                                             [normal(3, 4), normal(3, 4), VARIANCE[:, 0]]),
    "gaussian_nll_loss a variance per column": (lambda T, x, t, v: F(T).gaussian_nll_loss(x, t, v, reduction="none"),
                                                [normal(3, 4), normal(3, 4), VARIANCE[:1]]),
    "gaussian_nll_loss a number": (lambda T, x, t: F(T).gaussian_nll_loss(x, t, 0.5), [normal(3, 4), normal(3, 4)]),
    "gaussian_nll_loss target broadcast": (lambda T, x, t, v: F(T).gaussian_nll_loss(x, t, v),
                                           [normal(3, 4), normal(3, 1), VARIANCE]),
    "triplet_margin_with_distance_loss swap": (
        lambda T, a, p, n: F(T).triplet_margin_with_distance_loss(a, p, n, swap=True, margin=2.0),
        [normal(5, 3), normal(5, 3), normal(5, 3)]),
    # an L1 distance on whole numbers: margin + d(a, p) - d(a, n) is exactly 0 in the second row
    "triplet_margin_with_distance_loss own distance, margin hit": (
        lambda T, a, p, n: F(T).triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda u, v: (u - v).abs().sum(-1), reduction="none", swap=True),
        [f32([0, 0], [1, 2]), f32([1, 1], [1, 1]), f32([3, 0], [3, 2])]),
    "triplet_margin_with_distance_loss cosine distance": (
        lambda T, a, p, n: F(T).triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda u, v: 1.0 - F(T).cosine_similarity(u, v), margin=0.5),
        [normal(4, 3), normal(4, 3), normal(4, 3)]),
    "cosine_similarity": (lambda T, a, b: F(T).cosine_similarity(a, b), [normal(3, 4), normal(3, 4)]),
    # each norm is clamped to eps on its own (PyTorch 2's form): 1e-9 against 1e-9 gives 0.01, not 1e-10
    "cosine_similarity near and at zero": (
        lambda T, a, b: F(T).cosine_similarity(a, b, dim=-1),
        [f32([1e-9, 0.0], [0.0, 0.0], [3.0, 4.0], [1e-5, 1e-5], [INF, 1.0], [NAN, 1.0], [0.0, 0.0]),
         f32([1e-9, 0.0], [1.0, 2.0], [1.0, -1.0], [2e-5, 1e-5], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0])]),
    "cosine_similarity eps broadcast dim 0": (lambda T, a, b: F(T).cosine_similarity(a, b, 0, eps=0.5),
                                              [normal(4, 1) * 0.1, normal(4, 3)]),
    "cosine_similarity float32 with float64": (lambda T, a, b: F(T).cosine_similarity(a, b),
                                               [normal(2, 3).astype(np.float32), normal(2, 3)]),
    "cosine_similarity integers": (lambda T, a, b: F(T).cosine_similarity(a, b), [normal(2, 3), np.array([1, 0, 2])]),
    "torch.cosine_similarity": (lambda T, a, b: T.cosine_similarity(a, b, dim=0), [normal(3), normal(3)]),
    "torch.pairwise_distance": (lambda T, a, b: T.pairwise_distance(a, b, 1.0, keepdim=True),
                                [normal(2, 3), normal(2, 3)]),
}
# PyTorch differentiates neither these targets nor class weights
FIXED = ("soft_margin", "hinge", "multi_margin", "multilabel_margin")


@pytest.mark.parametrize("name", list(EDGES))
def test_edges(torch, name):
    fn, arrays = EDGES[name]
    grads = [1] + [0 if name.startswith(FIXED) else 1] * (len(arrays) - 1)
    check(torch, fn, arrays, grads, rtol=1e-5, atol=1e-6)


def test_a_bad_reduction_is_refused_before_the_shapes_are_checked(torch):
    """PyTorch checks ``reduction`` first: with shapes that do not match too, its error names the
    reduction."""
    def error(T):
        with pytest.raises(ValueError) as raised:
            T.nn.functional.binary_cross_entropy_with_logits(T.ones(2, 3), T.ones(3), reduction="bad")
        return str(raised.value)
    assert error(symgrad) == error(torch) == "bad is not a valid value for reduction"


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("loss", ["multi_margin_loss", "multilabel_margin_loss"])
def test_empty_batch_reduces_to_zero(loss, reduction):
    """PyTorch's CPU kernels return an output they never wrote for an empty batch (a different number
    from run to run), so there is nothing to compare; symgrad's is the empty sum, 0, with an empty
    gradient (docs/api.md)."""
    x = symgrad.zeros(0, 4, dtype=symgrad.float64, requires_grad=True)
    target = symgrad.zeros((0,) if loss == "multi_margin_loss" else (0, 4), dtype=symgrad.int64)
    value = getattr(symgrad.nn.functional, loss)(x, target, reduction=reduction)
    value.backward()
    assert value.shape == () and value.item() == 0.0
    assert x.grad.shape == (0, 4)


@pytest.mark.parametrize("make", [
    lambda T, x, t: F(T).soft_margin_loss(x, t, size_average=False),
    lambda T, x, t: F(T).hinge_embedding_loss(x, t, reduce=False),
    lambda T, x, t: F(T).multilabel_soft_margin_loss(x, (t > 0) * 1.0, size_average=False),
    lambda T, x, t: F(T).multi_margin_loss(x, T.tensor(CLASSES), reduce=False),
    lambda T, x, t: F(T).multilabel_margin_loss(x, T.tensor(LABEL_LISTS), size_average=False, reduce=True),
])
def test_legacy_reduction_arguments(torch, make):
    results = []
    for T in (symgrad, torch):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            results.append(make(T, T.tensor(X), T.tensor(SIGNS)).numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


ERRORS = {
    "soft_margin_loss target requires grad": lambda T: F(T).soft_margin_loss(T.ones(3), T.ones(3, requires_grad=True)),
    "soft_margin_loss target beyond the input": lambda T: F(T).soft_margin_loss(T.ones(3), T.ones(2, 3)),
    "soft_margin_loss shapes": lambda T: F(T).soft_margin_loss(T.ones(2, 4), T.ones(2, 3)),
    "soft_margin_loss reduction": lambda T: F(T).soft_margin_loss(T.ones(3), T.ones(3), reduction="avg"),
    "hinge_embedding_loss shapes": lambda T: F(T).hinge_embedding_loss(T.ones(2, 4), T.ones(2, 3)),
    "hinge_embedding_loss reduction": lambda T: F(T).hinge_embedding_loss(T.ones(3), T.ones(3), reduction="x"),
    "multilabel_soft_margin_loss shapes": lambda T: F(T).multilabel_soft_margin_loss(T.ones(2, 4), T.ones(2, 3)),
    "multilabel_soft_margin_loss 0-d": lambda T: F(T).multilabel_soft_margin_loss(T.tensor(0.5), T.tensor(1.0)),
    "multilabel_soft_margin_loss reduction": lambda T: F(T).multilabel_soft_margin_loss(T.ones(3), T.ones(3),
                                                                                       reduction="x"),
    "multi_margin_loss p": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([0, 1]), p=3),
    "multi_margin_loss target range": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([0, 3])),
    "multi_margin_loss negative target": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([-1, 0])),
    "multi_margin_loss target size": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([0, 1, 2])),
    "multi_margin_loss 2-d target": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([[0, 1]])),
    "multi_margin_loss float target": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([0.0, 1.0])),
    "multi_margin_loss int32 target": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([0, 1], dtype=T.int32)),
    "multi_margin_loss 3-d input": lambda T: F(T).multi_margin_loss(T.ones(1, 2, 3), T.tensor([0, 1])),
    "multi_margin_loss no classes": lambda T: F(T).multi_margin_loss(T.ones(2, 0), T.tensor([0, 1])),
    "multi_margin_loss integers": lambda T: F(T).multi_margin_loss(T.ones(2, 3, dtype=T.int32), T.tensor([0, 1])),
    "multilabel_margin_loss integers": lambda T: F(T).multilabel_margin_loss(T.ones(2, 3, dtype=T.int64),
                                                                             T.zeros(2, 3, dtype=T.int64)),
    "soft_margin_loss integers": lambda T: F(T).soft_margin_loss(T.ones(3, dtype=T.int64), T.ones(3)),
    "multilabel_soft_margin_loss integers": lambda T: F(T).multilabel_soft_margin_loss(T.ones(3, dtype=T.int64),
                                                                                       T.ones(3)),
    "multi_margin_loss weight size": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([0, 1]),
                                                                      weight=T.ones(4)),
    "multi_margin_loss 2-d weight": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([0, 1]),
                                                                     weight=T.ones(1, 3)),
    "multi_margin_loss weight dtype": lambda T: F(T).multi_margin_loss(T.ones(2, 3), T.tensor([0, 1]),
                                                                       weight=T.ones(3, dtype=T.float64)),
    "multi_margin_loss weight requires grad": lambda T: F(T).multi_margin_loss(
        T.ones(2, 3), T.tensor([0, 1]), weight=T.ones(3, requires_grad=True)),
    "multilabel_margin_loss target range": lambda T: F(T).multilabel_margin_loss(T.ones(2, 3),
                                                                                 T.tensor([[0, 3, 1], [0, 1, 2]])),
    "multilabel_margin_loss range after the end": lambda T: F(T).multilabel_margin_loss(
        T.ones(2, 3), T.tensor([[0, -1, -2], [0, 1, 2]])),
    "multilabel_margin_loss target size": lambda T: F(T).multilabel_margin_loss(T.ones(2, 3), T.zeros(2, 2,
                                                                                                      dtype=T.int64)),
    "multilabel_margin_loss float target": lambda T: F(T).multilabel_margin_loss(T.ones(2, 3), T.zeros(2, 3)),
    "multilabel_margin_loss 3-d input": lambda T: F(T).multilabel_margin_loss(T.ones(1, 2, 3),
                                                                              T.zeros(1, 2, 3, dtype=T.int64)),
    "multilabel_margin_loss reduction": lambda T: F(T).multilabel_margin_loss(
        T.ones(2, 3), T.zeros(2, 3, dtype=T.int64), reduction="x"),
    "gaussian_nll_loss negative number": lambda T: F(T).gaussian_nll_loss(T.ones(3), T.ones(3), -1.0),
    "gaussian_nll_loss negative entry": lambda T: F(T).gaussian_nll_loss(T.ones(3), T.ones(3),
                                                                         T.tensor([1.0, -1e-9, 1])),
    "gaussian_nll_loss an int": lambda T: F(T).gaussian_nll_loss(T.ones(3), T.ones(3), 2),
    "gaussian_nll_loss var size": lambda T: F(T).gaussian_nll_loss(T.ones(2, 4), T.ones(2, 4), T.ones(2, 3)),
    "gaussian_nll_loss var one per row, wrong rows": lambda T: F(T).gaussian_nll_loss(T.ones(2, 4), T.ones(2, 4),
                                                                                      T.ones(3)),
    "gaussian_nll_loss var rank": lambda T: F(T).gaussian_nll_loss(T.ones(2, 4), T.ones(2, 4), T.ones(1, 2, 4)),
    "gaussian_nll_loss var two axes short": lambda T: F(T).gaussian_nll_loss(T.ones(2, 4), T.ones(2, 4), T.ones(1, 1)),
    "gaussian_nll_loss 0-d var": lambda T: F(T).gaussian_nll_loss(T.ones(2, 4), T.ones(2, 4), T.tensor(1.0)),
    "gaussian_nll_loss reduction": lambda T: F(T).gaussian_nll_loss(T.ones(3), T.ones(3), T.ones(3), reduction="x"),
    "triplet_margin_with_distance_loss margin": lambda T: F(T).triplet_margin_with_distance_loss(
        T.ones(2, 3), T.ones(2, 3), T.ones(2, 3), margin=0.0),
    "triplet_margin_with_distance_loss ranks": lambda T: F(T).triplet_margin_with_distance_loss(
        T.ones(2, 3), T.ones(3), T.ones(2, 3)),
    "triplet_margin_with_distance_loss reduction": lambda T: F(T).triplet_margin_with_distance_loss(
        T.ones(3), T.ones(3), T.ones(3), reduction="x"),
    "cosine_similarity integers": lambda T: F(T).cosine_similarity(T.ones(3, dtype=T.int64), T.ones(3, dtype=T.int64),
                                                                   dim=0),
    "cosine_similarity shapes": lambda T: F(T).cosine_similarity(T.ones(2, 3), T.ones(2, 4)),
    "cosine_similarity dim": lambda T: F(T).cosine_similarity(T.ones(3), T.ones(3)),
    "MultiMarginLoss p": lambda T: T.nn.MultiMarginLoss(p=3),
    "MultiMarginLoss weight": lambda T: T.nn.MultiMarginLoss(weight=T.ones(2, 2)),
    "TripletMarginLoss margin": lambda T: T.nn.TripletMarginLoss(margin=0.0),
    "TripletMarginWithDistanceLoss margin": lambda T: T.nn.TripletMarginWithDistanceLoss(margin=-1.0),
    "Bilinear in1_features": lambda T: T.nn.Bilinear(0, 2, 3),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


# module text -> the arrays its forward takes (float ones require grad but for targets and variances' copies)
MODULES = {
    "KLDivLoss(reduction='batchmean')": ([normal(3, 4), RNG.uniform(0, 1, (3, 4))], [1, 0]),
    "KLDivLoss(log_target=True, reduction='sum')": ([normal(3, 4), normal(3, 4)], [1, 1]),
    "PoissonNLLLoss()": ([normal(3, 4), RNG.uniform(0, 3, (3, 4))], [1, 0]),
    "PoissonNLLLoss(log_input=False, full=True, eps=0.01, reduction='none')": (
        [RNG.uniform(0, 2, (3, 4)), RNG.uniform(0, 3, (3, 4))], [1, 0]),
    "GaussianNLLLoss()": ([normal(3, 4), normal(3, 4), VARIANCE], [1, 1, 1]),
    "GaussianNLLLoss(full=True, eps=0.5, reduction='sum')": ([normal(3, 4), normal(3, 4), VARIANCE[:, 0]], [1, 1, 1]),
    "CosineEmbeddingLoss()": ([normal(3, 4), normal(3, 4), signs(3)], [1, 1, 0]),
    "CosineEmbeddingLoss(margin=0.3, reduction='none')": ([normal(3, 4), normal(3, 4), signs(3)], [1, 1, 0]),
    "MarginRankingLoss(margin=0.5)": ([normal(5), normal(5), signs(5)], [1, 1, 0]),
    "MarginRankingLoss(reduction='sum')": ([normal(5), normal(5), signs(5)], [1, 1, 0]),
    "TripletMarginLoss()": ([normal(3, 4), normal(3, 4), normal(3, 4)], [1, 1, 1]),
    "TripletMarginLoss(margin=2.0, p=1.0, eps=0.1, swap=True, reduction='none')": (
        [normal(3, 4), normal(3, 4), normal(3, 4)], [1, 1, 1]),
    "SoftMarginLoss()": ([normal(3, 4), signs(3, 4)], [1, 0]),
    "SoftMarginLoss(reduction='none')": ([normal(3, 4), signs(3, 4)], [1, 0]),
    "HingeEmbeddingLoss()": ([normal(3, 4), signs(3, 4)], [1, 0]),
    "HingeEmbeddingLoss(margin=0.2, reduction='sum')": ([normal(3, 4), signs(3, 4)], [1, 0]),
    "MultiLabelSoftMarginLoss()": ([normal(3, 4), (signs(3, 4) > 0) * 1.0], [1, 1]),
    "MultiLabelSoftMarginLoss(weight=T.tensor([1.0, 2.0, 0.5, 3.0]))": ([normal(3, 4), (signs(3, 4) > 0) * 1.0],
                                                                        [1, 1]),
    "MultiMarginLoss()": ([normal(3, 4), CLASSES], [1, 0]),
    "MultiMarginLoss(p=2, margin=0.5, weight=T.tensor([1.0, 2.0, 0.5, 3.0]), reduction='none')": (
        [normal(3, 4), CLASSES], [1, 0]),
    "MultiLabelMarginLoss()": ([normal(3, 4), LABEL_LISTS], [1, 0]),
    "MultiLabelMarginLoss(reduction='none')": ([normal(3, 4), LABEL_LISTS], [1, 0]),
    "TripletMarginWithDistanceLoss()": ([normal(3, 4), normal(3, 4), normal(3, 4)], [1, 1, 1]),
    "TripletMarginWithDistanceLoss(distance_function=T.nn.PairwiseDistance(p=1.0), margin=2.0, swap=True)": (
        [normal(3, 4), normal(3, 4), normal(3, 4)], [1, 1, 1]),
    "TripletMarginWithDistanceLoss(distance_function=lambda a, b: (a - b).abs().amax(-1), reduction='none')": (
        [normal(3, 4), normal(3, 4), normal(3, 4)], [1, 1, 1]),
    "CosineSimilarity()": ([normal(3, 4), normal(3, 4)], [1, 1]),
    "CosineSimilarity(dim=0, eps=0.1)": ([normal(3, 4) * 0.01, normal(3, 4)], [1, 1]),
    "PairwiseDistance()": ([normal(3, 4), normal(3, 4)], [1, 1]),
    "PairwiseDistance(p=1.0, eps=0.0, keepdim=True)": ([normal(3, 4), normal(3, 4)], [1, 1]),
    "Bilinear(3, 4, 2)": ([normal(5, 3), normal(5, 4)], [1, 1]),
    "Bilinear(3, 2, 4, bias=False, dtype=T.float64)": ([normal(2, 3), normal(2, 2)], [1, 1]),
}


@pytest.mark.parametrize("text", list(MODULES))
def test_modules(torch, text):
    """Seeded: the same repr, state_dict, parameters, values and gradients (Bilinear's too)."""
    arrays, grads = MODULES[text]
    results = []
    for T in (symgrad, torch):
        T.manual_seed(5)
        module = eval("T.nn." + text, {"T": T})
        dtype = getattr(getattr(module, "weight", None), "dtype", T.float32)
        tensors = [T.tensor(a, dtype=dtype if a.dtype.kind == "f" else None, requires_grad=bool(g))
                   for a, g in zip(arrays, grads)]
        out = module(*tensors)
        (out * T.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)), dtype=out.dtype)).sum().backward()
        results.append((repr(module), list(module.state_dict()), type(out.grad_fn).__name__, str(out.dtype),
                        [v.numpy() for v in module.state_dict().values()], out.detach().numpy(),
                        [t.grad.numpy() for t in tensors if t.grad is not None],
                        [p.grad.numpy() for p in module.parameters()]))
    ours, theirs = results
    assert ours[:4] == theirs[:4]
    for a, b in zip(ours[4], theirs[4]):
        np.testing.assert_array_equal(a, b)  # seeded: the very same draws
    np.testing.assert_allclose(ours[5], theirs[5], rtol=1e-5, atol=1e-6)
    assert len(ours[6]) == len(theirs[6]) and len(ours[7]) == len(theirs[7])
    for a, b in zip(ours[6] + ours[7], theirs[6] + theirs[7]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 11])
def test_seeded_bilinear_holds_pytorchs_weights_after_other_draws(torch, seed):
    draws = []
    for T in (symgrad, torch):
        T.manual_seed(seed)
        T.nn.Linear(3, 2)
        layer = T.nn.Bilinear(20, 7, 5)
        draws.append([layer.weight.detach().numpy(), layer.bias.detach().numpy(), T.rand(3).numpy()])
    for a, b in zip(*draws):
        np.testing.assert_array_equal(a, b)


def test_loss_modules_keep_pytorchs_attributes(torch):
    def attributes(T):
        margin = T.nn.MultiMarginLoss(p=2, margin=0.5)
        distance = T.nn.PairwiseDistance(p=3.0, keepdim=True)
        poisson = T.nn.PoissonNLLLoss(log_input=False, eps=0.5)
        return [(margin.p, margin.margin, margin.reduction, margin.weight), (distance.norm, distance.keepdim),
                (poisson.log_input, poisson.full, poisson.eps), T.nn.GaussianNLLLoss().eps,
                T.nn.HingeEmbeddingLoss().margin, T.nn.CosineEmbeddingLoss().margin, T.nn.KLDivLoss().log_target]

    assert attributes(symgrad) == attributes(torch)
