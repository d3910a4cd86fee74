"""F.affine_grid / F.grid_sample, F.unfold / F.fold (and nn.Unfold / nn.Fold), F.embedding_bag (and
nn.EmbeddingBag) and F.pdist against the installed PyTorch on the same arrays: values, grad_fn
names, gradients of every input, reprs, seeded weights and errors.

Compiles dominate the time, so each test puts many calls in one graph: ``check`` compares every
output on its own and the gradient of their weighted sum, one program for all of them."""
import math
import warnings

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch
from symgrad.nn.grid_sampling import _linspace_from_neg_one
from test_nn_functional import normal

RNG = np.random.default_rng(29)


def _run(T, fn, arrays):
    """fn(T, *tensors) (float ones require grad): its outputs and grad_fn names, and each input's
    gradient of the outputs weighted and summed.  Backward first: values come with it, one compile."""
    tensors = [T.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    outs = fn(T, *tensors)
    outs = outs if isinstance(outs, tuple) else (outs,)
    weights = [np.cos(np.arange(o.numel()) * 1.3 + k).reshape(tuple(o.shape)) for k, o in enumerate(outs)]
    sum((o * T.tensor(w, dtype=o.dtype)).sum() for o, w in zip(outs, weights)).backward()
    return ([(o.detach().numpy(), type(o.grad_fn).__name__) for o in outs],
            [t.grad.numpy() if t.grad is not None else None for t in tensors])


def check(torch, fn, arrays, rtol, atol):
    (ours, grads), (theirs, their_grads) = _run(symgrad, fn, arrays), _run(torch, fn, arrays)
    assert len(ours) == len(theirs)
    for k, ((value, grad_fn), (their_value, their_grad_fn)) in enumerate(zip(ours, theirs)):
        assert grad_fn == their_grad_fn and value.dtype == their_value.dtype and value.shape == their_value.shape
        np.testing.assert_allclose(value, their_value, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {k}")
    for k, (grad, their_grad) in enumerate(zip(grads, their_grads)):
        assert (grad is None) == (their_grad is None), k
        if grad is not None:
            np.testing.assert_allclose(grad, their_grad, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"input {k}")


def F(T):
    return T.nn.functional


def _grid(*shape, reach=1.3):
    """Points inside and around [-1, 1]: every padding mode has entries past the border to treat."""
    return RNG.uniform(-reach, reach, shape).astype(np.float32)


# ---------------------------------------------------------------------------------- grid_sample

# Every mode with every padding and both alignments at least once (the full product would compile
# for a minute): 4-D, then 5-D (no bicubic, as PyTorch).
MODES_4D = [("bilinear", "zeros", False), ("bilinear", "border", True), ("bilinear", "reflection", False),
            ("bilinear", "reflection", True), ("nearest", "border", False), ("nearest", "reflection", True),
            ("bicubic", "border", True), ("bicubic", "reflection", False)]
MODES_5D = [("bilinear", "zeros", True), ("bilinear", "reflection", False), ("nearest", "border", True)]


def _samples(modes, x, grid, T):
    return tuple(F(T).grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
                 for mode, padding, align in modes)


def test_grid_sample_4d(torch):
    """The modes above; then, with zeros padding, a NaN point (NaN out) and an infinite input entry
    (NaN where its weight is 0).  PyTorch's border and reflection kernels make an index of a NaN
    point: no reference there."""
    grid = _grid(2, 3, 6, 2)
    grid[0, 0, :4] = [[-1, -1], [1, 1], [0.5, -0.25], [-1.0 / 3, 1]]  # corners, borders, halves
    x_inf, grid_nan = normal(1, 2, 3, 4), _grid(1, 2, 3, 2, reach=1.2)
    x_inf[0, 0, 1, 2] = math.inf
    grid_nan[0, 0, 0, 0], grid_nan[0, 1, 1, 1] = math.nan, math.inf
    non_finite = [("bilinear", "zeros", True), ("nearest", "zeros", True), ("bicubic", "zeros", False)]
    check(torch, lambda T, x, grid, x_inf, grid_nan: _samples(MODES_4D, x, grid, T) + _samples(
        non_finite, x_inf, grid_nan, T), [normal(2, 3, 4, 5), grid, x_inf, grid_nan], rtol=1e-5, atol=1e-5)


def test_grid_sample_5d(torch):
    check(torch, lambda T, x, grid: _samples(MODES_5D, x, grid, T), [normal(1, 2, 3, 4, 5), _grid(1, 2, 3, 2, 3)],
          rtol=1e-5, atol=2e-6)


def test_nearest_rounds_half_to_even_and_sends_the_grid_no_gradient(torch):
    """Sources at exact halves (2.5 -> 2, 1.5 -> 2, 0.5 -> 0, 3.5 -> 4); the grid's gradient is zeros."""
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)
    grid = np.array([[[[0.25, 0.0], [-0.25, 0.0], [-0.75, 0.0], [0.75, 0.0]]]], np.float32)
    out = F(symgrad).grid_sample(symgrad.tensor(x), g := symgrad.tensor(grid, requires_grad=True), mode="nearest",
                                 align_corners=True)
    theirs = F(torch).grid_sample(torch.tensor(x), torch.tensor(grid), mode="nearest", align_corners=True)
    assert out.detach().numpy().tolist() == theirs.numpy().tolist() == [[[[2.0, 2.0, 0.0, 4.0]]]]
    out.sum().backward()
    assert g.grad.numpy().tolist() == np.zeros_like(grid).tolist()


def test_spatial_transformer_network_trains_as_pytorchs(torch):
    """The Spatial Transformer Networks tutorial's shape, small: a localisation net regresses theta
    (starting at the identity), affine_grid + grid_sample warp the input, a classifier follows.
    Two SGD steps: the losses and every parameter's gradient as PyTorch's."""
    def network(T):
        T.manual_seed(0)
        nn = T.nn
        localization = nn.Sequential(nn.Conv2d(1, 2, kernel_size=3), nn.MaxPool2d(2), nn.ReLU())
        fc_loc = nn.Sequential(nn.Linear(2 * 3 * 3, 8), nn.ReLU(), nn.Linear(8, 6))
        classifier = nn.Linear(64, 3)
        with T.no_grad():
            fc_loc[2].weight.mul_(0.1)
            fc_loc[2].bias.copy_(T.tensor([1, 0, 0, 0, 1, 0], dtype=T.float32))
        return nn.ModuleList([localization, fc_loc, classifier])

    def step(T, net, x, labels, optimizer):
        localization, fc_loc, classifier = net
        theta = fc_loc(localization(x).flatten(1)).view(-1, 2, 3)
        grid = F(T).affine_grid(theta, x.size(), align_corners=False)
        warped = F(T).grid_sample(x, grid, align_corners=False)
        loss = F(T).cross_entropy(classifier(warped.flatten(1)), labels)
        optimizer.zero_grad()
        loss.backward()
        grads = [p.grad.numpy().copy() for p in net.parameters()]
        optimizer.step()
        return loss.item(), grads

    x, labels = normal(2, 1, 8, 8), np.array([0, 2])
    runs = []
    for T in (symgrad, torch):
        net = network(T)
        optimizer = T.optim.SGD(net.parameters(), lr=0.5)
        runs.append([step(T, net, T.tensor(x), T.tensor(labels), optimizer) for _ in range(2)])
    for (loss, grads), (t_loss, t_grads) in zip(*runs):
        assert loss == pytest.approx(t_loss, rel=1e-5)
        for g, t_g in zip(grads, t_grads):
            np.testing.assert_allclose(g, t_g, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------------------- affine_grid


def test_affine_grid_base_coordinates_are_pytorchs_bit_for_bit(torch):
    for steps in range(2, 40):
        for align in (False, True):
            for real, dtype in ((np.float32, torch.float32), (np.float64, torch.float64)):
                identity = torch.eye(2, 3, dtype=dtype)[None]
                theirs = F(torch).affine_grid(identity, (1, 1, 1, steps), align_corners=align)[0, 0, :, 0].numpy()
                assert np.array_equal(_linspace_from_neg_one(steps, align, real), theirs), (steps, align)


def test_affine_grid_2d_and_3d(torch):
    def grids(T, theta2, theta3):
        return tuple(grid for align in (False, True) for grid in (
            F(T).affine_grid(theta2, (2, 3, 4, 5), align_corners=align),
            F(T).affine_grid(theta3, [2, 1, 2, 3, 4], align_corners=align)))
    check(torch, grids, [normal(2, 2, 3), normal(2, 3, 4)], rtol=1e-5, atol=1e-6)


def test_affine_grid_of_a_single_row_warns_as_pytorch(torch):
    grids = []
    for T in (symgrad, torch):
        with pytest.warns(UserWarning, match="unit-size grids"):
            grids.append(F(T).affine_grid(T.ones(1, 2, 3), (1, 1, 1, 3), align_corners=True).numpy().tolist())
    assert grids[0] == grids[1] == [[[[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]]]


def test_default_alignment_warns_as_pytorch(torch):
    for T in (symgrad, torch):
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            grid = F(T).affine_grid(T.ones(1, 2, 3), (1, 1, 2, 2))
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            F(T).grid_sample(T.ones(1, 1, 2, 2), grid)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F(symgrad).grid_sample(symgrad.ones(1, 1, 2, 2), symgrad.zeros(1, 1, 1, 2), align_corners=True)


# ------------------------------------------------------------------------------ unfold and fold


def test_unfold_and_fold(torch):
    def blocks(T, image, unbatched, columns, few):
        return (F(T).unfold(image, 2),
                F(T).unfold(image, (2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
                T.nn.Unfold(3, padding=1)(unbatched),
                F(T).fold(columns, (5, 6), 2),
                T.nn.Fold((5, 6), (2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3))(few),
                F(T).fold(F(T).unfold(image, 3, padding=1, stride=2), (5, 6), 3, padding=1, stride=2))
    check(torch, blocks, [normal(2, 3, 5, 6), normal(3, 5, 6), normal(2, 12, 20), normal(18, 9)], rtol=1e-6,
          atol=1e-6)


def test_fold_module_reprs(torch):
    for make in (lambda T: T.nn.Fold((4, 5), 2), lambda T: T.nn.Fold(3, (1, 2), padding=1, stride=(2, 1)),
                 lambda T: T.nn.Unfold(2), lambda T: T.nn.Unfold((2, 3), dilation=2, padding=(0, 1), stride=2)):
        assert repr(make(symgrad)) == repr(make(torch))


# --------------------------------------------------------------------------------- embedding_bag

INDICES = np.array([1, 2, 4, 5, 4, 3, 2, 9, 1, 1])
OFFSETS = np.array([0, 2, 2, 5])  # bags of 2, 0, 3 and 5 indices


def test_embedding_bag_modes(torch):
    """Sum, mean and max; padding_idx; include_last_offset (PyTorch's max then runs the last bag to
    the end; its sum's gradient reads uninitialised memory for indices past the last offset, so the
    sum is given offsets that end at the end); per-sample weights; the 2-D form; empty bags (zeros)
    and no indices at all."""
    def bags(T, weight, per_sample):
        i, o, eb = T.tensor(INDICES), T.tensor(OFFSETS), F(T).embedding_bag
        return (eb(i, weight, o), eb(i, weight, o, mode="max", padding_idx=-6),
                eb(i, weight, T.tensor([0, 2, 2, 5, 10]), mode="sum", include_last_offset=True),
                eb(i, weight, o, mode="max", include_last_offset=True),
                eb(i, weight, o, mode="sum", per_sample_weights=per_sample, padding_idx=2),
                eb(i.view(2, 5), weight, mode="mean", padding_idx=1), eb(i.view(5, 2).int(), weight, mode="max"),
                eb(T.tensor([], dtype=T.int64), weight, T.tensor([0, 0])))
    check(torch, bags, [normal(10, 3), normal(10)], rtol=1e-6, atol=1e-6)


def test_embedding_bag_max_norm_renormalises_the_rows_it_reads(torch):
    weights = []
    for T in (symgrad, torch):
        weight = T.tensor(3 * normal(10, 3) if T is symgrad else weights[0][0])
        out = F(T).embedding_bag(T.tensor(INDICES), weight, T.tensor(OFFSETS), max_norm=1.5, mode="sum")
        weights.append((weight.numpy().copy(), out.numpy()))
    np.testing.assert_allclose(weights[0][0], weights[1][0], rtol=1e-6)
    np.testing.assert_allclose(weights[0][1], weights[1][1], rtol=1e-6)


def test_embedding_bag_module(torch):
    for T in (symgrad, torch):
        T.manual_seed(0)
    made = [T.nn.EmbeddingBag(10, 3, mode="max", padding_idx=-2) for T in (symgrad, torch)]
    assert repr(made[0]) == repr(made[1]) == "EmbeddingBag(10, 3, mode='max', padding_idx=8)"
    np.testing.assert_array_equal(made[0].weight.detach().numpy(), made[1].weight.detach().numpy())
    assert list(made[0].state_dict()) == list(made[1].state_dict()) == ["weight"]
    options = dict(max_norm=2.0, norm_type=1.0, scale_grad_by_freq=True, mode="sum")
    assert repr(symgrad.nn.EmbeddingBag(4, 2, **options)) == repr(torch.nn.EmbeddingBag(4, 2, **options))
    check(torch, lambda T, w: T.nn.EmbeddingBag.from_pretrained(w, freeze=False)(T.tensor(INDICES), T.tensor(OFFSETS)),
          [normal(10, 3)], rtol=1e-6, atol=1e-6)
    frozen = symgrad.nn.EmbeddingBag.from_pretrained(symgrad.ones(3, 2))
    assert not frozen.weight.requires_grad


# ----------------------------------------------------------------------------------------- pdist


def test_pdist_every_norm_with_equal_rows_and_ties(torch):
    """Rows 1 and 3 equal (PyTorch's gradient there is 0, not NaN), rows 0 and 4 equal but for one
    entry, and rows 0 and 2 tied in |difference| (inf sends each tied entry the whole gradient)."""
    x = normal(5, 3)
    x[3] = x[1]
    x[4, :2] = x[0, :2]
    x[2, :2] = x[0, :2] + [0.5, -0.5]
    x[2, 2] = x[0, 2] + 0.25
    norms = (2, 1, 0, 0.5, 1.5, 3, math.inf)
    check(torch, lambda T, x: tuple(F(T).pdist(x, p) for p in norms) + (T.pdist(x),), [x], rtol=1e-5, atol=2e-6)


# ---------------------------------------------------------------------------------------- errors

ERRORS = {
    "grid_sample mode": lambda T: F(T).grid_sample(T.ones(1, 1, 2, 2), T.zeros(1, 1, 1, 2), mode="area"),
    "grid_sample padding": lambda T: F(T).grid_sample(T.ones(1, 1, 2, 2), T.zeros(1, 1, 1, 2), padding_mode="wrap"),
    "grid_sample dtypes": lambda T: F(T).grid_sample(T.ones(1, 1, 2, 2), T.zeros(1, 1, 1, 2, dtype=T.float64),
                                                     align_corners=False),
    "grid_sample batch": lambda T: F(T).grid_sample(T.ones(2, 1, 2, 2), T.zeros(1, 1, 1, 2), align_corners=False),
    "grid_sample last size": lambda T: F(T).grid_sample(T.ones(1, 1, 2, 2), T.zeros(1, 1, 1, 3), align_corners=False),
    "grid_sample ranks": lambda T: F(T).grid_sample(T.ones(1, 1, 2, 2), T.zeros(1, 1, 1, 1, 2), align_corners=False),
    "grid_sample 3-d input": lambda T: F(T).grid_sample(T.ones(1, 2, 2), T.zeros(1, 1, 1), align_corners=False),
    "grid_sample empty": lambda T: F(T).grid_sample(T.ones(1, 1, 0, 2), T.zeros(1, 1, 1, 2), align_corners=False),
    "grid_sample bicubic 5-d": lambda T: F(T).grid_sample(T.ones(1, 1, 2, 2, 2), T.zeros(1, 1, 1, 1, 3),
                                                          mode="bicubic", align_corners=False),
    "grid_sample integers": lambda T: F(T).grid_sample(T.ones(1, 1, 2, 2, dtype=T.int64),
                                                       T.zeros(1, 1, 1, 2, dtype=T.int64), align_corners=False),
    "affine_grid integers": lambda T: F(T).affine_grid(T.ones(1, 2, 3, dtype=T.int64), (1, 1, 2, 2), False),
    "affine_grid 2-d shape": lambda T: F(T).affine_grid(T.ones(1, 3, 4), (1, 1, 2, 2), False),
    "affine_grid 3-d shape": lambda T: F(T).affine_grid(T.ones(1, 2, 3), (1, 1, 2, 2, 2), False),
    "affine_grid size": lambda T: F(T).affine_grid(T.ones(1, 2, 3), (1, 2, 2), False),
    "affine_grid empty": lambda T: F(T).affine_grid(T.ones(1, 2, 3), (1, 1, 0, 2), False),
    "affine_grid batch": lambda T: F(T).affine_grid(T.ones(2, 2, 3), (1, 1, 2, 2), False),
    "unfold blocks": lambda T: F(T).unfold(T.ones(1, 1, 3, 3), 4),
    "unfold kernel": lambda T: F(T).unfold(T.ones(1, 1, 3, 3), 0),
    "unfold stride": lambda T: F(T).unfold(T.ones(1, 1, 3, 3), 2, stride=0),
    "unfold dilation": lambda T: F(T).unfold(T.ones(1, 1, 3, 3), 2, dilation=0),
    "unfold padding": lambda T: F(T).unfold(T.ones(1, 1, 3, 3), 2, padding=-1),
    "unfold pair": lambda T: F(T).unfold(T.ones(1, 1, 3, 3), (2, 2, 2)),
    "unfold rank": lambda T: F(T).unfold(T.ones(3, 3), 2),
    "unfold empty": lambda T: F(T).unfold(T.ones(1, 0, 3, 3), 2),
    "unfold integers": lambda T: F(T).unfold(T.ones(1, 1, 3, 3, dtype=T.int64), 2),
    "fold blocks": lambda T: F(T).fold(T.ones(1, 4, 5), (3, 3), 2),
    "fold divisible": lambda T: F(T).fold(T.ones(1, 5, 4), (3, 3), 2),
    "fold rank": lambda T: F(T).fold(T.ones(1, 1, 4, 4), (3, 3), 2),
    "fold integers": lambda T: F(T).fold(T.ones(1, 4, 4, dtype=T.int64), (3, 3), 2),
    "embedding_bag first offset": lambda T: F(T).embedding_bag(T.tensor([1, 2]), T.ones(3, 2), T.tensor([1])),
    "embedding_bag last offset": lambda T: F(T).embedding_bag(T.tensor([1, 2]), T.ones(3, 2), T.tensor([0, 3])),
    "embedding_bag index range": lambda T: F(T).embedding_bag(T.tensor([1, 3]), T.ones(3, 2), T.tensor([0])),
    "embedding_bag index range in the last bag": lambda T: F(T).embedding_bag(T.tensor([1, -1]), T.ones(3, 2),
                                                                              T.tensor([0, 1]), mode="sum"),
    "embedding_bag index range for max": lambda T: F(T).embedding_bag(T.tensor([3, 1]), T.ones(3, 2),
                                                                      T.tensor([0, 1]), mode="max"),
    "embedding_bag float indices": lambda T: F(T).embedding_bag(T.tensor([1.0]), T.ones(3, 2), T.tensor([0])),
    "embedding_bag integer weight": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2, dtype=T.int32),
                                                                 T.tensor([0])),
    "embedding_bag 2-d with offsets": lambda T: F(T).embedding_bag(T.tensor([[1]]), T.ones(3, 2), T.tensor([0])),
    "embedding_bag no offsets": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2)),
    "embedding_bag 2-d offsets": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2), T.tensor([[0]])),
    "embedding_bag rank": lambda T: F(T).embedding_bag(T.tensor([[[1]]]), T.ones(3, 2)),
    "embedding_bag 1-d weight": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3), T.tensor([0])),
    "embedding_bag mode": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2), T.tensor([0]), mode="min"),
    "embedding_bag weighted max": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2), T.tensor([0]),
                                                               mode="max", per_sample_weights=T.ones(1)),
    "embedding_bag weights shape": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2), T.tensor([0]),
                                                                mode="sum", per_sample_weights=T.ones(2)),
    "embedding_bag weights dtype": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2), T.tensor([0]),
                                                                mode="sum",
                                                                per_sample_weights=T.ones(1, dtype=T.float64)),
    "embedding_bag max scaled": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2), T.tensor([0]),
                                                             mode="max", scale_grad_by_freq=True),
    "embedding_bag padding_idx": lambda T: F(T).embedding_bag(T.tensor([1]), T.ones(3, 2), T.tensor([0]),
                                                              padding_idx=3),
    "EmbeddingBag padding_idx": lambda T: T.nn.EmbeddingBag(3, 2, padding_idx=-4),
    "EmbeddingBag weight shape": lambda T: T.nn.EmbeddingBag(3, 2, _weight=T.ones(2, 2)),
    "from_pretrained rank": lambda T: T.nn.EmbeddingBag.from_pretrained(T.ones(3)),
    "pdist rank": lambda T: F(T).pdist(T.ones(3)),
    "pdist integers": lambda T: F(T).pdist(T.ones(3, 2, dtype=T.int64)),
    "pdist negative p": lambda T: F(T).pdist(T.ones(3, 2), -1),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


def test_unsupported_embedding_bag_options_are_refused_clearly():
    for option in ({"scale_grad_by_freq": True}, {"sparse": True}):
        with pytest.raises(NotImplementedError, match="not supported by symgrad"):
            F(symgrad).embedding_bag(symgrad.tensor([1]), symgrad.ones(3, 2), symgrad.tensor([0]), **option)
