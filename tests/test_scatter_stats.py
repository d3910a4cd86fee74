"""Scatters that reduce or replace (scatter_reduce, index_reduce, index_copy, select/slice/diagonal
_scatter), order statistics and counts (kthvalue, mode, msort, quantile, nanquantile, bincount, histc,
bucketize, searchsorted, isin), cov and corrcoef, trapezoid, and products (inner, vdot, addr,
chain_matmul, matrix_power, dist, renorm), against PyTorch on the same inputs: values, dtypes,
grad_fn names, gradients (ties, zeros, NaN), in-place forms and PyTorch's errors."""
import math
import warnings

import numpy as np
import pytest

import symgrad

NAN, INF = math.nan, math.inf


def _outputs(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def run(T, fn, arrays):
    """``fn(T, *tensors)`` on the arrays (floats require grad): outputs' values, dtypes, grad_fn names,
    and the inputs' gradients for a cotangent of distinct entries on every output with one."""
    tensors = [T.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    outputs = _outputs(fn(T, *tensors))
    differentiable = [o for o in outputs if isinstance(o, T.Tensor) and o.requires_grad]
    if differentiable:
        sum((o * (T.arange(o.numel(), dtype=o.dtype).reshape(o.shape) - 1.5)).sum() for o in differentiable).backward()
    names = [None if o.grad_fn is None else type(o.grad_fn).__name__ for o in outputs]
    return ([o.detach().numpy() for o in outputs], [repr(o.dtype) for o in outputs], names,
            [None if t.grad is None else t.grad.numpy() for t in tensors])


def assert_like_pytorch(torch, fn, *arrays, rtol=1e-6, names=True):
    ours, theirs = run(symgrad, fn, arrays), run(torch, fn, arrays)
    assert len(ours[0]) == len(theirs[0])
    for a, b in zip(ours[0], theirs[0]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6, equal_nan=True)
    assert ours[1] == theirs[1]
    if names:
        assert ours[2] == theirs[2]
    for a, b in zip(ours[3], theirs[3]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5, equal_nan=True)


def assert_cases_like_pytorch(torch, cases, *arrays, names=True):
    """Every case (name -> fn(T, *tensors)) on the same inputs, recorded together so that one program
    runs them all: each output's value, dtype and grad_fn name, and the inputs' gradients of all the
    outputs at once (each output's cotangent differs)."""
    labels = []

    def together(T, *tensors):
        labels.clear()
        outputs = []
        for name, fn in cases.items():
            for output in _outputs(fn(T, *tensors)):
                labels.append(name)
                outputs.append(output)
        return tuple(outputs)

    ours, theirs = run(symgrad, together, arrays), run(torch, together, arrays)
    for label, a, b, kind, kinds, name, their_name in zip(labels, ours[0], theirs[0], ours[1], theirs[1], ours[2],
                                                           theirs[2]):
        assert a.shape == b.shape and kind == kinds, label
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=label)
        assert not names or name == their_name, (label, name, their_name)
    for a, b in zip(ours[3], theirs[3]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-5, equal_nan=True, err_msg=str(list(cases)))


def assert_same_values(torch, fn, rtol=0):
    ours, theirs = _outputs(fn(symgrad)), _outputs(fn(torch))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert repr(a.dtype) == repr(b.dtype) and tuple(a.shape) == tuple(b.shape), (a, b)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=0)


def assert_same_error(torch, fn, upto=None):
    """The same exception class and PyTorch's message (up to ``upto`` where it goes on)."""
    errors = []
    for T in (symgrad, torch):
        with pytest.raises(Exception) as caught, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(T)
        errors.append(caught.value)
    ours, theirs = errors
    if isinstance(theirs, torch.linalg.LinAlgError):  # (PyTorch's own class)
        assert isinstance(ours, symgrad.linalg.LinAlgError), ours
    else:
        assert type(ours) is type(theirs), (ours, theirs)
    expected = str(theirs).split("\nException raised from")[0]
    if upto is not None:
        expected = expected[:expected.index(upto) + len(upto)]
    assert str(ours).startswith(expected), (str(ours), str(theirs))


# ------------------------------------------------------------------------ scatter family

SELF = np.array([[1, 5, 0, 2], [3, NAN, 4, 0]], dtype=np.float32)
SRC = np.array([[5, 2, 0, 7, 5], [1, 1, 3, 0, 0]], dtype=np.float32)
INDEX = np.array([[1, 0, 1, 3, 1], [2, 2, 0, 3, 3]])
BASE = np.array([[1, 5, 0], [2, 2, 3], [4, NAN, 1]], dtype=np.float32)
SOURCE = np.array([[2, 5, 0], [3, 1, 0], [9, 5, 7], [1, 1, 1]], dtype=np.float32)
ROWS = np.array([0, 2, 0, 0])


def test_scatter_reduce(torch):
    """Every reduction with and without self: ties of amax/amin share the gradient evenly (a NaN
    result gives NaN), a product's zeros are taken out one at a time, a left-out self gets exact zeros."""
    cases = {f"{reduce} include_self={flag}": (lambda reduce, flag: lambda T, s, src, i: s.scatter_reduce(
        1, i, src, reduce, include_self=flag))(reduce, flag)
        for reduce in ("sum", "prod", "mean", "amax", "amin") for flag in (True, False)}
    assert_cases_like_pytorch(torch, cases, SELF, SRC, INDEX)


def test_index_reduce(torch):
    cases = {f"{reduce} include_self={flag}": (lambda reduce, flag: lambda T, s, src, i: T.index_reduce(
        s, 0, i, src, reduce, include_self=flag))(reduce, flag)
        for reduce in ("prod", "mean", "amax", "amin") for flag in (True, False)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's beta warning
        assert_cases_like_pytorch(torch, cases, BASE, SOURCE, ROWS)


SCATTERS = {
    "scatter_reduce index narrower than self": lambda T, s, src: s.scatter_reduce(
        1, T.tensor([[1, 0, 1]]), src[:1, :3], "amax"),
    "scatter_reduce of 0-d tensors": lambda T, s, src: s[0, 0].scatter_reduce(0, T.tensor(0), src[0, 0], "prod"),
    "scatter_reduce dim 0": lambda T, s, src: s.scatter_reduce(0, T.tensor([[1, 0, 1, 1], [1, 1, 0, 0]]), src[:, :4],
                                                               "mean"),
    "scatter_reduce_ in place": lambda T, s, src: (s * 1).scatter_reduce_(1, T.tensor([[0, 0, 3]]), src[:1, :3], "amin",
                                                                          include_self=False),
    "index_copy": lambda T, s, src: T.index_copy(s, 1, T.tensor([3, 0]), src[:, 1:3]),
    "index_copy repeated positions": lambda T, s, src: s.index_copy(1, T.tensor([2, 2, 2]), src[:, :3]),
    "index_copy_ in place": lambda T, s, src: (s * 2).index_copy_(0, T.tensor([1]), src[:1, :4]),
    "index_copy of 0-d tensors": lambda T, s, src: s[0, 1].index_copy(0, T.tensor([0]), src[1, 0]),
    "index_reduce_ in place": lambda T, s, src: (s * 2).index_reduce_(1, T.tensor([0, 0, 3]), src[:, :3], "amax"),
    "select_scatter": lambda T, s, src: T.select_scatter(s, src[0, :4], 0, 1),
    "select_scatter negative": lambda T, s, src: s.select_scatter(src[:, 0], 1, -1),
    "slice_scatter": lambda T, s, src: T.slice_scatter(s, src[:, :2], 1, 1, 3),
    "slice_scatter step": lambda T, s, src: s.slice_scatter(src[:, 1:3], 1, None, None, 2),
    "slice_scatter clamped": lambda T, s, src: T.slice_scatter(s, src[:, :4], 1, -10, 100),
    "slice_scatter whole": lambda T, s, src: T.slice_scatter(s, src[:, 1:5]),
    "diagonal_scatter": lambda T, s, src: T.diagonal_scatter(s, src[0, :2]),
    "diagonal_scatter offset": lambda T, s, src: s.diagonal_scatter(src[1, :2], 2),
    "diagonal_scatter dims": lambda T, s, src: T.diagonal_scatter(s.t(), src[0, 1:2], -1, 1, 0),
}


@pytest.mark.parametrize("family", ["scatter_reduce", "index_", "select_scatter", "slice_scatter", "diagonal_scatter"])
def test_scatters(torch, family):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_cases_like_pytorch(torch, {k: f for k, f in SCATTERS.items() if k.startswith(family)}, SELF, SRC)


def test_prod_gradient_with_zeros(torch):
    """Two zeros at one position: no gradient through them; one: the product of the others."""
    cases = {f"{index} include_self={flag}": (lambda index, flag: lambda T, a, b: a.scatter_reduce(
        0, T.tensor(index), b[:len(index)], "prod", include_self=flag))(index, flag)
        for index in ([0, 0, 1, 1], [0, 0, 1]) for flag in (True, False)}
    assert_cases_like_pytorch(torch, cases, np.array([0, 3], np.float32), np.array([0, 0, 5, 4], np.float32))


@pytest.mark.parametrize("name, fn", [
    ("integer mean rounds down", lambda T: T.tensor([-1, 2, 3]).scatter_reduce(0, T.tensor([0, 0, 2]),
                                                                               T.tensor([-4, 5, 6]), "mean")),
    ("integer mean without self", lambda T: T.tensor([1, 2, 3]).scatter_reduce(0, T.tensor([0, 0, 2]),
                                                                               T.tensor([4, 5, 7]), "mean",
                                                                               include_self=False)),
    ("int32 amax without self", lambda T: T.tensor([1, 2], dtype=T.int32).scatter_reduce(
        0, T.tensor([0, 0]), T.tensor([-5, -7], dtype=T.int32), "amax", include_self=False)),
    ("int32 index", lambda T: T.zeros(3).scatter_reduce(0, T.tensor([2, 2], dtype=T.int32), T.ones(2), "sum")),
    ("bool sum", lambda T: T.tensor([True, False]).scatter_reduce(0, T.tensor([0, 1]), T.tensor([False, True]), "sum")),
    ("bool prod", lambda T: T.tensor([True, True]).scatter_reduce(0, T.tensor([0, 0]), T.tensor([True, False]),
                                                                 "prod")),
    ("bool amin without self", lambda T: T.tensor([False, False]).scatter_reduce(
        0, T.tensor([1, 1]), T.tensor([True, True]), "amin", include_self=False)),
    ("-inf amax without self", lambda T: T.tensor([1.0, 2.0]).scatter_reduce(
        0, T.tensor([0, 0]), T.tensor([-INF, -INF]), "amax", include_self=False)),
    ("NaN source in amin", lambda T: T.tensor([1.0, 2.0]).scatter_reduce(0, T.tensor([0, 0]), T.tensor([3.0, NAN]),
                                                                        "amin")),
    ("integer index_reduce mean", lambda T: T.tensor([1, 2, 3]).index_reduce(0, T.tensor([0, 0]), T.tensor([4, 6]),
                                                                             "mean")),
    ("index_copy of bools", lambda T: T.tensor([True, False]).index_copy(0, T.tensor([0]), T.tensor([False]))),
    ("index_copy 0-d index", lambda T: T.tensor(1.0).index_copy(0, T.tensor(0), T.tensor([5.0]))),
    ("select_scatter casts src", lambda T: T.zeros(2, 3).select_scatter(T.ones(3, dtype=T.float64), 0, 0)),
    ("slice_scatter of ints into floats", lambda T: T.slice_scatter(T.zeros(2, 3), T.full((2, 3), 7), 1)),
])
def test_scatter_dtypes_and_small_cases(torch, name, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same_values(torch, fn)


def test_index_reduce_warns_as_pytorch():
    """(PyTorch warns once a process: an earlier test has had its warning.)"""
    with pytest.warns(UserWarning, match="index_reduce\\(\\) is in beta and the API may change at any time"):
        symgrad.zeros(3).index_reduce(0, symgrad.tensor([0]), symgrad.ones(1), "amax")


@pytest.mark.parametrize("call, message", [
    (lambda T, s, src: s.scatter_reduce(1, T.tensor([[1, 0, 1]]), src, "max"),
     "Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', 'amin' but got max."),
    (lambda T, s, src: s.scatter_reduce(1, T.tensor([[1, 0, 1]]), src, "sum"),
     "Function ScatterReduceBackward0 returned an invalid gradient at index 1 - got [1, 3] but expected shape "
     "compatible with [2, 5]"),
])
def test_scatter_reduce_backwards_pytorch_refuses(torch, call, message):
    """scatter_reduce computes with "max" and "min" and a source wider than its index, but PyTorch's
    backward refuses them; without a gradient for the source, the wide one is fine."""
    for T in (symgrad, torch):
        s, src = T.tensor(SELF, requires_grad=True), T.tensor(SRC, requires_grad=True)
        out = call(T, s, src)
        with pytest.raises(RuntimeError) as caught:
            out.sum().backward()
        assert str(caught.value).startswith(message)
    values = [call(T, T.tensor(SELF, requires_grad=True), T.tensor(SRC)) for T in (symgrad, torch)]
    np.testing.assert_array_equal(values[0].detach().numpy(), values[1].detach().numpy())


S, I2 = (lambda T: T.zeros(2, 4)), (lambda T: T.tensor([[1, 0, 1, 3, 1]]))


@pytest.mark.parametrize("name, fn", [
    ("scatter_reduce add", lambda T: S(T).scatter_reduce(1, I2(T), T.ones(1, 5), "add")),
    ("scatter_reduce src number", lambda T: S(T).scatter_reduce(1, I2(T), 2.0, "sum")),
    ("scatter_reduce dtypes", lambda T: S(T).scatter_reduce(1, I2(T), T.ones(1, 5, dtype=T.float64), "sum")),
    ("scatter_reduce float index", lambda T: S(T).scatter_reduce(1, T.ones(1, 5), T.ones(1, 5), "sum")),
    ("scatter_reduce out of range", lambda T: S(T).scatter_reduce(1, I2(T) + 3, T.ones(1, 5), "sum")),
    ("scatter_reduce negative index", lambda T: S(T).scatter_reduce(1, I2(T) - 3, T.ones(1, 5), "sum")),
    ("scatter_reduce index rank", lambda T: S(T).scatter_reduce(1, T.tensor([1, 0]), T.ones(1, 5), "sum")),
    ("scatter_reduce index too big", lambda T: S(T).scatter_reduce(1, T.zeros(3, 1, dtype=T.long), T.ones(3, 5),
                                                                   "sum")),
    ("scatter_reduce bool mean", lambda T: T.tensor([True]).scatter_reduce(0, T.tensor([0]), T.tensor([True]),
                                                                           "mean")),
    ("index_reduce sum", lambda T: S(T).index_reduce(0, T.tensor([0]), T.ones(1, 4), "sum")),
    ("index_reduce count", lambda T: S(T).index_reduce(0, T.tensor([0, 1, 0]), T.ones(2, 4), "prod")),
    ("index_reduce out of range", lambda T: S(T).index_reduce(0, T.tensor([2]), T.ones(1, 4), "prod")),
    ("index_reduce dtypes", lambda T: S(T).index_reduce(0, T.tensor([1]), T.ones(1, 4, dtype=T.float64), "prod")),
    ("index_reduce index rank", lambda T: S(T).index_reduce(0, T.tensor([[1]]), T.ones(1, 4), "prod")),
    ("index_reduce slice shape", lambda T: S(T).index_reduce(0, T.tensor([1]), T.ones(1, 3), "prod")),
    ("index_reduce of bools", lambda T: T.tensor([True]).index_reduce(0, T.tensor([0]), T.tensor([True]), "amin")),
    ("index_copy count", lambda T: S(T).index_copy(0, T.tensor([1, 0]), T.ones(1, 4))),
    ("index_copy int32 index", lambda T: S(T).index_copy(0, T.tensor([1], dtype=T.int32), T.ones(1, 4))),
    ("index_copy out of range", lambda T: S(T).index_copy(0, T.tensor([2]), T.ones(1, 4))),
    ("index_copy negative", lambda T: S(T).index_copy(0, T.tensor([-1]), T.ones(1, 4))),
    ("index_copy dtypes", lambda T: S(T).index_copy(0, T.tensor([1]), T.ones(1, 4, dtype=T.float64))),
    ("index_copy index rank", lambda T: S(T).index_copy(0, T.tensor([[1]]), T.ones(1, 4))),
    ("index_copy slice shapes", lambda T: S(T).index_copy(0, T.tensor([1]), T.ones(1, 3))),
    ("index_copy source rank", lambda T: S(T).index_copy(0, T.tensor([1]), T.ones(4))),
    ("select_scatter src shape", lambda T: T.select_scatter(S(T), T.ones(3), 0, 0)),
    ("select_scatter index", lambda T: T.select_scatter(S(T), T.ones(4), 0, 2)),
    ("select_scatter dim", lambda T: T.select_scatter(S(T), T.ones(4), 2, 0)),
    ("slice_scatter src shape", lambda T: T.slice_scatter(S(T), T.ones(2, 3), 1, 0, 2)),
    ("slice_scatter step", lambda T: T.slice_scatter(S(T), T.ones(2, 1), 1, 0, 4, 0)),
    ("diagonal_scatter src shape", lambda T: T.diagonal_scatter(S(T), T.ones(4))),
    ("diagonal_scatter dims", lambda T: T.diagonal_scatter(S(T), T.ones(2), 0, 1, 1)),
])
def test_scatter_errors_as_pytorch(torch, name, fn):
    assert_same_error(torch, fn)


# ------------------------------------------------------------------------ order statistics

TIES = np.random.default_rng(7).choice([0.0, 1.0, 2.0, -1.0, NAN], size=(24, 7)).astype(np.float32)
LONG_TIES = np.random.default_rng(8).choice([0.0, 1.0, 2.0, NAN], size=(24, 40)).astype(np.float32)


@pytest.mark.parametrize("values, k", [(TIES, 4), (LONG_TIES, 9)])
def test_kthvalue_picks_pytorchs_entry_among_ties(torch, values, k):
    """PyTorch's quickselect (NaN largest) decides which of equal values is reported."""
    assert_same_values(torch, lambda T: T.kthvalue(T.tensor(values), k, 1))


@pytest.mark.parametrize("values", [TIES, LONG_TIES])
def test_mode_picks_pytorchs_value_and_entry(torch, values):
    """The smallest of the most frequent values, at the position its std::sort leaves last (an
    insertion sort up to 16 entries, introsort beyond); a NaN equals nothing, so NaNs are each a value
    of their own, and std::sort's ``<`` places them as it does."""
    assert_same_values(torch, lambda T: T.mode(T.tensor(values), 1))


ORDERED = {
    "kthvalue": lambda T, x: T.kthvalue(x, 2, 1),
    "kthvalue dim 0 keepdim": lambda T, x: x.kthvalue(1, 0, keepdim=True),
    "mode": lambda T, x: T.mode(x),
    "mode dim 0 keepdim": lambda T, x: x.mode(0, True),
    "msort": lambda T, x: T.msort(x),
    "msort method": lambda T, x: x.t().msort(),
}


def test_order_statistics_gradients(torch):
    """The gradient goes to the entry reported (PyTorch's value_selecting_reduction_backward)."""
    assert_cases_like_pytorch(torch, ORDERED, np.array([[3, 1, 3, 2, 1], [NAN, 1, 0, 0, 5], [2, 2, 2, 7, 2]],
                                                       dtype=np.float32))


@pytest.mark.parametrize("name, fn", [
    ("kthvalue of a 0-d tensor", lambda T: T.kthvalue(T.tensor(3.0), 1)),
    ("kthvalue of ints", lambda T: T.kthvalue(T.tensor([[1, 2], [2, 2]]), 2, 1)),
    ("mode of a 0-d tensor", lambda T: T.mode(T.tensor(2.0))),
    ("mode of bools", lambda T: T.mode(T.tensor([[True, False, False]]), 1)),
    ("mode of signed zeros", lambda T: T.mode(T.tensor([0.0, -0.0, 0.0]))),
    ("mode of ints", lambda T: T.tensor([4, 4, 1, 1, 2]).mode()),
    ("msort of a 0-d tensor", lambda T: T.msort(T.tensor(3.0))),
])
def test_order_statistics_small_cases(torch, name, fn):
    assert_same_values(torch, fn)


def test_return_types_print_as_pytorchs(torch):
    for T in (symgrad, torch):
        assert repr(T.kthvalue(T.tensor([[1, 2], [2, 2]]), 2, 1)) == (
            "torch.return_types.kthvalue(\nvalues=tensor([2, 2]),\nindices=tensor([1, 1]))")
        assert repr(T.mode(T.tensor([4, 4, 1, 1, 2]))) == ("torch.return_types.mode(\nvalues=tensor(1),\n"
                                                          "indices=tensor(3))")


# ------------------------------------------------------------------------------ quantile

SAMPLES = np.array([[3, 1, 4, 1, 5], [2, NAN, 7, 1, 8]], dtype=np.float32)


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_quantile_interpolations(torch, name):
    """Ranks q * (n - 1) rounded as asked (nearest: half to even), the values below and above lerped;
    quantile is NaN over a slice with a NaN (its gradient all on the NaN), nanquantile skips them."""
    cases = {how: (lambda how: lambda T, x: getattr(T, name)(x, T.tensor([0.1, 0.5, 0.875, 1.0]), dim=1,
                                                             interpolation=how))(how)
             for how in ("linear", "lower", "higher", "midpoint", "nearest")}
    assert_cases_like_pytorch(torch, cases, SAMPLES)


QUANTILES = {
    "of everything": lambda T, x: T.quantile(x[:, :3], 0.3),
    "nan of everything": lambda T, x: T.nanquantile(x, 0.7),
    "keepdim": lambda T, x: x.quantile(0.25, dim=0, keepdim=True),
    "q vector keepdim": lambda T, x: T.nanquantile(x, T.tensor([0.3, 0.4]), dim=1, keepdim=True),
    "q vector of everything keepdim": lambda T, x: T.nanquantile(x, T.tensor([0.3]), keepdim=True),
    "ties": lambda T, x: T.quantile((x[:, :4] * 0).nan_to_num() + T.tensor([1.0, 1, 2, 2]), T.tensor([0.25, 0.5]), 1),
    "a 0-d tensor": lambda T, x: T.quantile(x[0, 0], 0.5, dim=0),
    "all NaN": lambda T, x: T.nanquantile(x[1, 1:2], 0.5),
}


def test_quantile_shapes(torch):
    assert_cases_like_pytorch(torch, QUANTILES, SAMPLES)


def test_quantile_in_float64(torch):
    assert_same_values(torch, lambda T: T.quantile(T.tensor([1.0, 2.0, 4.0], dtype=T.float64),
                                                   T.tensor([0.1, 0.9], dtype=T.float64)))


# ---------------------------------------------------------------------- cov and corrcoef

OBSERVED = np.array([[1, 2, 4, 7], [0.5, -1, 3, 3]], dtype=np.float32)
IMPORTANCE = np.array([0.5, 1, 2, 1], dtype=np.float32)


COVARIANCES = dict([
    ("cov", lambda T, x, w: T.cov(x)),
    ("cov correction 0", lambda T, x, w: x.cov(correction=0)),
    ("cov correction 2", lambda T, x, w: T.cov(x, correction=2)),
    ("cov fweights", lambda T, x, w: T.cov(x, fweights=T.tensor([1, 2, 1, 3]))),
    ("cov aweights", lambda T, x, w: T.cov(x, aweights=w)),
    ("cov both weights", lambda T, x, w: T.cov(x, fweights=T.tensor([1, 2, 1, 3]), aweights=w, correction=3)),
    ("cov of a vector", lambda T, x, w: T.cov(x[0])),
    ("corrcoef", lambda T, x, w: T.corrcoef(x)),
    ("corrcoef method", lambda T, x, w: (x * T.tensor([[1.0], [-2.0]])).corrcoef()),
    ("corrcoef of a vector", lambda T, x, w: T.corrcoef(x[1])),
])


def test_cov_and_corrcoef(torch):
    assert_cases_like_pytorch(torch, COVARIANCES, OBSERVED, IMPORTANCE)


@pytest.mark.parametrize("name, fn", [
    ("cov of ints", lambda T: T.cov(T.tensor([[1, 2, 4]]))),
    ("corrcoef of constant rows", lambda T: T.corrcoef(T.tensor([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]]))),
    ("corrcoef of ints", lambda T: T.corrcoef(T.tensor([1, 2, 4]))),
])
def test_cov_dtypes_and_degenerate_cases(torch, name, fn):
    assert_same_values(torch, fn, rtol=2e-7)  # (a product's sum, added in another order: its last bit)


def test_cov_warns_with_no_degrees_of_freedom(torch):
    for T in (symgrad, torch):
        with pytest.warns(UserWarning, match="cov\\(\\): degrees of freedom is <= 0"):
            assert T.cov(T.tensor([1.0, 2.0]), correction=2).item() == INF


# ------------------------------------------------------------------------------ counting

BOUNDARIES = [1.0, 3.0, 5.0, 7.0, 9.0]
PROBES = [[3.0, 6.0, 9.0], [0.0, 1.0, 8.5], [NAN, -INF, 10.0]]
ROWS_SORTED, ROW_PROBES = [[1, 3, 5, 7, 9], [2, 4, 6, 8, 10]], [[3, 6, 9], [3, 6, 9]]
UNIFORM = np.random.default_rng(0).uniform(-1, 1, 300).astype(np.float32)


@pytest.mark.parametrize("name, fn", [
    ("bincount", lambda T: T.bincount(T.tensor([1, 3, 1, 0]))),
    ("bincount minlength", lambda T: T.tensor([1, 3, 1, 0]).bincount(minlength=6)),
    ("bincount float32 weights", lambda T: T.bincount(T.tensor([1, 3, 1, 0]), T.tensor([0.5, 1.0, 2.0, 3.0]))),
    ("bincount float64 weights", lambda T: T.bincount(T.tensor([1, 3, 1]), T.tensor([0.5, 1.0, 2.0], dtype=T.float64))),
    ("bincount int weights", lambda T: T.bincount(T.tensor([1, 3, 1, 0]), T.tensor([1, 2, 3, 4]))),
    ("bincount bool weights", lambda T: T.bincount(T.tensor([1, 3, 1, 0]), T.tensor([True, False, True, True]))),
    ("bincount of nothing", lambda T: T.bincount(T.tensor([], dtype=T.long))),
    ("bincount int32", lambda T: T.bincount(T.tensor([2, 2], dtype=T.int32))),
    ("histc", lambda T: T.histc(T.tensor([1.0, 2.0, 1.0, 2.5, NAN, 4.0, -1.0, INF]), 4, 0, 3)),
    ("histc of the values' range", lambda T: T.tensor([1.0, 2, 1]).histc(4)),
    ("histc of one value", lambda T: T.histc(T.tensor([1.0, 1.0]), 3)),
    ("histc right edge", lambda T: T.histc(T.arange(11.0), 3, 0, 10)),
    ("histc float64", lambda T: T.histc(T.tensor([0.1, 0.2, 0.3, 0.7], dtype=T.float64), 10, 0, 1)),
    ("histc of many", lambda T: T.histc(T.tensor(UNIFORM), 37, -0.77, 0.93)),
    ("histc of many in their range", lambda T: T.histc(T.tensor(UNIFORM).reshape(10, 30), 13)),
    ("bucketize", lambda T: T.bucketize(T.tensor(PROBES), T.tensor(BOUNDARIES))),
    ("bucketize right", lambda T: T.bucketize(T.tensor(PROBES), T.tensor(BOUNDARIES), right=True)),
    ("bucketize int32", lambda T: T.bucketize(T.tensor(PROBES), T.tensor(BOUNDARIES), out_int32=True)),
    ("bucketize a number", lambda T: T.bucketize(3.0, T.tensor(BOUNDARIES))),
    ("bucketize float64 boundaries", lambda T: T.bucketize(T.tensor(PROBES), T.tensor(BOUNDARIES, dtype=T.float64))),
    ("searchsorted rows", lambda T: T.searchsorted(T.tensor(ROWS_SORTED), T.tensor(ROW_PROBES))),
    ("searchsorted right", lambda T: T.searchsorted(T.tensor(ROWS_SORTED), T.tensor(ROW_PROBES), right=True)),
    ("searchsorted side", lambda T: T.searchsorted(T.tensor(ROWS_SORTED), T.tensor(ROW_PROBES), side="right")),
    ("searchsorted 1-D", lambda T: T.searchsorted(T.tensor(BOUNDARIES), T.tensor(PROBES))),
    ("searchsorted a number", lambda T: T.searchsorted(T.tensor(BOUNDARIES), 4.0)),
    ("searchsorted sorter", lambda T: T.searchsorted(T.tensor([5.0, 1, 3]), T.tensor([2.0, 4]),
                                                     sorter=T.tensor([1, 2, 0]))),
    ("searchsorted floats for ints", lambda T: T.searchsorted(T.tensor(ROWS_SORTED).float(), T.tensor(ROW_PROBES))),
    ("isin", lambda T: T.isin(T.tensor([[1, 2], [3, 4]]), T.tensor([2, 3]))),
    ("isin a number", lambda T: T.isin(T.tensor([[1, 2], [3, 4]]), 2)),
    ("isin of a number", lambda T: T.isin(2, T.tensor([[1, 2], [3, 4]]))),
    ("isin across dtypes", lambda T: T.isin(T.tensor([[1, 2], [3, 4]]), T.tensor([2.0, 3.5]))),
    ("isin NaN", lambda T: T.isin(T.tensor([NAN, 1.0, -0.0]), T.tensor([NAN, 1.0, 0.0]))),
    ("isin invert", lambda T: T.isin(T.tensor([[1, 2], [3, 4]]), T.tensor([2, 3]), invert=True)),
])
def test_counting(torch, name, fn):
    assert_same_values(torch, fn)


def test_counts_have_no_gradient_as_in_pytorch(torch):
    """bincount of weights that require grad keeps a history whose backward PyTorch refuses; histc's
    result has none."""
    for T in (symgrad, torch):
        weights = T.tensor([0.5, 1.0, 2.0], requires_grad=True)
        counts = T.bincount(T.tensor([1, 0, 1]), weights)
        assert counts.requires_grad and type(counts.grad_fn).__name__ == "NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::bincount is not implemented"):
            counts.sum().backward()
        assert not T.histc(weights, 3).requires_grad


# --------------------------------------------------------------------------- trapezoid

CURVE = np.array([[1, 2, 4], [3, -1, 0.5]], dtype=np.float32)
POINTS = np.array([0, 1, 3], dtype=np.float32)


TRAPEZOIDS = dict([
    ("trapezoid", lambda T, y, x: T.trapezoid(y)),
    ("trapezoid dx", lambda T, y, x: T.trapezoid(y, dx=0.5)),
    ("trapezoid 0-d dx", lambda T, y, x: T.trapezoid(y, dx=T.tensor(2.0))),
    ("trapezoid at points", lambda T, y, x: T.trapezoid(y, x)),
    ("trapezoid at points dim 0", lambda T, y, x: T.trapezoid(y, x[:2], dim=0)),
    ("trapezoid at points per row", lambda T, y, x: T.trapezoid(y, T.stack([x, x * 2]))),
    ("trapz", lambda T, y, x: T.trapz(y, x)),
    ("cumulative_trapezoid", lambda T, y, x: T.cumulative_trapezoid(y)),
    ("cumulative_trapezoid dx", lambda T, y, x: T.cumulative_trapezoid(y, dx=0.5)),
    ("cumulative_trapezoid at points", lambda T, y, x: T.cumulative_trapezoid(y, x)),
    ("cumulative_trapezoid dim 0", lambda T, y, x: T.cumulative_trapezoid(y, dim=0)),
])


def test_trapezoid(torch):
    """(PyTorch's C++ multiplies and divides by a number with MulBackward1/DivBackward1; symgrad's
    nodes are its Python operators'.)"""
    assert_cases_like_pytorch(torch, TRAPEZOIDS, CURVE, POINTS, names=False)


@pytest.mark.parametrize("name, fn", [
    ("trapezoid of ints", lambda T: T.trapezoid(T.tensor([1, 2, 3]))),
    ("trapezoid of ints at points", lambda T: T.trapezoid(T.tensor([1, 2, 3]), T.tensor([1, 2, 4]))),
    ("trapezoid of no samples", lambda T: T.trapezoid(T.ones(2, 0))),
    ("trapezoid of no int samples", lambda T: T.trapezoid(T.ones(0, dtype=T.long))),
    ("cumulative_trapezoid of ints", lambda T: T.cumulative_trapezoid(T.tensor([1, 2, 3]), dx=2)),
    ("cumulative_trapezoid of one sample", lambda T: T.cumulative_trapezoid(T.ones(2, 1))),
])
def test_trapezoid_dtypes(torch, name, fn):
    assert_same_values(torch, fn)


# ------------------------------------------------------------------------------ products

LEFT = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
RIGHT = np.array([[1, 0, -1], [2, 1, 0.5], [3, 3, 3], [0, 1, 0]], dtype=np.float32)
PRODUCTS = {
    "inner": lambda T, a, b: T.inner(a, b),
    "inner of vectors": lambda T, a, b: T.inner(a[0], b[0]),
    "inner with a 0-d tensor": lambda T, a, b: a.inner(b[0, 0]),
    "inner of a cube": lambda T, a, b: T.inner(a.reshape(2, 1, 3), b),
    "vdot": lambda T, a, b: T.vdot(a[0], b[1]),
    "addr": lambda T, a, b: T.addr(a[:, :2] * 1, a[:, 0], b[2, :2], beta=0.5, alpha=2),
    "addr broadcast input": lambda T, a, b: a[0, :2].addr(a[:, 0], b[1, 1:]),
    "addr 0-d input": lambda T, a, b: T.addr(a[0, 0], a[:, 0], b[0]),
    "addr beta=0 drops NaN": lambda T, a, b: T.addr(a * NAN, a[:, 0], b[0], beta=0),
    "addr_": lambda T, a, b: (a * 1).addr_(a[:, 0], b[0], alpha=-1),
    "chain_matmul": lambda T, a, b: T.chain_matmul(a, b.t(), b),
    "chain_matmul of one": lambda T, a, b: T.chain_matmul(a),
    "multi_dot of four": lambda T, a, b: T.linalg.multi_dot([a, b.t(), b, a.t()]),
    "multi_dot with vectors": lambda T, a, b: T.linalg.multi_dot([a[0], a.t(), a, b[0]]),
    "matrix_power 0": lambda T, a, b: T.matrix_power(a[:, :2], 0),
    "matrix_power 1": lambda T, a, b: T.matrix_power(a[:, 1:], 1),
    "matrix_power 3": lambda T, a, b: a[:, :2].matrix_power(3),
    "matrix_power 6": lambda T, a, b: T.matrix_power(a[:, 1:] * 0.5, 6),
    "matrix_power -1": lambda T, a, b: T.matrix_power(a[:, :2], -1),
    "matrix_power -3": lambda T, a, b: T.linalg.matrix_power(a[:, :2], -3),
    "matrix_power of a batch": lambda T, a, b: T.matrix_power(T.stack([a[:, :2], a[:, 1:]]), 5),
    "dist": lambda T, a, b: T.dist(a[0], b[1]),
    "dist p=1": lambda T, a, b: a[0].dist(b[1], 1),
    "dist p=inf": lambda T, a, b: T.dist(a[0], b[1], INF),
    "dist p=-inf": lambda T, a, b: T.dist(a[0], b[1], -INF),
    "dist p=3": lambda T, a, b: T.dist(a, b[:2], 3),
    "dist p=0.5": lambda T, a, b: T.dist(a[0], b[1], 0.5),
    "dist broadcast": lambda T, a, b: T.dist(a[0], b[:, :1]),
    "dist at zero": lambda T, a, b: T.dist(a[0], a[0] * 1),
    "dist at zero p=3": lambda T, a, b: T.dist(a[0], a[0] * 1, 3),
    "dist at zero p=inf": lambda T, a, b: T.dist(a[0], a[0] * 1, INF),
    "renorm": lambda T, a, b: T.renorm(b, 2, 0, 1.0),
    "renorm p=1 dim 1": lambda T, a, b: b.renorm(1, 1, 2.0),
    "renorm p=inf": lambda T, a, b: T.renorm(b, INF, 1, 1.5),
    "renorm p=3 below": lambda T, a, b: T.renorm(b, 3, 0, 100.0),
    "renorm_": lambda T, a, b: (b * 1).renorm_(2, -1, 0.5),
}


@pytest.mark.parametrize("family", ["inner", "vdot", "addr", "chain_matmul", "multi_dot", "matrix_power", "dist",
                                    "renorm"])
def test_products(torch, family):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # chain_matmul's deprecation
        assert_cases_like_pytorch(torch, {k: f for k, f in PRODUCTS.items() if k.startswith(family)}, LEFT, RIGHT)


@pytest.mark.parametrize("name, fn", [
    ("addr of ints", lambda T: T.addr(T.ones(2, 3, dtype=T.long), T.tensor([1, 2]), T.tensor([1, 2, 3]), beta=2,
                                      alpha=3)),
    ("addr promotes", lambda T: T.addr(T.ones(2, 2, dtype=T.float64), T.tensor([1.0, 2.0]), T.tensor([3.0, 4.0]))),
    ("matrix_power of ints", lambda T: T.matrix_power(T.tensor([[1, 2], [3, 4]]), 3)),
    ("matrix_power 0 of a batch", lambda T: T.matrix_power(T.ones(3, 2, 2), 0)),
    ("dist promotes", lambda T: T.dist(T.tensor([1.0, 2.0]), T.tensor([1.0, 3.0], dtype=T.float64))),
])
def test_product_dtypes(torch, name, fn):
    assert_same_values(torch, fn)


@pytest.mark.parametrize("vectors", [("float32", "float64"), ("float64", "float32"), ("float32", "float32")])
def test_addr_backward_refuses_a_vector_of_another_dtype_as_pytorch(torch, vectors):
    """Each vector's gradient is the cotangent (in the result's dtype) times the other vector by ``mv``,
    which PyTorch refuses for mixed dtypes; a vector that needs no gradient is fine."""
    outcomes = []
    for T in (symgrad, torch):
        for wanted in ((True, False), (False, True)):
            a, b = (T.ones(n, dtype=getattr(T, d), requires_grad=w) for n, d, w in zip((3, 4), vectors, wanted))
            result = T.addr(T.ones(3, 4, dtype=T.float64), a, b)
            try:
                result.sum().backward()
                outcomes.append(("ok", (a if wanted[0] else b).grad.tolist()))
            except RuntimeError as error:
                outcomes.append(("refused", str(error).split(" [")[0]))
    assert outcomes[:2] == outcomes[2:]


def test_chain_matmul_warns_as_pytorch():
    """(PyTorch warns once a process: an earlier test has had its warning.)"""
    with pytest.warns(UserWarning, match="torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                                         "release. Use torch.linalg.multi_dot instead, which accepts a list of two "
                                         "or more tensors rather than multiple parameters."):
        symgrad.chain_matmul(symgrad.ones(2, 3), symgrad.ones(3, 2))


def test_dist_with_p_0_has_pytorchs_backward(torch):
    """PyTorch's gradient of a 0-norm is undefined: input gets none (symgrad: zeros), and other's (its
    negation) raises."""
    for T in (symgrad, torch):
        x, y = T.tensor([1.0, 2.0, 3.0], requires_grad=True), T.tensor([0.0, 2.0, 5.0], requires_grad=True)
        T.dist(x, y.detach(), 0).backward()
        assert x.grad is None or not x.grad.any()
        distance = T.dist(x, y, 0)
        assert distance.item() == 2.0
        with pytest.raises(RuntimeError, match="Expected a proper Tensor but got None"):
            distance.backward()


# ------------------------------------------------------------------- errors of the rest

X2 = (lambda T: T.tensor([[3.0, 1.0], [2.0, 4.0]]))


@pytest.mark.parametrize("name, fn", [
    ("kthvalue k too big", lambda T: T.kthvalue(X2(T), 3, 0)),
    ("kthvalue k zero", lambda T: T.kthvalue(X2(T), 0)),
    ("kthvalue 0-d k", lambda T: T.kthvalue(T.tensor(3.0), 2)),
    ("kthvalue empty dim", lambda T: T.kthvalue(T.ones(0, 3), 1, 0)),
    ("mode empty dim", lambda T: T.mode(T.ones(2, 0), 1)),
    ("quantile q above 1", lambda T: T.quantile(X2(T), 1.5)),
    ("quantile q values", lambda T: T.quantile(X2(T), T.tensor([0.5, -0.1]))),
    ("quantile q matrix", lambda T: T.quantile(X2(T), T.tensor([[0.5]]))),
    ("quantile of ints", lambda T: T.quantile(T.tensor([1, 2]), 0.5)),
    ("quantile q dtype", lambda T: T.quantile(X2(T), T.tensor([0.5], dtype=T.float64))),
    ("quantile interpolation", lambda T: T.quantile(X2(T), 0.5, interpolation="foo")),
    ("quantile of nothing", lambda T: T.quantile(T.ones(0), 0.5)),
    ("quantile dim", lambda T: T.nanquantile(X2(T), 0.5, dim=2)),
    ("cov of a cube", lambda T: T.cov(T.ones(2, 2, 2))),
    ("cov float fweights", lambda T: T.cov(X2(T), fweights=T.tensor([1.0, 2.0]))),
    ("cov negative fweights", lambda T: T.cov(X2(T), fweights=T.tensor([1, -2]))),
    ("cov negative aweights", lambda T: T.cov(X2(T), aweights=T.tensor([1.0, -2.0]))),
    ("cov fweights count", lambda T: T.cov(X2(T), fweights=T.tensor([1, 2, 3]))),
    ("cov int aweights", lambda T: T.cov(X2(T), aweights=T.tensor([1, 2]))),
    ("cov aweights matrix", lambda T: T.cov(X2(T), aweights=T.tensor([[1.0, 2.0]]))),
    ("bincount negative", lambda T: T.bincount(T.tensor([-1, 2]))),
    ("bincount matrix", lambda T: T.bincount(T.tensor([[1]]))),
    ("bincount floats", lambda T: T.bincount(T.tensor([1.0]))),
    ("bincount bools", lambda T: T.bincount(T.tensor([True]))),
    ("bincount weights", lambda T: T.bincount(T.tensor([1, 2]), T.ones(3))),
    ("bincount minlength", lambda T: T.bincount(T.tensor([1, 2]), minlength=-1)),
    ("histc of ints", lambda T: T.histc(T.tensor([1, 2]), 3)),
    ("histc no bins", lambda T: T.histc(T.tensor([1.0]), 0)),
    ("histc range", lambda T: T.histc(T.tensor([1.0]), 3, 2, 1)),
    ("histc NaN range", lambda T: T.histc(T.tensor([1.0, 2.0]), 3, NAN, 1)),
    ("bucketize boundaries", lambda T: T.bucketize(T.ones(2), T.ones(2, 2))),
    ("searchsorted rows", lambda T: T.searchsorted(T.ones(2, 5), T.ones(1, 3))),
    ("searchsorted side and right", lambda T: T.searchsorted(T.ones(5), T.ones(3), side="left", right=True)),
    ("searchsorted side", lambda T: T.searchsorted(T.ones(5), T.ones(3), side="foo")),
    ("searchsorted number for rows", lambda T: T.searchsorted(T.ones(2, 5), 3)),
    ("searchsorted sorter", lambda T: T.searchsorted(T.ones(5), T.ones(3), sorter=T.tensor([0, 1]))),
    ("isin of bools", lambda T: T.isin(T.tensor([1, 2]), T.tensor([True]))),
    ("trapezoid points", lambda T: T.trapezoid(T.ones(2, 3), T.ones(2))),
    ("trapezoid bools", lambda T: T.trapezoid(T.tensor([True, False]))),
    ("trapezoid dim", lambda T: T.trapezoid(T.ones(2, 3), dim=2)),
    ("trapezoid of a 0-d tensor", lambda T: T.trapezoid(T.tensor(1.0))),
    ("inner last dims", lambda T: T.inner(T.ones(2, 3), T.ones(3, 4))),
    ("vdot matrices", lambda T: T.vdot(T.ones(2, 2), T.ones(2, 2))),
    ("vdot sizes", lambda T: T.vdot(T.ones(3), T.ones(2))),
    ("vdot dtypes", lambda T: T.vdot(T.ones(2), T.ones(2, dtype=T.float64))),
    ("addr vector rank", lambda T: T.addr(T.ones(2, 3), T.ones(2, 1), T.ones(3))),
    ("addr input shape", lambda T: T.addr(T.ones(3, 3), T.ones(2), T.ones(3))),
    ("addr float beta for ints", lambda T: T.addr(T.ones(2, 2, dtype=T.long), T.ones(2, dtype=T.long),
                                                   T.ones(2, dtype=T.long), beta=0.5)),
    ("chain_matmul of nothing", lambda T: T.chain_matmul()),
    ("chain_matmul of a vector", lambda T: T.chain_matmul(T.ones(2, 3), T.ones(3))),
    ("multi_dot of one", lambda T: T.linalg.multi_dot([T.ones(2, 2)])),
    ("multi_dot shapes", lambda T: T.linalg.multi_dot([T.ones(2, 3), T.ones(2, 3)])),
    ("multi_dot middle vector", lambda T: T.linalg.multi_dot([T.ones(2, 2), T.ones(2), T.ones(2, 2)])),
    ("multi_dot dtypes", lambda T: T.linalg.multi_dot([T.ones(2, 3), T.ones(3, 2, dtype=T.float64)])),
    ("matrix_power not square", lambda T: T.matrix_power(T.ones(2, 3), 2)),
    ("matrix_power vector", lambda T: T.matrix_power(T.ones(3), 2)),
    ("matrix_power singular", lambda T: T.matrix_power(T.zeros(2, 2), -1)),
    ("dist of ints", lambda T: T.dist(T.tensor([1, 2]), T.tensor([1, 3]))),
    ("dist shapes", lambda T: T.dist(T.ones(2), T.ones(3))),
    ("renorm p", lambda T: T.renorm(T.ones(2, 2), -1, 0, 1.0)),
    ("renorm maxnorm", lambda T: T.renorm(T.ones(2, 2), 2, 0, -1.0)),
    ("renorm vector", lambda T: T.renorm(T.ones(3), 2, 0, 1.0)),
    ("renorm ints", lambda T: T.renorm(T.ones(2, 2, dtype=T.long), 2, 0, 1)),
])
def test_errors_as_pytorch(torch, name, fn):
    assert_same_error(torch, fn, upto="but expected one of:" if "isin" in name and "number" in name else None)


def test_in_place_forms_write_through_views(torch):
    """scatter_reduce_, index_copy_, index_reduce_, renorm_ and addr_ write into the tensor (a view's
    base sees it, the version counts it); a leaf that requires grad refuses them."""
    def run(T):
        seen = []
        leaf = T.zeros(2, 4, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            leaf.scatter_reduce_(1, T.tensor([[0, 1]]), T.ones(1, 2), "sum")
        b = T.zeros(3, 4)
        b[1].index_copy_(0, T.tensor([2]), T.tensor([5.0]))
        b[2:].renorm_(2, 0, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.t().index_reduce_(0, T.tensor([3]), T.full((1, 3), 2.0), "amax")
        b[0].scatter_reduce_(0, T.tensor([0, 0]), T.tensor([3.0, 4.0]), "prod", include_self=False)
        b[:2, :2].addr_(T.ones(2), T.tensor([1.0, -1.0]), beta=2)
        seen += [b.tolist(), b._version]
        return seen

    assert run(symgrad) == run(torch)
