"""ParameterList and ParameterDict, channel-wise and alpha dropout, gumbel_softmax, LP pooling and
max unpooling, against the installed PyTorch: names, state_dict keys, reprs, errors; seeded masks
and noise (PyTorch's generator calls, so the next draw agrees too); values, grad_fn names and
input gradients on the same arrays."""
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch

RNG = np.random.default_rng(29)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def F(T):
    return T.nn.functional


def _weights(shape):
    n = int(np.prod(shape))
    return (np.cos(np.arange(n) * 1.3) + 0.25).reshape(shape).astype(np.float32)


def _raised(make, T):
    try:
        make(T)
    except Exception as error:  # noqa: BLE001  (class and message are what is compared)
        return type(error).__name__, str(error)
    return None


# ------------------------------------------------------------------------------ ParameterList


def _fixed(*shape):
    """The same numbers on every call (each library builds its own containers of them)."""
    return np.sin(np.arange(1, np.prod(shape) + 1)).reshape(shape).astype(np.float32)


def _parameter_list(T):
    """Everything a script sees of a ParameterList, as text."""
    seen = []
    values = [T.tensor(_fixed(2, 3)), T.nn.Parameter(T.tensor(_fixed(4)), requires_grad=False), 5, None, "s"]
    entries = T.nn.ParameterList(values)
    seen += [repr(entries), [(n, tuple(p.shape), p.requires_grad) for n, p in entries.named_parameters()],
             list(entries.state_dict()), len(entries), type(entries[0]).__name__, entries[-1], entries[2]]
    seen += [repr(entries[1:4]), repr(entries[::-2]), entries[1:3][0] is entries[1], "0" in dir(entries)]
    entries.append(T.tensor(_fixed(1), dtype=T.float64))
    entries += [T.nn.Linear(2, 1), T.tensor(_fixed(3))]
    entries.extend((7,))
    entries[2] = T.tensor(_fixed(2))
    entries[-1] = T.tensor(_fixed(5))
    seen += [repr(entries), [n for n, _ in entries.named_parameters()], list(entries.state_dict()), len(entries)]
    seen += [repr(T.nn.ParameterList()), repr(T.nn.ParameterList([T.tensor(_fixed(2))]))]
    for make in (lambda: entries[11], lambda: entries[-12], lambda: entries["a"], lambda: entries.extend(T.ones(2)),
                 lambda: entries.extend(3), lambda: entries(T.ones(1)), lambda: entries.__setitem__(0, 4),
                 lambda: T.nn.ParameterList().__setitem__(0, T.ones(1))):
        seen.append(_raised(lambda _: make(), T))
    seen += [repr(entries), len(entries)]  # nothing changed by the refused calls
    return seen


def test_parameter_list_as_pytorch(torch):
    for ours, theirs in zip(_parameter_list(symgrad), _parameter_list(torch)):
        assert ours == theirs


def test_parameter_list_trains_as_pytorch(torch):
    """Seeded entries drawn as PyTorch draws them; gradients reach them by their names."""
    x, results = normal(2, 3), []
    for T in (symgrad, torch):
        T.manual_seed(4)
        model = T.nn.Module()
        model.scales = T.nn.ParameterList([T.randn(3), T.randn(3), T.randn(3)])
        out = T.tensor(x)
        for scale in model.scales:
            out = T.tanh(out * scale)
        out.sum().backward()
        results.append((np.array([p.grad.numpy() for p in model.parameters()]), list(model.state_dict())))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    assert results[0][1] == results[1][1] == ["scales.0", "scales.1", "scales.2"]


# ------------------------------------------------------------------------------ ParameterDict


def _parameter_dict(T):
    seen = []
    a, b, c = _fixed(2), _fixed(3, 1), _fixed(1)
    sorted_ = T.nn.ParameterDict({"b": T.tensor(b), "a": T.tensor(a, dtype=T.float64), "c": 3})
    ordered = T.nn.ParameterDict(OrderedDict([("b", T.tensor(b)), ("a", T.tensor(a))]))
    pairs = T.nn.ParameterDict([("z", T.tensor(c)), ("y", None), "xv"])
    for d in (sorted_, ordered, pairs):
        seen += [repr(d), list(d), [n for n, _ in d.named_parameters()], list(d.state_dict()), len(d)]
    seen += [list(reversed(sorted_)), "a" in sorted_, sorted_.get("q", 1), type(sorted_["a"]).__name__,
             sorted_["a"].requires_grad, list(sorted_.keys()), [type(v).__name__ for v in sorted_.values()]]
    merged = sorted_ | pairs
    right = {"n": T.tensor(c)} | ordered
    seen += [type(merged).__name__, list(merged), type(right).__name__, list(right)]
    ordered |= {"k": 1.5, "d": T.tensor(c)}
    seen += [repr(ordered), sorted_.copy()["b"] is sorted_["b"], repr(sorted_.fromkeys(["u", "v"], 2))]
    seen += [sorted_.setdefault("s"), repr(sorted_.pop("a")), sorted_.popitem()[0], list(sorted_)]
    for make in (lambda: sorted_[1], lambda: sorted_["missing"], lambda: sorted_.pop("missing"),
                 lambda: sorted_.update(5), lambda: sorted_.update([("k", 1), 3]),
                 lambda: sorted_.update([("k", 1), (1, 2, 3)]), lambda: sorted_(T.ones(1)),
                 lambda: sorted_.__setitem__("x.y", T.ones(1)), lambda: sorted_.__setitem__("b", 2),
                 lambda: T.nn.ParameterDict().popitem()):
        seen.append(_raised(lambda _: make(), T))
    pairs.clear()
    seen += [repr(pairs), len(pairs), repr(T.nn.ParameterDict({"one": T.tensor(c)}))]
    return seen, sorted_


def test_parameter_dict_as_pytorch(torch):
    (ours, ours_dict), (theirs, theirs_dict) = _parameter_dict(symgrad), _parameter_dict(torch)
    for mine, their in zip(ours, theirs):
        assert mine == their
    # PyTorch records a refused key before refusing it (and keeps the pairs before a bad one);
    # symgrad stores nothing from a refused call
    assert list(theirs_dict) == ["b", "c", "k", "x.y"] and list(ours_dict) == ["b", "c"]


def test_parameter_dict_refused_key_stores_nothing():
    d = symgrad.nn.ParameterDict({"a": symgrad.ones(1)})
    with pytest.raises(TypeError, match="not a string"):
        d[3] = symgrad.ones(1)
    with pytest.raises(KeyError, match="contain"):
        d["p.q"] = symgrad.ones(1)
    assert list(d) == ["a"] and repr(d) == "ParameterDict(  (a): Parameter containing: [torch.FloatTensor of size 1])"


# ------------------------------------------------------------------------------ dropout


def _seeded(T, fn, arrays, seed=5):
    """fn on tensors of ``arrays`` after ``manual_seed(seed)``: value, grad_fn, input gradient,
    and the next draw (the generator left where PyTorch's is)."""
    T.manual_seed(seed)
    x = T.tensor(arrays, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = fn(T, x)
    if y.requires_grad:
        (y * T.tensor(_weights(tuple(y.shape)), dtype=y.dtype)).sum().backward()
    grad = None if x.grad is None else x.grad.numpy()
    return (y.detach().numpy(), type(y.grad_fn).__name__ if y.grad_fn else None, grad, T.rand(4).numpy(),
            [str(w.message) for w in caught], y is x)


DROPOUTS = {
    "dropout1d": (lambda T, x: F(T).dropout1d(x, 0.3), normal(3, 6, 4), True),
    "dropout1d unbatched": (lambda T, x: F(T).dropout1d(x, 0.6), normal(6, 4), True),
    "dropout2d": (lambda T, x: F(T).dropout2d(x, 0.4), normal(2, 5, 3, 2), True),
    "dropout2d 3-D warns": (lambda T, x: F(T).dropout2d(x, 0.4), normal(3, 6, 4), True),
    "dropout2d 2-D warns": (lambda T, x: T.nn.Dropout2d(0.5)(x), normal(6, 4), True),
    "dropout3d": (lambda T, x: T.nn.Dropout3d(0.4)(x), normal(2, 5, 3, 2, 2), True),
    "dropout3d unbatched": (lambda T, x: F(T).dropout3d(x, 0.25), normal(5, 3, 2, 2), True),
    "dropout3d 3-D warns": (lambda T, x: F(T).dropout3d(x, 0.25), normal(3, 6, 4), True),
    "dropout1d p=1": (lambda T, x: T.nn.Dropout1d(1.0)(x), normal(3, 6, 4), True),
    "dropout2d eval": (lambda T, x: T.nn.Dropout2d(0.4).eval()(x), normal(2, 5, 3, 2), True),
    "alpha_dropout": (lambda T, x: F(T).alpha_dropout(x, 0.3, True), normal(4, 7), False),
    "alpha_dropout float64": (lambda T, x: T.nn.AlphaDropout(0.2)(x.double()), normal(4, 7), False),
    "alpha_dropout p=1": (lambda T, x: F(T).alpha_dropout(x, 1.0, True), normal(4, 7), True),
    "alpha_dropout default not training": (lambda T, x: F(T).alpha_dropout(x, 0.3), normal(4, 7), True),
    "feature_alpha_dropout": (lambda T, x: T.nn.FeatureAlphaDropout(0.6)(x), normal(3, 6, 4), False),
    "dropout in place": (lambda T, x: F(T).dropout(x * 1, 0.3, True, True), normal(4, 7), True),
    "Dropout module in place": (lambda T, x: T.nn.Dropout(0.5, inplace=True)(x * 1), normal(4, 7), True),
    "dropout p=1 in place": (lambda T, x: F(T).dropout(x * 1, 1.0, True, True), normal(4, 7), True),
    "dropout2d in place": (lambda T, x: F(T).dropout2d(x * 1, 0.4, True, True), normal(2, 5, 3, 2), True),
    "feature_alpha_dropout in place": (lambda T, x: F(T).feature_alpha_dropout(x * 1, 0.6, True, True),
                                       normal(3, 6, 4), False),
}


@pytest.mark.parametrize("name", list(DROPOUTS))
def test_dropout_draws_pytorchs_masks(torch, name):
    fn, x, exact = DROPOUTS[name]
    ours, theirs = _seeded(symgrad, fn, x), _seeded(torch, fn, x)
    assert ours[1] == theirs[1] and ours[4] == theirs[4] and ours[5] == theirs[5]
    if exact:
        np.testing.assert_array_equal(ours[0], theirs[0])
    else:  # XLA may fuse input * noise + b into one multiply-add (an ulp); the mask itself is exact
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ours[2], theirs[2])  # the mask times the scale, every entry
    np.testing.assert_array_equal(ours[3], theirs[3])


def test_feature_dropout_drops_whole_channels():
    symgrad.manual_seed(0)
    y = F(symgrad).dropout2d(symgrad.ones(4, 8, 3, 3), 0.5).numpy()
    per_channel = y.reshape(32, 9)
    assert set(np.unique(per_channel)) == {0.0, 2.0}
    assert (per_channel == per_channel[:, :1]).all()


DROPOUT_ERRORS = {
    "p above 1": lambda T: F(T).dropout1d(T.ones(2, 3), 1.5),
    "p below 0": lambda T: F(T).alpha_dropout(T.ones(2, 3), -0.1, True),
    "dropout1d of 4-D": lambda T: F(T).dropout1d(T.ones(1, 2, 1, 3), 0.5),
    "module p": lambda T: T.nn.Dropout3d(2),
    "feature dropout of 1-D": lambda T: F(T).feature_alpha_dropout(T.ones(4), 0.5, True),
    "integer input": lambda T: F(T).alpha_dropout(T.ones(4, dtype=T.int64), 0.5, True),
    "integer input to dropout": lambda T: F(T).dropout(T.ones(4, dtype=T.int64), 0.5),
}


@pytest.mark.parametrize("name", list(DROPOUT_ERRORS))
def test_dropout_errors_as_pytorch(torch, name):
    assert_raises_as_pytorch(DROPOUT_ERRORS[name], torch, symgrad)


def test_dropout_module_reprs(torch):
    for make in (lambda T: T.nn.Dropout(), lambda T: T.nn.Dropout(0.3, True), lambda T: T.nn.Dropout1d(), lambda T: T.nn.Dropout2d(0.1, True), lambda T: T.nn.Dropout3d(0.2),
                 lambda T: T.nn.AlphaDropout(0.2), lambda T: T.nn.FeatureAlphaDropout(0.7, True)):
        assert repr(make(symgrad)) == repr(make(torch))


# ------------------------------------------------------------------------------ gumbel_softmax


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_draws_pytorchs_noise(torch, hard):
    fn = lambda T, x: F(T).gumbel_softmax(x, tau=0.7, hard=hard, dim=1, eps=1e-5)  # noqa: E731
    x = normal(2, 5, 3)
    ours, theirs = _seeded(symgrad, fn, x, seed=11), _seeded(torch, fn, x, seed=11)
    assert ours[1] == theirs[1] and ours[4] == theirs[4] == ["`eps` parameter is deprecated and has no effect."]
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours[3], theirs[3])
    if hard:
        np.testing.assert_array_equal(ours[0].round(), theirs[0].round())
        assert (ours[0].round().sum(axis=1) == 1).all()


# ------------------------------------------------------------------------------ LP pooling


def _zero_window(x):
    x = x.copy()
    x.reshape(-1)[:4] = 0
    return x


def _run(T, fn, arrays):
    tensors = [T.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    y = fn(T, *tensors)
    (y * T.tensor(_weights(tuple(y.shape)))).sum().backward()
    return y.detach().numpy(), type(y.grad_fn).__name__, tensors[0].grad.numpy()


LP_POOLS = {
    "lp_pool1d stride ceil p=3": (lambda T, x: F(T).lp_pool1d(x, 3, 3, 2, True), _zero_window(normal(2, 3, 7))),
    "lp_pool2d": (lambda T, x: T.nn.LPPool2d(2, 2)(x), _zero_window(normal(2, 3, 6, 5))),
    "lp_pool2d p=1.5": (lambda T, x: F(T).lp_pool2d(x.abs(), 1.5, (3, 2), 1), normal(2, 3, 6, 5)),
    "lp_pool2d -inf": (lambda T, x: F(T).lp_pool2d(x, -math.inf, 2, ceil_mode=True), normal(2, 3, 6, 5)),
    "lp_pool3d": (lambda T, x: T.nn.LPPool3d(3, (2, 3, 2), (1, 2, 2), True)(x), normal(1, 2, 4, 5, 4)),
    "lp_pool1d unbatched module": (lambda T, x: T.nn.LPPool1d(2, 3)(x), normal(3, 7)),
}


@pytest.mark.parametrize("name", list(LP_POOLS))
def test_lp_pool_as_pytorch(torch, name):
    fn, x = LP_POOLS[name]
    ours, theirs = _run(symgrad, fn, [x]), _run(torch, fn, [x])
    assert ours[1] == theirs[1]
    np.testing.assert_allclose(ours[0], theirs[0], rtol=2e-6, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=2e-6, atol=1e-6, equal_nan=True)


def test_lp_pool_module_reprs(torch):
    for make in (lambda T: T.nn.LPPool1d(1.5, 2, 1, True), lambda T: T.nn.LPPool2d(2, 3),
                 lambda T: T.nn.LPPool3d(3, (2, 1, 2), 2)):
        assert repr(make(symgrad)) == repr(make(torch))


# ------------------------------------------------------------------------------ max unpooling


def _pooled(T, pool, x):
    y, indices = pool(T, T.tensor(x))
    return y.detach().numpy(), indices.numpy()


UNPOOLS = {  # (unpool, pool that makes its input and indices, array pooled)
    "max_unpool2d output_size": (lambda T, y, i: T.nn.MaxUnpool2d(2)(y, i, output_size=[2, 3, 5, 7]),
                                 lambda T, x: F(T).max_pool2d(x, 2, return_indices=True), normal(2, 3, 5, 7)),
    "max_unpool2d padding stride unbatched": (lambda T, y, i: F(T).max_unpool2d(y, i, 3, 2, 1),
                                              lambda T, x: F(T).max_pool2d(x, 3, 2, 1, return_indices=True),
                                              normal(2, 5, 5)),
    "max_unpool2d overlapping windows": (lambda T, y, i: F(T).max_unpool2d(y, i, 3, 1),
                                         lambda T, x: F(T).max_pool2d(x, 3, 1, return_indices=True),
                                         RNG.integers(0, 3, (1, 1, 5, 5)).astype(np.float32)),
    "max_unpool1d": (lambda T, y, i: T.nn.MaxUnpool1d(2)(y, i, (7,)),
                     lambda T, x: F(T).max_pool1d(x, 2, return_indices=True), normal(2, 3, 7)),
    "max_unpool1d unbatched": (lambda T, y, i: F(T).max_unpool1d(y, i, 3, 2),
                               lambda T, x: F(T).max_pool1d(x, 3, 2, return_indices=True), normal(3, 9)),
    "max_unpool3d": (lambda T, y, i: T.nn.MaxUnpool3d((1, 2, 2))(y, i),
                     lambda T, x: F(T).max_pool3d(x, (1, 2, 2), return_indices=True), normal(1, 2, 3, 4, 4)),
}


@pytest.mark.parametrize("name", list(UNPOOLS))
def test_max_unpool_as_pytorch(torch, name):
    unpool, pool, x = UNPOOLS[name]
    arrays = _pooled(torch, pool, x)
    ours, theirs = _run(symgrad, unpool, arrays), _run(torch, unpool, arrays)
    assert ours[1] == theirs[1]
    for mine, their in ((ours[0], theirs[0]), (ours[2], theirs[2])):
        assert mine.shape == their.shape
        np.testing.assert_array_equal(mine, their)


def test_max_unpool_gradient_reaches_every_index_as_pytorchs():
    """Two entries written to one place: PyTorch's backward gathers for both."""
    x = symgrad.tensor([[[[1.0, 2.0], [3.0, 4.0]]]], requires_grad=True)
    y = F(symgrad).max_unpool2d(x, symgrad.tensor([[[[0, 5], [5, 15]]]]), 2)
    (y * symgrad.arange(16.0).reshape(1, 1, 4, 4)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[[[0.0, 5.0], [5.0, 15.0]]]])


def _indices(*shape, bad=None):
    values = np.zeros(shape, dtype=np.int64)
    if bad is not None:
        values.reshape(-1)[3] = bad
    return values


UNPOOL_ERRORS = {
    "index past the plane": lambda T: F(T).max_unpool2d(T.ones(1, 2, 2, 2), T.tensor(_indices(1, 2, 2, 2, bad=16)), 2),
    "negative index": lambda T: F(T).max_unpool2d(T.ones(2, 2, 2), T.tensor(_indices(2, 2, 2, bad=-3)), 2),
    "index past the volume": lambda T: F(T).max_unpool3d(T.ones(1, 1, 2, 2, 2),
                                                         T.tensor(_indices(1, 1, 2, 2, 2, bad=64)), 2),
    "1-D index past the row": lambda T: F(T).max_unpool1d(T.ones(1, 2, 3), T.tensor(_indices(1, 2, 3, bad=9)), 3),
    "int32 indices": lambda T: F(T).max_unpool2d(T.ones(1, 2, 2, 2), T.tensor(_indices(1, 2, 2, 2)).int(), 2),
    "3-D int32 indices": lambda T: F(T).max_unpool3d(T.ones(1, 2, 2, 2), T.tensor(_indices(1, 2, 2, 2)).int(), 2),
    "2-D input": lambda T: F(T).max_unpool2d(T.ones(2, 2), T.tensor(_indices(2, 2)), 2),
    "1-D input of 4 dims": lambda T: F(T).max_unpool1d(T.ones(1, 1, 2, 2), T.tensor(_indices(1, 1, 2, 2)), 2),
    "shapes differ": lambda T: F(T).max_unpool3d(T.ones(1, 2, 2, 2, 2), T.tensor(_indices(1, 1, 2, 2, 2)), 2),
    "empty channel": lambda T: F(T).max_unpool2d(T.ones(1, 0, 2, 2), T.tensor(_indices(1, 0, 2, 2)), 2),
    "3-D zero stride": lambda T: F(T).max_unpool3d(T.ones(1, 2, 2, 2), T.tensor(_indices(1, 2, 2, 2)), 2, 0),
    "integer input": lambda T: F(T).max_unpool2d(T.ones(1, 2, 2, 2, dtype=T.int64), T.tensor(_indices(1, 2, 2, 2)), 2),
    "output_size out of range": lambda T: F(T).max_unpool2d(T.ones(1, 2, 2, 2), T.tensor(_indices(1, 2, 2, 2)), 2,
                                                            output_size=(6, 5)),
    "output_size length": lambda T: T.nn.MaxUnpool3d(2)(T.ones(1, 2, 2, 2), T.tensor(_indices(1, 2, 2, 2)), [4, 4]),
}


@pytest.mark.parametrize("name", list(UNPOOL_ERRORS))
def test_max_unpool_errors_as_pytorch(torch, name):
    make = UNPOOL_ERRORS[name]
    assert _raised(make, symgrad) == _raised(make, torch)


def test_max_unpool_empty_outputs_as_pytorch(torch):
    for make in (lambda T: F(T).max_unpool3d(T.ones(0, 2, 2, 2, 2), T.tensor(_indices(0, 2, 2, 2, 2)), 2),
                 lambda T: F(T).max_unpool2d(T.ones(1, 2, 2, 2), T.tensor(_indices(1, 2, 2, 2, bad=99)), 2,
                                             padding=2)):
        assert tuple(make(symgrad).shape) == tuple(make(torch).shape)


def test_max_unpool_module_reprs(torch):
    for make in (lambda T: T.nn.MaxUnpool1d(2, 1), lambda T: T.nn.MaxUnpool2d(2),
                 lambda T: T.nn.MaxUnpool3d((2, 1, 2))):
        assert repr(make(symgrad)) == repr(make(torch))
