"""torch.nn.functional's convolutions, pools, norms, embeddings, padding, linear algebra and loss
arguments against the installed PyTorch on the same arrays: values, dtypes, grad_fn names, the
gradient of every input that requires grad (NaN and Inf where PyTorch has them), and errors.
The registry's generic tests (test_ops.py) cover ordinary values of each op's examples."""
import math

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch

RNG = np.random.default_rng(14)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def labels(high, *shape):
    return RNG.integers(0, high, size=shape)


def _weights(shape):
    """A fixed cotangent: every entry of an output weighted differently, the same in both runs."""
    n = int(np.prod(shape))
    return (np.cos(np.arange(n) * 1.3) + 0.25).reshape(shape).astype(np.float32)


def run(T, fn, arrays, grads=None):
    """fn(T, *tensors) on tensors of ``arrays`` (float ones require grad unless ``grads`` says not):
    its outputs' values, dtypes and grad_fn names, and each input's gradient."""
    grads = grads or [True] * len(arrays)
    tensors = [T.tensor(a, requires_grad=bool(g and a.dtype.kind == "f")) for a, g in zip(arrays, grads)]
    out = fn(T, *tensors)
    outs = out if isinstance(out, tuple) else (out,)
    seen = [(o.detach().numpy(), repr(o.dtype), type(o.grad_fn).__name__ if o.grad_fn else None) for o in outs]
    differentiable = [o for o in outs if o.requires_grad]
    if differentiable:
        total = sum((o * T.tensor(_weights(tuple(o.shape)), dtype=o.dtype)).sum() for o in differentiable)
        total.backward()
    return seen, [t.grad.numpy() if t.grad is not None else None for t in tensors]


def check(torch, fn, arrays, grads=None, rtol=2e-5, atol=2e-6):
    ours, theirs = run(symgrad, fn, arrays, grads), run(torch, fn, arrays, grads)
    for (value, dtype, grad_fn), (t_value, t_dtype, t_grad_fn) in zip(ours[0], theirs[0]):
        assert (dtype, grad_fn) == (t_dtype, t_grad_fn)
        assert value.shape == t_value.shape
        np.testing.assert_allclose(value, t_value, rtol=rtol, atol=atol, equal_nan=True)
    for k, (g, t_g) in enumerate(zip(ours[1], theirs[1])):
        assert (g is None) == (t_g is None), f"input {k}: gradient {g} vs PyTorch's {t_g}"
        if g is not None:
            np.testing.assert_allclose(g, t_g, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"input {k}")


def F(T):
    return T.nn.functional


# ------------------------------------------------------------------------ linear algebra

LINALG = {
    "bmm": (lambda T, a, b: T.bmm(a, b), [normal(2, 3, 4), normal(2, 4, 5)]),
    "mv": (lambda T, a, v: T.mv(a, v), [normal(3, 4), normal(4)]),
    "outer": (lambda T, a, b: T.outer(a, b), [normal(3), normal(4)]),
    "einsum matmul": (lambda T, a, b: T.einsum("ij,jk->ik", a, b), [normal(3, 4), normal(4, 5)]),
    "einsum transposed result": (lambda T, a, b: T.einsum("ij,jk->ki", a, b), [normal(3, 4), normal(4, 5)]),
    "einsum implicit": (lambda T, a, b: T.einsum("bA,Ab", a, b), [normal(2, 3), normal(3, 2)]),
    "einsum ellipsis": (lambda T, a, b: T.einsum("...ij,...jk->...ik", a, b), [normal(2, 3, 4), normal(4, 2)]),
    "einsum broadcast 1": (lambda T, a, b: T.einsum("ij,ij->i", a, b), [normal(3, 1), normal(3, 4)]),
    "einsum three": (lambda T, a, b, c: T.einsum("ij,jk,kl->il", a, b, c), [normal(2, 3), normal(3, 4), normal(4, 2)]),
    "einsum outer": (lambda T, a, b: T.einsum("i,j->ij", a, b), [normal(3), normal(4)]),
    "einsum permute": (lambda T, a: T.einsum("ijk->kij", a), [normal(2, 3, 4)]),
    "einsum sum": (lambda T, a: T.einsum("ij->", a), [normal(2, 3)]),
    "einsum list": (lambda T, a, b: T.einsum("i,i", [a, b]), [normal(5), normal(5)]),
    "einsum summed alone": (lambda T, a, b: T.einsum("ij,k->i", a, b), [normal(2, 3), normal(4)]),
    "cross": (lambda T, a, b: T.cross(a, b, dim=1), [normal(4, 3), normal(4, 3)]),
    "cross broadcast": (lambda T, a, b: T.cross(a, b, dim=0), [normal(3, 2), normal(3, 1)]),
    "cross of itself at inf": (lambda T, a: T.cross(a, a * 2, dim=0), [np.array([1.0, math.inf, 2.0], np.float32)]),
    "cross with nan": (lambda T, a, b: T.cross(a, b, dim=-1), [np.array([[1.0, math.nan, 2.0]], np.float32),
                                                               normal(1, 3)]),
    "einsum at inf": (lambda T, a, b: T.einsum("ij,jk->ik", a, b), [np.array([[math.inf, 0.0]], np.float32),
                                                                    normal(2, 2)]),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_linear_algebra(torch, name):
    fn, arrays = LINALG[name]
    check(torch, fn, arrays)


def test_cross_without_dim_takes_the_first_axis_of_size_3(torch):
    with pytest.warns(UserWarning, match="without specifying the dim"):
        check(torch, lambda T, a, b: T.cross(a, b), [normal(3, 3), normal(3, 3)])


# ------------------------------------------------------------------------------- convolution

CONVOLUTIONS = {
    "conv2d": (lambda T, x, w: F(T).conv2d(x, w), [normal(2, 3, 6, 5), normal(4, 3, 3, 2)]),
    "conv2d bias stride padding": (lambda T, x, w, b: F(T).conv2d(x, w, b, stride=2, padding=1),
                                   [normal(1, 3, 7, 6), normal(2, 3, 3, 3), normal(2)]),
    "conv2d dilation groups": (lambda T, x, w, b: F(T).conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                                                             groups=2), [normal(2, 4, 7, 6), normal(6, 2, 3, 3), normal(6)]),
    "conv2d same even kernel": (lambda T, x, w: F(T).conv2d(x, w, padding="same", dilation=(1, 2)),
                                [normal(1, 2, 5, 6), normal(3, 2, 2, 4)]),
    "conv2d valid": (lambda T, x, w: F(T).conv2d(x, w, padding="valid"), [normal(1, 2, 4, 4), normal(1, 2, 2, 2)]),
    "conv2d unbatched": (lambda T, x, w, b: F(T).conv2d(x, w, b, padding=1), [normal(2, 4, 4), normal(3, 2, 3, 3),
                                                                              normal(3)]),
    "conv2d depthwise": (lambda T, x, w: F(T).conv2d(x, w, groups=3), [normal(1, 3, 5, 5), normal(6, 1, 2, 2)]),
    "conv2d stride leaves input unread": (lambda T, x, w: F(T).conv2d(x, w, stride=3),
                                          [normal(1, 1, 8, 7), normal(2, 1, 2, 2)]),
    "conv1d": (lambda T, x, w, b: F(T).conv1d(x, w, b, stride=2, padding=2, dilation=2),
               [normal(2, 3, 9), normal(4, 3, 3), normal(4)]),
    "conv1d groups same": (lambda T, x, w: F(T).conv1d(x, w, padding="same", groups=2),
                           [normal(1, 4, 6), normal(2, 2, 4)]),
    "conv1d unbatched": (lambda T, x, w: F(T).conv1d(x, w), [normal(2, 5), normal(3, 2, 2)]),
    "conv2d at inf and nan": (lambda T, x, w: F(T).conv2d(x, w),
                              [np.array([[[[1.0, math.inf, 0.5], [0.0, 2.0, -1.0], [math.nan, 1.0, 3.0]]]], np.float32),
                               normal(1, 1, 2, 2)]),
}


@pytest.mark.parametrize("name", list(CONVOLUTIONS))
def test_convolution(torch, name):
    fn, arrays = CONVOLUTIONS[name]
    check(torch, fn, arrays, rtol=1e-4, atol=1e-5)


def test_convolution_gradient_of_gradient():
    """The VJP is convolutions, so differentiating it again stays in the IR."""
    rng = np.random.default_rng(3)
    x = symgrad.tensor(rng.standard_normal((1, 4, 5, 5)), requires_grad=True)
    w = symgrad.tensor(rng.standard_normal((2, 2, 3, 2)), requires_grad=True)
    conv = lambda x, w: symgrad.nn.functional.conv2d(x, w, stride=(2, 1), padding=1, groups=2)  # noqa: E731
    assert symgrad.gradgradcheck(conv, (x, w))


# ----------------------------------------------------------------------------------- pooling

TIES = np.array([[[[1.0, 1.0, 0.0, 2.0], [1.0, 0.5, 2.0, 2.0], [-1.0, 3.0, 3.0, 0.0], [3.0, 3.0, 0.0, 0.0]]]],
                np.float32)
NANS = np.array([[[[1.0, math.nan, 0.0, 2.0], [math.nan, 0.5, math.inf, 2.0], [-1.0, 3.0, -math.inf, 0.0],
                   [3.0, math.nan, 0.0, 0.0]]]], np.float32)

POOLS = {
    "max": (lambda T, x: F(T).max_pool2d(x, 2), [normal(2, 3, 6, 5)]),
    "max overlapping stride padding": (lambda T, x: F(T).max_pool2d(x, 3, stride=2, padding=1), [normal(1, 2, 7, 7)]),
    "max ceil mode": (lambda T, x: F(T).max_pool2d(x, (3, 2), stride=(2, 1), padding=(1, 0), ceil_mode=True),
                      [normal(2, 5, 6)]),
    "max dilation": (lambda T, x: F(T).max_pool2d(x, 2, stride=(1, 2), padding=(1, 0), dilation=(2, 1)),
                     [normal(1, 2, 7, 6)]),
    "max ties go to the first": (lambda T, x: F(T).max_pool2d(x, 2, stride=1), [TIES]),
    "max nan and inf": (lambda T, x: F(T).max_pool2d(x, 2, stride=1), [NANS]),
    "avg": (lambda T, x: F(T).avg_pool2d(x, 2), [normal(2, 3, 6, 5)]),
    "avg padding counted": (lambda T, x: F(T).avg_pool2d(x, 3, stride=2, padding=1), [normal(1, 2, 7, 7)]),
    "avg padding not counted": (lambda T, x: F(T).avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
                                [normal(1, 2, 6, 7)]),
    "avg ceil mode": (lambda T, x: F(T).avg_pool2d(x, (2, 3), stride=(3, 2), padding=1, ceil_mode=True),
                      [normal(1, 1, 7, 8)]),
    "avg divisor": (lambda T, x: F(T).avg_pool2d(x, 3, stride=2, padding=1, divisor_override=4), [normal(1, 2, 5, 5)]),
    "avg nan and inf": (lambda T, x: F(T).avg_pool2d(x, 2, stride=1), [NANS]),
    "adaptive divisible": (lambda T, x: F(T).adaptive_avg_pool2d(x, (3, 2)), [normal(2, 3, 6, 4)]),
    "adaptive overlapping": (lambda T, x: F(T).adaptive_avg_pool2d(x, (3, 4)), [normal(1, 2, 7, 5)]),
    "adaptive larger": (lambda T, x: F(T).adaptive_avg_pool2d(x, 5), [normal(1, 3, 4)]),
    "adaptive one": (lambda T, x: F(T).adaptive_avg_pool2d(x, 1), [normal(2, 3, 4, 4)]),
    "adaptive none keeps": (lambda T, x: F(T).adaptive_avg_pool2d(x, (None, 2)), [normal(1, 2, 3, 5)]),
    "adaptive nan and inf": (lambda T, x: F(T).adaptive_avg_pool2d(x, 3), [NANS]),
}


@pytest.mark.parametrize("name", list(POOLS))
def test_pooling(torch, name):
    fn, arrays = POOLS[name]
    check(torch, fn, arrays)


# ------------------------------------------------------------------------------ normalization

NORMS = {
    "layer_norm": (lambda T, x: F(T).layer_norm(x, (4,)), [normal(3, 4)]),
    "layer_norm affine": (lambda T, x, w, b: F(T).layer_norm(x, (3, 4), w, b, eps=1e-3),
                          [normal(2, 3, 4), normal(3, 4), normal(3, 4)]),
    "layer_norm weight only": (lambda T, x, w: F(T).layer_norm(x, [5], w), [normal(2, 5), normal(5)]),
    "layer_norm bias only": (lambda T, x, b: F(T).layer_norm(x, (5,), bias=b), [normal(2, 5), normal(5)]),
    "layer_norm constant row": (lambda T, x: F(T).layer_norm(x, (3,)), [np.array([[2.0, 2.0, 2.0]], np.float32)]),
    "group_norm": (lambda T, x: F(T).group_norm(x, 2), [normal(2, 4, 3)]),
    "group_norm affine": (lambda T, x, w, b: F(T).group_norm(x, 3, w, b), [normal(2, 6, 2, 2), normal(6), normal(6)]),
    "group_norm one group": (lambda T, x, w: F(T).group_norm(x, 1, w, eps=0.01), [normal(3, 4), normal(4)]),
}


@pytest.mark.parametrize("name", list(NORMS))
def test_normalization(torch, name):
    fn, arrays = NORMS[name]
    check(torch, fn, arrays, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_moves_the_running_statistics_and_eval_uses_them(torch, affine):
    x0, w0, b0 = normal(4, 3, 2), normal(3), normal(3)

    def run_both(T):
        x = T.tensor(x0, requires_grad=True)
        w, b = (T.tensor(w0, requires_grad=True), T.tensor(b0, requires_grad=True)) if affine else (None, None)
        mean, var = T.zeros(3), T.ones(3)
        y = F(T).batch_norm(x, mean, var, w, b, training=True, momentum=0.3)
        y2 = F(T).batch_norm(x * 2, mean, var, w, b, training=True)
        z = F(T).batch_norm(x, mean, var, w, b, training=False, eps=0.1)
        ((y * T.tensor(x0)).sum() + (y2 * y2).sum() + (z * T.tensor(x0) ** 2).sum()).backward()
        values = [y, y2, z, mean, var, x.grad] + ([w.grad, b.grad] if affine else [])
        return [v.detach().numpy() for v in values], [type(v.grad_fn).__name__ for v in (y, z)]

    (ours, names), (theirs, t_names) = run_both(symgrad), run_both(torch)
    assert names == t_names
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_batch_norm_without_running_statistics(torch):
    check(torch, lambda T, x: F(T).batch_norm(x, None, None, training=True), [normal(5, 2)], rtol=1e-4, atol=1e-5)


def test_batch_norm_running_statistics_get_no_gradient(torch):
    check(torch, lambda T, x, m, v: F(T).batch_norm(x, m, v), [normal(3, 2), normal(2), np.float32([0.5, 2.0])],
          [True, False, False], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------- embeddings, padding, ...

PADDING_ROWS = normal(6, 3)

OTHERS = {
    "softplus beta threshold": (lambda T, x: F(T).softplus(x, beta=2.0, threshold=1.5),
                                [np.float32([-3.0, 0.0, 0.5, 0.75, 0.8, 4.0, math.inf, math.nan])]),
    "Softplus module": (lambda T, x: T.nn.Softplus(beta=0.5, threshold=2.0)(x), [normal(3, 4) * 4]),
    "embedding": (lambda T, i, w: F(T).embedding(i, w), [labels(6, 2, 4), PADDING_ROWS]),
    "embedding padding_idx": (lambda T, i, w: F(T).embedding(i, w, padding_idx=-2),
                              [np.array([[4, 1, 4], [0, 4, 2]]), PADDING_ROWS]),
    "one_hot": (lambda T, i: F(T).one_hot(i), [np.array([[0, 3], [2, 1]])]),
    "one_hot classes": (lambda T, i: F(T).one_hot(i, 6), [np.array([1, 0, 2])]),
    "normalize": (lambda T, x: F(T).normalize(x), [normal(3, 4)]),
    "normalize p=1 dim 0 at zero": (lambda T, x: F(T).normalize(x, p=1.0, dim=0),
                                    [np.array([[0.0, 1.0], [0.0, -2.0]], np.float32)]),
    "pad constant": (lambda T, x: F(T).pad(x, (1, 2)), [normal(2, 3)]),
    "pad constant value negative": (lambda T, x: F(T).pad(x, (2, -1, 0, 1), value=1.5), [normal(2, 3, 4)]),
    "pad reflect 1d": (lambda T, x: F(T).pad(x, (2, 3), mode="reflect"), [normal(2, 5)]),
    "pad reflect 2d": (lambda T, x: F(T).pad(x, (2, 0, 1, 3), mode="reflect"), [normal(1, 2, 4, 3)]),
    "pad circular 3d, cropping": (lambda T, x: F(T).pad(x, (1, 1, 0, -2, 1, -1), mode="circular"),
                                  [normal(1, 2, 2, 3, 4)]),
    "pad replicate 1d": (lambda T, x: F(T).pad(x, (3, 1), mode="replicate"), [normal(1, 2, 4)]),
    "pad replicate 2d": (lambda T, x: F(T).pad(x, (0, 3, 2, 1), mode="replicate"), [normal(3, 2, 2)]),
    "bilinear": (lambda T, a, b, w, c: F(T).bilinear(a, b, w, c), [normal(5, 3), normal(5, 4), normal(2, 3, 4),
                                                                    normal(2)]),
    "bilinear without bias": (lambda T, a, b, w: F(T).bilinear(a, b, w), [normal(3), normal(4), normal(2, 3, 4)]),
    "dropout eval": (lambda T, x: F(T).dropout(x * 2, 0.5, training=False), [normal(4)]),
    "dropout p=1": (lambda T, x: F(T).dropout(x * 2, 1.0), [normal(4)]),
    "dropout p=0": (lambda T, x: F(T).dropout(x * 2, 0.0), [normal(4)]),
}


@pytest.mark.parametrize("name", list(OTHERS))
def test_embeddings_padding_and_compositions(torch, name):
    fn, arrays = OTHERS[name]
    check(torch, fn, arrays)


def test_dropout_keeps_1_minus_p_of_the_entries_scaled():
    """symgrad draws the mask with its own generator (not PyTorch's numbers): its statistics."""
    x = symgrad.ones(20000, requires_grad=True)
    y = symgrad.nn.functional.dropout(x, 0.25)
    y.sum().backward()
    values = y.detach().numpy()
    assert type(y.grad_fn).__name__ == "MulBackward0"
    assert set(np.unique(values)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((values > 0).mean() - 0.75) < 0.02
    np.testing.assert_array_equal(x.grad.numpy(), values)
    leaf = symgrad.ones(3, requires_grad=True)
    assert symgrad.nn.functional.dropout(leaf, 0.0) is leaf


# ------------------------------------------------------------------------------------- losses

LOGITS, CLASSES = normal(4, 5), np.array([0, 3, 4, 3])
PROBABILITIES = np.exp(normal(4, 5)) / np.exp(normal(4, 5)).sum(1, keepdims=True)
CLASS_WEIGHT = np.float32([0.5, 1.0, 2.0, 1.5, 0.25])
HUGE = np.float32([[1e4, -1e4, 0.0], [-1e4, 1e4, 3.0]])
UNIT = RNG.uniform(0.05, 0.95, (2, 3)).astype(np.float32)
KEEP = [True, False, False]  # the weights PyTorch refuses to differentiate

LOSSES = {}
for reduction in ("mean", "sum", "none"):
    LOSSES.update({
        f"cross_entropy weight {reduction}": (
            lambda T, x, t, w, r=reduction: F(T).cross_entropy(x, t, weight=w, reduction=r, ignore_index=4),
            [LOGITS, CLASSES, CLASS_WEIGHT]),
        f"cross_entropy label_smoothing {reduction}": (
            lambda T, x, t, r=reduction: F(T).cross_entropy(x, t, reduction=r, label_smoothing=0.2, ignore_index=3),
            [LOGITS, CLASSES]),
        f"cross_entropy label_smoothing weight {reduction}": (
            lambda T, x, t, w, r=reduction: F(T).cross_entropy(x, t, w, reduction=r, label_smoothing=0.1),
            [LOGITS, CLASSES, CLASS_WEIGHT]),
        f"cross_entropy probabilities {reduction}": (
            lambda T, x, t, r=reduction: F(T).cross_entropy(x, t, reduction=r), [LOGITS, PROBABILITIES]),
        f"cross_entropy probabilities smoothing weight {reduction}": (
            lambda T, x, t, w, r=reduction: F(T).cross_entropy(x, t, w, reduction=r, label_smoothing=0.3),
            [LOGITS, PROBABILITIES, CLASS_WEIGHT]),
        f"nll_loss weight {reduction}": (
            lambda T, x, t, w, r=reduction: F(T).nll_loss(x, t, w, reduction=r), [LOGITS, CLASSES, CLASS_WEIGHT]),
        f"binary_cross_entropy weight {reduction}": (
            lambda T, q, t, w, r=reduction: F(T).binary_cross_entropy(q, t, w, reduction=r),
            [UNIT, UNIT[::-1].copy(), np.float32([0.5, 2.0, 1.0])]),
        f"bce_with_logits weights {reduction}": (
            lambda T, x, t, w, pw, r=reduction: F(T).binary_cross_entropy_with_logits(x, t, w, reduction=r,
                                                                                      pos_weight=pw),
            [HUGE, np.float32([[1, 0, 0.5], [0, 1, 0.25]]), np.float32([1.0, 0.5, 2.0]), np.float32([3.0, 0.5, 1.0])]),
        f"kl_div {reduction}": (lambda T, x, t, r=reduction: F(T).kl_div(x, t, reduction=r),
                                [normal(2, 3), np.float32([[0.5, 0.0, 0.5], [0.2, 0.3, 0.5]])]),
        f"poisson_nll_loss {reduction}": (
            lambda T, x, t, r=reduction: F(T).poisson_nll_loss(x, t, reduction=r), [normal(2, 3), UNIT * 3]),
        f"margin_ranking_loss {reduction}": (
            lambda T, a, b, y, r=reduction: F(T).margin_ranking_loss(a, b, y, 0.5, reduction=r),
            [normal(4), normal(4), np.float32([1, -1, 1, -1])]),
        f"cosine_embedding_loss {reduction}": (
            lambda T, a, b, y, r=reduction: F(T).cosine_embedding_loss(a, b, y, 0.2, reduction=r),
            [normal(4, 3), normal(4, 3), np.float32([1, -1, 1, -1])]),
        f"l1_loss weight {reduction}": (lambda T, x, t, w, r=reduction: F(T).l1_loss(x, t, reduction=r, weight=w),
                                        [normal(2, 3), normal(2, 3), UNIT]),
        f"mse_loss weight {reduction}": (lambda T, x, t, w, r=reduction: F(T).mse_loss(x, t, reduction=r, weight=w),
                                         [normal(2, 3), normal(2, 3), UNIT]),
        f"huber_loss weight {reduction}": (
            lambda T, x, t, w, r=reduction: F(T).huber_loss(x, t, reduction=r, delta=0.5, weight=w),
            [normal(2, 3), normal(2, 3), UNIT]),
        f"triplet_margin_loss {reduction}": (
            lambda T, a, p, n, r=reduction: F(T).triplet_margin_loss(a, p, n, reduction=r),
            [normal(3, 4), normal(3, 4), normal(3, 4)]),
    })
LOSSES.update({
    "bce_with_logits weight only at 1e4": (
        lambda T, x, t, w: F(T).binary_cross_entropy_with_logits(x, t, w), [HUGE, np.float32([[1, 0, 1], [0, 1, 0]]),
                                                                          np.float32([[2.0], [0.5]])]),
    "bce_with_logits pos_weight only at 1e4": (
        lambda T, x, t, pw: F(T).binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="none"),
        [HUGE, np.float32([[1, 0, 1], [0, 1, 0]]), np.float32([2.0, 0.5, 4.0])]),
    "cross_entropy at 1e4": (lambda T, x, t: F(T).cross_entropy(x, t, label_smoothing=0.1),
                             [HUGE, np.array([1, 0])]),
    "cross_entropy probabilities at 1e4": (lambda T, x, t: F(T).cross_entropy(x, t), [HUGE, UNIT]),
    "cross_entropy 2d smoothing": (lambda T, x, t: F(T).cross_entropy(x, t, label_smoothing=0.2),
                                   [normal(2, 3, 2, 2), labels(3, 2, 2, 2)]),
    "kl_div batchmean log_target": (lambda T, x, t: F(T).kl_div(x, t, reduction="batchmean", log_target=True),
                                    [normal(2, 3), normal(2, 3)]),
    "poisson_nll_loss full": (lambda T, x, t: F(T).poisson_nll_loss(x, t, full=True, reduction="none"),
                              [normal(2, 3), np.float32([[0.0, 1.0, 2.5], [4.0, 0.5, 7.0]])]),
    "poisson_nll_loss rates": (lambda T, x, t: F(T).poisson_nll_loss(x, t, log_input=False),
                               [UNIT * 2, np.float32([[0.0, 1.0, 2.0], [3.0, 1.0, 0.0]])]),
    "triplet_margin_loss swap p=1": (lambda T, a, p, n: F(T).triplet_margin_loss(a, p, n, margin=2.0, p=1, swap=True),
                                     [normal(3, 4), normal(3, 4), normal(3, 4)]),
    "l1_loss weight broadcast target": (lambda T, x, t, w: F(T).l1_loss(x, t, weight=w),
                                        [normal(2, 3), normal(3), UNIT]),
    # PyTorch's deprecated size_average and reduce (with its warning) decide the reduction
    "mse_loss size_average=False": (lambda T, x, t: F(T).mse_loss(x, t, size_average=False), [normal(2, 3), normal(2, 3)]),
    "l1_loss reduce=False": (lambda T, x, t: F(T).l1_loss(x, t, reduce=False), [normal(2, 3), normal(2, 3)]),
    "smooth_l1_loss both": (lambda T, x, t: F(T).smooth_l1_loss(x, t, True, True), [normal(2, 3), normal(2, 3)]),
    "cross_entropy size_average=False": (lambda T, x, t: F(T).cross_entropy(x, t, size_average=False),
                                         [LOGITS, CLASSES]),
    "nll_loss reduce=False": (lambda T, x, t: F(T).nll_loss(x, t, reduce=False), [LOGITS, CLASSES]),
    "kl_div size_average=False": (lambda T, x, t: F(T).kl_div(x, t, size_average=False), [normal(2, 3), UNIT]),
    "triplet_margin_loss reduce=False": (lambda T, a, p, n: F(T).triplet_margin_loss(a, p, n, reduce=False),
                                         [normal(3, 4), normal(3, 4), normal(3, 4)]),
    "cosine_embedding_loss 1-d": (lambda T, a, b, y: F(T).cosine_embedding_loss(a, b, y),
                                  [normal(3), normal(3), np.float32(-1)]),
})
# inputs that PyTorch does not differentiate (targets, weights) are given without requires_grad
FIXED = ("cross_entropy", "nll_loss", "binary_cross_entropy", "bce_with_logits", "margin", "cosine", "poisson", "kl")


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss(torch, name):
    fn, arrays = LOSSES[name]
    grads = [True] + [not name.startswith(FIXED)] * (len(arrays) - 1)
    if name.startswith("margin_ranking"):
        grads = [True, True, False]
    check(torch, fn, arrays, grads, rtol=1e-4, atol=1e-5)


def test_kl_div_mean_warns_as_pytorch():
    x = symgrad.zeros(2, 3)
    with pytest.warns(UserWarning, match="batchmean"):
        symgrad.nn.functional.kl_div(x, x.exp())


# ------------------------------------------------------------------------------------- errors

ERRORS = {
    "conv2d channels": lambda T: F(T).conv2d(T.ones(1, 4, 5, 5), T.ones(3, 2, 3, 3)),
    "conv2d groups": lambda T: F(T).conv2d(T.ones(1, 4, 5, 5), T.ones(3, 2, 3, 3), groups=2),
    "conv2d kernel too large": lambda T: F(T).conv2d(T.ones(1, 2, 2, 2), T.ones(3, 2, 3, 3)),
    "conv2d rank": lambda T: F(T).conv2d(T.ones(2, 5), T.ones(3, 2, 3, 3)),
    "conv2d bias": lambda T: F(T).conv2d(T.ones(1, 2, 5, 5), T.ones(3, 2, 3, 3), T.ones(4)),
    "conv2d dtypes": lambda T: F(T).conv2d(T.ones(1, 2, 5, 5, dtype=T.float64), T.ones(3, 2, 3, 3)),
    "conv2d same strided": lambda T: F(T).conv2d(T.ones(1, 2, 5, 5), T.ones(3, 2, 3, 3), stride=2, padding="same"),
    "conv2d padding string": lambda T: F(T).conv2d(T.ones(1, 2, 5, 5), T.ones(3, 2, 3, 3), padding="full"),
    "conv2d stride zero": lambda T: F(T).conv2d(T.ones(1, 2, 5, 5), T.ones(3, 2, 3, 3), stride=0),
    "conv2d negative padding": lambda T: F(T).conv2d(T.ones(1, 2, 5, 5), T.ones(3, 2, 3, 3), padding=-1),
    "max_pool2d pad": lambda T: F(T).max_pool2d(T.ones(1, 2, 5, 5), 3, padding=2),
    "max_pool2d too small": lambda T: F(T).max_pool2d(T.ones(1, 2, 2, 2), 3),
    "avg_pool2d pad": lambda T: F(T).avg_pool2d(T.ones(1, 2, 5, 5), 3, padding=2),
    "bmm sizes": lambda T: T.bmm(T.ones(2, 3, 4), T.ones(2, 5, 6)),
    "bmm rank": lambda T: T.bmm(T.ones(3, 4), T.ones(2, 4, 6)),
    "mv": lambda T: T.mv(T.ones(3, 4), T.ones(3)),
    "outer": lambda T: T.outer(T.ones(3, 4), T.ones(3)),
    "einsum sizes": lambda T: T.einsum("ij,jk->ik", T.ones(3, 4), T.ones(5, 6)),
    "einsum output": lambda T: T.einsum("ij->ik", T.ones(3, 4)),
    "einsum rank": lambda T: T.einsum("ij", T.ones(2, 3, 4)),
    "einsum operands": lambda T: T.einsum("ij,jk", T.ones(3, 4)),
    "cross length": lambda T: T.cross(T.ones(2, 4), T.ones(2, 4), dim=1),
    "cross dtypes": lambda T: T.cross(T.ones(3), T.ones(3, dtype=T.float64), dim=0),
    "layer_norm shape": lambda T: F(T).layer_norm(T.ones(2, 3), (4,)),
    "group_norm groups": lambda T: F(T).group_norm(T.ones(2, 3, 4), 2),
    "batch_norm one value": lambda T: F(T).batch_norm(T.ones(1, 3), None, None, training=True),
    "batch_norm running stats require grad": lambda T: F(T).batch_norm(T.ones(2, 3), T.zeros(3, requires_grad=True),
                                                                       T.ones(3)),
    "embedding float indices": lambda T: F(T).embedding(T.ones(2), T.ones(5, 2)),
    "embedding range": lambda T: F(T).embedding(T.tensor([5]), T.ones(5, 2)),
    "one_hot range": lambda T: F(T).one_hot(T.tensor([1, 5]), 3),
    "one_hot negative": lambda T: F(T).one_hot(T.tensor([-1]), 3),
    "one_hot float": lambda T: F(T).one_hot(T.tensor([1.0]), 3),
    "pad odd": lambda T: F(T).pad(T.ones(2, 3), (1,)),
    "pad long": lambda T: F(T).pad(T.ones(2, 3), (1, 1, 1, 1, 1, 1)),
    "pad reflect too wide": lambda T: F(T).pad(T.ones(1, 2, 3), (3, 3), mode="reflect"),
    "pad reflect rank": lambda T: F(T).pad(T.ones(3), (1, 1), mode="reflect"),
    "pad circular wraps twice": lambda T: F(T).pad(T.ones(1, 2, 3), (4, 0), mode="circular"),
    "pad circular rank": lambda T: F(T).pad(T.ones(3), (1, 1), mode="circular"),
    "dropout p": lambda T: F(T).dropout(T.ones(3), 1.5),
    "nll_loss weight requires grad": lambda T: F(T).nll_loss(T.zeros(2, 3), T.tensor([0, 1]),
                                                             T.ones(3, requires_grad=True)),
    "bce_with_logits pos_weight requires grad": lambda T: F(T).binary_cross_entropy_with_logits(
        T.zeros(3), T.ones(3), pos_weight=T.ones(3, requires_grad=True)),
    "label_smoothing range": lambda T: F(T).cross_entropy(T.zeros(2, 3), T.tensor([0, 1]), label_smoothing=1.5),
    "triplet margin": lambda T: F(T).triplet_margin_loss(T.ones(2, 3), T.ones(2, 3), T.ones(2, 3), margin=0.0),
    "nll_loss batch": lambda T: F(T).nll_loss(T.ones(2, 3), T.tensor([0, 1, 2])),
    "nll_loss 0-d target of a batch": lambda T: F(T).nll_loss(T.ones(2, 3), T.tensor(1)),
    "nll_loss 0-d input": lambda T: F(T).nll_loss(T.tensor(1.0), T.tensor(0)),
    "nll_loss 1-d target of a 1-d input": lambda T: F(T).nll_loss(T.ones(3), T.tensor([0, 1])),
    "nll_loss multi-target": lambda T: F(T).nll_loss(T.ones(2, 3), T.zeros(2, 1, dtype=T.int64)),
    "nll_loss spatial target": lambda T: F(T).nll_loss(T.ones(2, 3, 4), T.zeros(2, 5, dtype=T.int64)),
    "nll_loss int32 target": lambda T: F(T).nll_loss(T.ones(2, 3), T.tensor([0, 1], dtype=T.int32)),
    "cross_entropy float target of another shape": lambda T: F(T).cross_entropy(T.ones(2, 3), T.ones(2)),
    "cross_entropy integer probabilities": lambda T: F(T).cross_entropy(T.ones(2, 3), T.ones(2, 3, dtype=T.int64)),
    "binary_cross_entropy target size": lambda T: F(T).binary_cross_entropy(T.ones(2) * 0.5, T.ones(3)),
    "pad mode": lambda T: F(T).pad(T.ones(1, 2, 3), (1, 1), mode="foo"),
    "normalize integers": lambda T: F(T).normalize(T.ones(2, dtype=T.int64)),
    "l1_loss weight size": lambda T: F(T).l1_loss(T.ones(2, 3), T.ones(2, 3), weight=T.ones(3)),
    "mse_loss weight reduction": lambda T: F(T).mse_loss(T.ones(2, 3), T.ones(2, 3), reduction="avg",
                                                         weight=T.ones(2, 3)),
    "huber_loss weight reduction": lambda T: F(T).huber_loss(T.ones(3), T.ones(3), reduction="avg", weight=T.ones(3)),
    "l1_loss reduction": lambda T: F(T).l1_loss(T.ones(3), T.ones(3), reduction="avg"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


def test_conv2d_channel_error_names_the_shapes_and_records_nothing():
    x = symgrad.ones(1, 4, 5, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Given groups=1, weight of size \[3, 2, 3, 3\], expected input\[1, 4, 5, "
                                           r"5\] to have 2 channels, but got 4 channels instead"):
        symgrad.nn.functional.conv2d(x, symgrad.ones(3, 2, 3, 3))
    y = symgrad.nn.functional.conv2d(x, symgrad.ones(3, 4, 3, 3))  # the next call works
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[0, 0, 2, 2], 27.0)


@pytest.mark.xfail(strict=True, reason="known difference: the input gradient is a convolution of the zero-padded "
                                       "cotangent, so an infinite weight meets the padding's zeros (NaN); PyTorch's "
                                       "col2im never multiplies them")
def test_convolution_input_gradient_at_an_infinite_weight(torch):
    check(torch, lambda T, x, w: F(T).conv1d(x, w, padding=1),
          [np.float32([[[1.0, 2.0, 3.0]]]), np.float32([[[math.inf, 1.0, 0.5]]])])


def test_seeded_dropout_draws_pytorchs_mask(torch):
    results = []
    for T in (symgrad, torch):
        T.manual_seed(3)
        x = T.ones(4, 5, requires_grad=True)
        y = T.nn.functional.dropout(x, 0.3)
        y.sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][2] == results[1][2]


def test_einsum_of_two_dtypes_promotes_when_nothing_is_summed(torch):
    results = []
    for T in (symgrad, torch):
        a, b = T.ones(3, 4, requires_grad=True), T.ones(4, dtype=T.float64, requires_grad=True)
        r = T.einsum("ij,j->ji", a, b)
        r.sum().backward()
        with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
            T.einsum("ij,j->i", a, b)
        results.append((str(r.dtype), type(r.grad_fn).__name__, str(a.grad.dtype), b.grad.tolist()))
    assert results[0] == results[1]


# -------------------------------------------------------------------------------------- speed


def _conv_step(T, x, idx, w1, w2, b):
    """A step users write in a loop: a batch taken by index, two convolutions joined by cat, a
    loss, backward and SGD."""
    features = T.cat([F(T).conv2d(x[idx], w1, b, padding=1), F(T).conv2d(x[idx], w2, stride=1, padding=1)], 1)
    loss = (features.tanh() ** 2).mean()
    loss.backward()
    with T.no_grad():
        for p in (w1, w2, b):
            p -= 0.1 * p.grad
            p.grad.zero_()
    return loss, features


def _backward_graph(grad_fn):
    """The grad_fn names reachable from ``grad_fn``, depth first, as PyTorch's graph has them."""
    names, stack = [], [grad_fn]
    while stack:
        node = stack.pop()
        names.append(type(node).__name__)
        stack.extend(n for n, _ in reversed(node.next_functions) if n is not None)
    return names


def test_indexing_cat_and_conv2d_in_a_loop_record_one_node_each_and_compile_once(torch):
    """PyTorch's backward graph node for node (CatBackward0 over two ConvolutionBackward0 over
    IndexBackward0: no op expands into several), the same losses, and no compile after warm-up
    while each step indexes with new values."""
    import codegen
    from codegen import deferred

    x, w1, w2, b = normal(8, 3, 5, 5), normal(2, 3, 3, 3), normal(2, 3, 3, 3), normal(2)
    batches = [labels(8, 4) for _ in range(13)]
    losses, graphs = {}, {}
    for T in (symgrad, torch):
        params = [T.tensor(v, requires_grad=True) for v in (w1, w2, b)]
        inputs = T.tensor(x, requires_grad=True)
        losses[T] = []
        for step, idx in enumerate(batches):
            if step == 3:
                compiled = codegen.stats.compiles, deferred.stats.fused_compiles
            loss, features = _conv_step(T, inputs, T.tensor(idx), *params)
            losses[T].append(loss.item())
        graphs[T] = _backward_graph(features.grad_fn)
        if T is symgrad:
            assert (codegen.stats.compiles, deferred.stats.fused_compiles) == compiled
    assert graphs[symgrad] == graphs[torch]
    assert graphs[torch].count("IndexBackward0") == 2 and graphs[torch][0] == "CatBackward0"
    np.testing.assert_allclose(losses[symgrad], losses[torch], rtol=2e-5)


@pytest.mark.parametrize("make", [lambda T: F(T).mse_loss(T.ones(2), T.zeros(2), reduce=False),
                                  lambda T: T.nn.L1Loss(size_average=False)(T.ones(2), T.zeros(2))])
def test_legacy_reduction_arguments_warn_as_pytorch(torch, make):
    for T in (torch, symgrad):
        with pytest.warns(UserWarning, match=r"size_average and reduce args will be deprecated") as caught:
            make(T)
        messages = [str(w.message) for w in caught]
        if T is torch:
            theirs = messages
    assert messages == theirs
