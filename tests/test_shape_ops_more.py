"""Shape, view, reduction and product conveniences against PyTorch on the same inputs: values,
dtypes, grad_fn names and gradients (with ties, zeros, NaN and infinities), which results alias
their input (a write shows through, the version is shared), what ``is_contiguous``/``contiguous``
say of each kind of view, ``t_()`` in place, and PyTorch's errors.  The registry's generic tests
(test_ops.py) cover the new ops on ordinary values."""
import math
import warnings

import numpy as np
import pytest

import symgrad

NAN, INF = math.nan, math.inf

EDGY = np.array([[1, 3, 3, 2], [5, 5, 1, NAN], [0, -2, 0, 4], [2, INF, 3, 0], [1, 2, -INF, 3]], dtype=np.float32)
PLAIN = np.array([[0.5, -1.5, 2.0, 0.25], [3.0, 0.0, -0.75, 1.25], [-2.5, 1.75, 0.125, -0.5]], dtype=np.float32)
CUBE = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5 - 3


def _outputs(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def run(T, fn, values):
    """The outputs of ``fn(T, x)`` (their values, dtypes and grad_fn names), and x's gradient for
    a cotangent of distinct entries on every output that has a gradient."""
    x = T.tensor(values, requires_grad=values.dtype.kind == "f")
    outputs = _outputs(fn(T, x))
    differentiable = [o for o in outputs if o.requires_grad]
    if differentiable:
        total = sum(((o * T.arange(o.numel(), dtype=o.dtype).reshape(o.shape) - 1.5).sum() for o in differentiable))
        total.backward()
    names = [type(o.grad_fn).__name__ if o.grad_fn is not None else None for o in outputs]
    arrays = [o.detach().numpy() for o in outputs]
    grad = x.grad.numpy() if differentiable else None
    return arrays, [repr(o.dtype) for o in outputs], names, grad


def assert_like_pytorch(torch, fn, values, rtol=2e-6):
    ours, theirs = run(symgrad, fn, values), run(torch, fn, values)
    assert len(ours[0]) == len(theirs[0])
    for a, b in zip(ours[0], theirs[0]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6, equal_nan=True)
    assert ours[1:3] == theirs[1:3]
    assert (ours[3] is None) == (theirs[3] is None)
    if ours[3] is not None:
        np.testing.assert_allclose(ours[3], theirs[3], rtol=rtol, atol=1e-5, equal_nan=True)


def assert_same_error(torch, fn, upto=None):
    """The same exception class and message (symgrad may add the op, shapes and dtypes after it), or
    its words up to ``upto`` where PyTorch goes on to print a tensor or its overloads."""
    errors = []
    for T in (symgrad, torch):
        with pytest.raises(Exception) as caught:
            fn(T)
        errors.append(caught.value)
    ours, theirs = errors
    assert type(ours) is type(theirs)
    expected = str(theirs).split("\nException raised from")[0]
    if upto is not None:
        expected = expected[:expected.index(upto) + len(upto)]
    assert str(ours).startswith(expected), (str(ours), str(theirs))


# ------------------------------------------------------------------ values and gradients

ON_CUBE = {
    "swapaxes": lambda T, x: T.swapaxes(x, 0, 2),
    "swapdims method": lambda T, x: x.swapdims(-1, 1),
    "movedim": lambda T, x: T.movedim(x, 0, 2),
    "moveaxis tuples": lambda T, x: x.moveaxis((0, 1), (2, 0)),
    "movedim negative": lambda T, x: x.movedim((0, -1), (-1, 0)),
    "unflatten": lambda T, x: x.unflatten(2, (2, -1)),
    "torch.unflatten": lambda T, x: T.unflatten(x, -2, (1, 3, 1)),
    "rot90": lambda T, x: T.rot90(x),
    "rot90 k=-1": lambda T, x: T.rot90(x, -1, (0, 2)),
    "rot90 k=2": lambda T, x: x.rot90(2, (2, 1)),
    "rot90 k=3": lambda T, x: T.rot90(x, 3, [1, 0]),
    "rot90 k=4": lambda T, x: T.rot90(x, 4),
    "diff": lambda T, x: T.diff(x),
    "diff n=2 dim=0": lambda T, x: T.diff(x, n=2, dim=0),
    "diff n=3 prepend append": lambda T, x: x.diff(3, 1, prepend=x[:, :1] * 2, append=x[:, -2:]),
    "diff n=0": lambda T, x: T.diff(x, n=0),
    "kron": lambda T, x: T.kron(x[0], x[1, :2]),
    "kron ranks": lambda T, x: T.kron(x[0, 0], x[1]),
    "repeat_interleave flat": lambda T, x: T.repeat_interleave(x, 2),
    "repeat_interleave dim": lambda T, x: x.repeat_interleave(3, dim=1),
    "repeat_interleave tensor": lambda T, x: T.repeat_interleave(x, T.tensor([1, 0, 2]), dim=1),
    "repeat_interleave one count": lambda T, x: T.repeat_interleave(x, T.tensor([2]), dim=-1),
    "repeat_interleave 0-d count": lambda T, x: x.repeat_interleave(T.tensor(2), dim=0),
    "cartesian_prod": lambda T, x: T.cartesian_prod(x[0, 0], x[1, 1, :2]),
    "cartesian_prod of three": lambda T, x: T.cartesian_prod(x[0, 0, :2], x[1, 1, :3], x[0, 2, 1:]),
    "meshgrid ij": lambda T, x: T.meshgrid(x[0, 0], x[1, 1, :2], indexing="ij"),
    "meshgrid xy": lambda T, x: T.meshgrid([x[0, 0], x[1, 1, :2], x[0, 1, :3]], indexing="xy"),
    "meshgrid 0-d": lambda T, x: T.meshgrid(x[0, 0, 0], x[1, 1], indexing="ij"),
    "expand_as": lambda T, x: x[:, :1].expand_as(x),
    "view_as": lambda T, x: x.view_as(T.zeros(6, 4)),
    "reshape_as": lambda T, x: x.reshape_as(T.zeros(4, 6)),
    "reshape_as of a transpose": lambda T, x: x.transpose(0, 2).reshape_as(T.zeros(24)),
    "contiguous of a permute": lambda T, x: x.permute(2, 0, 1).contiguous(),
    "t_ of a result": lambda T, x: (x[0] * 2).t_(),
    "tensordot": lambda T, x: T.tensordot(x, x, dims=([1, 2], [1, 2])),
    "tensordot int": lambda T, x: T.tensordot(x, x.permute(2, 1, 0), dims=1),
    "tensordot 0": lambda T, x: T.tensordot(x[0, 0], x[1, 1], dims=0),
    "cdist": lambda T, x: T.cdist(x[0], x[1]),
    "cdist p=1": lambda T, x: T.cdist(x[0], x[1, :2], p=1),
    "cdist p=inf": lambda T, x: T.cdist(x, x[:1], p=INF),
    "cdist p=3": lambda T, x: T.cdist(x[0], x[1], p=3),
    "cdist p=0.5": lambda T, x: T.cdist(x[0], x[1], p=0.5),
    "cdist p=0": lambda T, x: T.cdist(x[0], x[1], p=0),
    "cdist batches broadcast": lambda T, x: T.cdist(x.reshape(2, 1, 3, 4), x[:, :2].reshape(1, 2, 2, 4)),
    "cdist by products": lambda T, x: T.cdist(x.reshape(6, 4), x[0], compute_mode="use_mm_for_euclid_dist"),
    "cdist many rows": lambda T, x: T.cdist(x.reshape(-1, 1).expand(24, 3) * 0.1, x[0, :, :3]),
    "cdist zero distances": lambda T, x: T.cdist(x[0], x[0]),
    "cdist zero distances p=3": lambda T, x: T.cdist(x[0], x[0], p=3),
    "baddbmm": lambda T, x: T.baddbmm(x[:, :, :3], x[:, :, :2], x[:, :2, :3]),
    "baddbmm beta alpha broadcast": lambda T, x: T.baddbmm(x[0, 0, :3], x[:, :, :2], x[:, :2, :3], beta=0.5, alpha=-2),
    "baddbmm beta=0": lambda T, x: x[:, :, :3].baddbmm(x[:, :, :2], x[:, :2, :3], beta=0),
    "addbmm": lambda T, x: T.addbmm(x[0, :, :3], x[:, :, :2], x[:, :2, :3]),
    "addbmm 0-d input": lambda T, x: T.addbmm(x[0, 0, 0], x[:, :, :2], x[:, :2, :3], beta=2, alpha=0.5),
    "addmv": lambda T, x: T.addmv(x[0, :, 0], x[1, :, :], x[0, 0, :]),
    "addmv method beta alpha": lambda T, x: x[0, :, 0].addmv(x[1], x[0, 0], beta=2, alpha=0.5),
    "addmv 0-d input": lambda T, x: T.addmv(x[0, 0, 0], x[1], x[0, 0]),
    "std_mean": lambda T, x: T.std_mean(x),
    "std_mean dim": lambda T, x: T.std_mean(x, 1),
    "var_mean dims keepdim": lambda T, x: T.var_mean(x, (0, 2), keepdim=True),
    "var_mean unbiased=False": lambda T, x: T.var_mean(x, 1, unbiased=False),
    "std_mean correction=0": lambda T, x: T.std_mean(x, dim=[0, 1], correction=0),
}


@pytest.mark.parametrize("name", list(ON_CUBE))
def test_like_pytorch(torch, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the degrees-of-freedom warning of a var over one entry
        assert_like_pytorch(torch, ON_CUBE[name], CUBE)


ON_EDGES = {
    "cummax": lambda T, x: T.cummax(x, 1),
    "cummax dim 0": lambda T, x: x.cummax(0),
    "cummin": lambda T, x: T.cummin(x, -1),
    "cummin dim 0": lambda T, x: x.cummin(dim=0),
    "logcumsumexp": lambda T, x: T.logcumsumexp(x, 1),
    "logcumsumexp dim 0": lambda T, x: x.logcumsumexp(0),
    "nansum": lambda T, x: T.nansum(x),
    "nansum dim keepdim": lambda T, x: x.nansum(1, keepdim=True),
    "nansum empty dims": lambda T, x: T.nansum(x, ()),
    "nansum dtype": lambda T, x: T.nansum(x, 0, dtype=T.float64),
    "nanmean": lambda T, x: T.nanmean(x),
    "nanmean dim": lambda T, x: x.nanmean(0),
    "aminmax": lambda T, x: T.aminmax(x),
    "aminmax dim keepdim": lambda T, x: x.aminmax(dim=1, keepdim=True),
    "aminmax finite rows": lambda T, x: T.aminmax(x[2:3], dim=0),
    "std_mean": lambda T, x: T.std_mean(x, 1),
    # finite rows: PyTorch's Welford mean over an infinity is inf only when it comes last (symgrad: NaN)
    "var_mean": lambda T, x: T.var_mean(x[:3], 0),
    "rot90": lambda T, x: T.rot90(x, 1, (1, 0)),
    "diff": lambda T, x: T.diff(x, dim=0),
    "repeat_interleave": lambda T, x: T.repeat_interleave(x, T.tensor([0, 1, 2, 1]), dim=1),
}


@pytest.mark.parametrize("name", list(ON_EDGES))
def test_on_ties_zeros_nan_and_infinities(torch, name):
    assert_like_pytorch(torch, ON_EDGES[name], EDGY)


@pytest.mark.parametrize("name", ["cummax", "cummin dim 0", "logcumsumexp", "nanmean dim", "aminmax", "std_mean"])
def test_on_plain_values(torch, name):
    assert_like_pytorch(torch, ON_EDGES[name], PLAIN)


@pytest.mark.parametrize("values", [[1, 3, 3, 2, 3], [1, NAN, 2, NAN, 0], [NAN, 1, NAN], [-INF, -INF, 1], [2, 2, 2],
                                    [-0.0, 0.0, -0.0]])
def test_cummax_and_cummin_report_the_last_tie_and_the_last_nan(torch, values):
    """PyTorch's kernel takes an entry that is >= (<=) the extreme so far, or NaN: of equal values the
    later index, and after a NaN each later NaN's index."""
    values = np.array(values, dtype=np.float32)
    assert_like_pytorch(torch, lambda T, x: T.cummax(x, 0), values)
    assert_like_pytorch(torch, lambda T, x: T.cummin(x, 0), values)


@pytest.mark.parametrize("values", [[-INF, -INF, 0, INF, 1, NAN, 2], [INF, INF], [-INF, INF, -INF], [-INF, 0, 1, -INF],
                                    [0, INF, 1], [100, -100, 100]])
def test_logcumsumexp_on_infinities_and_nan(torch, values):
    """-inf before anything finite stays -inf; after +inf everything is +inf; the gradient is NaN where
    an entry and the running result are both infinite (PyTorch's formula's exp(inf - inf))."""
    assert_like_pytorch(torch, lambda T, x: T.logcumsumexp(x, 0), np.array(values, dtype=np.float32))


@pytest.mark.parametrize("name, fn", [
    ("cummax of ints", lambda T: T.cummax(T.tensor([1, 3, 2, 3]), 0)),
    ("cummin of bools", lambda T: T.cummin(T.tensor([True, False, True]), 0)),
    ("cummax of a 0-d tensor", lambda T: T.cummax(T.tensor(3.0), 0)),
    ("logcumsumexp of a 0-d tensor", lambda T: T.logcumsumexp(T.tensor(2.0), 0)),
    ("logcumsumexp in float64", lambda T: T.logcumsumexp(T.tensor([1.0, 2.0, -3.0], dtype=T.float64), 0)),
    ("nansum of int32", lambda T: T.nansum(T.tensor([1, 2], dtype=T.int32))),
    ("nansum of bools", lambda T: T.nansum(T.tensor([True, True]))),
    ("nanmean of all NaN", lambda T: T.nanmean(T.full((2,), NAN))),
    ("aminmax of bools", lambda T: T.aminmax(T.tensor([True, False]))),
    ("aminmax of ints", lambda T: T.aminmax(T.tensor([1, 5]))),
    ("aminmax of a 0-d tensor", lambda T: T.aminmax(T.tensor(3.0), dim=0)),
    ("diff of bools", lambda T: T.diff(T.tensor([True, False, False, True]))),
    ("diff of int32", lambda T: T.tensor([1, 5, 2], dtype=T.int32).diff()),
    ("diff promoted by prepend", lambda T: T.diff(T.tensor([1, 5, 2]), prepend=T.tensor([1.5]))),
    ("diff n past the size", lambda T: T.diff(T.tensor([[1.0, 4.0, 9.0]]), n=5)),
    ("kron of ints and floats", lambda T: T.kron(T.tensor([1, 2]), T.tensor([[1.0, 2.0], [3.0, 4.0]]))),
    ("kron of bools", lambda T: T.kron(T.tensor([True, False]), T.tensor([True, True]))),
    ("kron of a 0-d tensor", lambda T: T.kron(T.tensor(2.0), T.tensor([1, 2]))),
    ("repeat_interleave counts alone", lambda T: T.repeat_interleave(T.tensor([2, 0, 1]))),
    ("repeat_interleave of a 0-d tensor", lambda T: T.repeat_interleave(T.tensor(3.0), 2)),
    ("repeat_interleave of ints", lambda T: T.repeat_interleave(T.tensor([1, 2]), 2)),
    ("repeat_interleave output_size", lambda T: T.tensor([1.0, 2.0]).repeat_interleave(2, output_size=4)),
    ("tensordot of ints", lambda T: T.tensordot(T.tensor([1, 2]), T.tensor([3, 4]), dims=1)),
    ("addmv of ints", lambda T: T.addmv(T.tensor([1, 2]), T.ones(2, 2, dtype=T.long), T.ones(2, dtype=T.long),
                                        beta=2, alpha=3)),
    ("addbmm beta=0 ignores NaN", lambda T: T.addbmm(T.full((2, 3), NAN), T.ones(4, 2, 5), T.ones(4, 5, 3), beta=0)),
    ("meshgrid of one", lambda T: T.meshgrid(T.tensor([1.0, 2.0]), indexing="ij")),
    ("rot90 of ints", lambda T: T.rot90(T.tensor([[1, 2], [3, 4]]))),
])
def test_dtypes_and_small_cases(torch, name, fn):
    ours, theirs = _outputs(fn(symgrad)), _outputs(fn(torch))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert repr(a.dtype) == repr(b.dtype) and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_return_types_print_as_pytorchs(torch):
    for T in (symgrad, torch):
        assert repr(T.cummax(T.tensor([1.0, 2.0]), 0)).startswith("torch.return_types.cummax(\nvalues=tensor([1., 2.])")
        pair = T.aminmax(T.tensor([1, 5]))
        assert repr(pair) == "torch.return_types.aminmax(\nmin=tensor(1),\nmax=tensor(5))"
        assert pair.min.item() == 1 and pair.max.item() == 5
        values, indices = T.cummin(T.tensor([2.0, 1.0]), 0)
        assert indices.tolist() == [0, 1]
        assert type(T.std_mean(T.tensor([1.0, 2.0]))) is tuple


def test_std_mean_gives_the_mean_pytorch_computes(torch):
    """std_mean's and var_mean's mean is their variance's (float64, about a corrected mean), which is
    not always ``mean()``'s last bit: bit for bit as PyTorch's."""
    values = np.random.RandomState(0).randn(7, 33).astype(np.float32) * 100 + 3
    for dim in (None, 0, 1):
        for name in ("std_mean", "var_mean"):
            ours = getattr(symgrad, name)(symgrad.tensor(values), dim)
            theirs = getattr(torch, name)(torch.tensor(values), dim)
            np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
            np.testing.assert_allclose(ours[0].numpy(), theirs[0].numpy(), rtol=1e-6)


def test_meshgrid_warns_without_indexing_as_pytorch(torch):
    for T in (symgrad, torch):
        a, b = T.tensor([1.0, 2.0, 3.0]), T.tensor([4.0, 5.0])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grids = T.meshgrid(a, b)
        assert [str(w.message).startswith("torch.meshgrid: in an upcoming release, it will be required to pass the "
                                          "indexing argument.") for w in caught] == [True]
        assert [tuple(g.shape) for g in grids] == [(3, 2), (3, 2)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            T.meshgrid(a, b, indexing="ij")
            T.meshgrid(a, b, indexing="xy")


# ------------------------------------------------------------------ aliasing and layout


def test_views_share_storage_and_version(torch):
    """A write through each view reaches its base and the base's writes reach it, as PyTorch's."""
    def run(T):
        seen = []
        b = T.zeros(2, 3)
        v = b.swapaxes(0, 1)
        v[2, 1] = 7
        seen += [b.tolist(), b._version, v._version, v._base is b]
        m = b.movedim(0, 1)
        b[0, 0] = 3
        seen += [m.tolist(), m._base is b]
        u = b.unflatten(1, (3, 1))
        u[1, 2, 0] = 9
        seen += [b.tolist(), u._base is b]
        e = b.expand_as(T.zeros(4, 2, 3))
        b[1, 1] = -1
        seen += [e[3].tolist(), e._base is b]
        w = b.view_as(T.zeros(6))
        w[0] = 11
        seen += [b.tolist(), w._base is b, b._version]
        r = b.reshape_as(T.zeros(3, 2))
        r[0, 0] = 12
        seen += [b.tolist(), r._base is b]
        grids = T.meshgrid(b[0], b[1], indexing="ij")
        seen += [grids[0]._base is b, grids[1]._base is b]
        i = T.repeat_interleave(b, 2)
        seen += [i._base is not None, i._base is b]
        return seen

    assert run(symgrad) == run(torch)


def test_reshape_of_a_transpose_is_a_copy_and_view_refuses_it(torch):
    """Elements a transpose has out of order cannot be viewed flat: reshape (and reshape_as, flatten)
    copies (UnsafeViewBackward0 of a clone), view and view_as raise."""
    def run(T):
        seen = []
        b = T.arange(6.0).reshape(2, 3)
        r = b.t().reshape(6)
        r[0] = 100
        s = b.t().reshape_as(T.zeros(3, 2))
        s[0, 1] = -5
        f = b.t().flatten()
        f[1] = 50
        seen += [b.tolist(), r._base is None, s._base is None, f._base is None]
        x = T.ones(2, 3, requires_grad=True)
        y = x.t().reshape(6)
        seen += [y.grad_fn.name(), y.grad_fn.next_functions[0][0].name(), x.t().reshape_as(T.zeros(6)).grad_fn.name()]
        seen += [x.t().reshape(3, 2).grad_fn.name(), x[:, 1:].reshape(4)._base is None]
        seen += [b[:, :2].reshape(4)._base is None, b[1:].reshape(3)._base is b._base]
        for attempt in (lambda: b.t().view(6), lambda: b.t().view_as(T.zeros(6)), lambda: b[:, ::2].view(4)):
            with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
                attempt()
        seen += [tuple(b.t().view(3, 1, 2).shape), tuple(b.t().unsqueeze(0).view(3, 2).shape)]
        return seen

    assert run(symgrad) == run(torch)


VIEWS = {
    "fresh": lambda x: x,
    "transpose": lambda x: x[0].t(),
    "permute": lambda x: x.permute(2, 0, 1),
    "slice of the first dim": lambda x: x[1:],
    "narrow of the first dim": lambda x: x.narrow(0, 0, 1),
    "narrow of the last dim": lambda x: x.narrow(2, 1, 2),
    "step slice": lambda x: x[..., ::2],
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "expand of size 1": lambda x: x[:1, :1, :1].expand(1, 1, 1),
    "select": lambda x: x[:, 1],
    "first row": lambda x: x[1],
    "transpose of a column": lambda x: x[0, :, :1].t(),
    "swapaxes": lambda x: x.swapaxes(0, 1),
    "movedim back and forth": lambda x: x.movedim(0, 2).movedim(2, 0),
    "detach of a transpose": lambda x: x.transpose(0, 1).detach(),
    "diagonal": lambda x: x[0].diagonal(),
    "split piece": lambda x: x.split(2, 2)[1],
    "unflatten": lambda x: x.unflatten(2, (2, 2)),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_is_contiguous_and_contiguous(torch, name):
    """``contiguous()`` is the tensor itself when its elements are in order, else a copy whose
    writes stay its own (CloneBackward0)."""
    def run(T):
        base = T.arange(24.0).reshape(2, 3, 4)
        view = VIEWS[name](base)
        copy = view.contiguous()
        seen = [view.is_contiguous(), copy is view, copy.is_contiguous(), copy.tolist()]
        if copy is not view:
            copy.view(-1)[0] = -100.0
            seen += [copy._base is None, base.min().item()]
        x = T.arange(24.0).reshape(2, 3, 4).requires_grad_()
        made = VIEWS[name](x * 1).contiguous()
        seen.append(None if made.grad_fn is None else made.grad_fn.name())
        return seen

    assert run(symgrad) == run(torch)


def test_t_in_place(torch):
    """``t_()``: the same tensor, transposed (TBackward1), its version counted; its views and its base
    still share its storage; saved values it changed are refused at backward; a leaf that requires
    grad refuses it, unless under no_grad, and stays a leaf."""
    def run(T):
        seen = []
        a = T.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
        y = a * 2
        v = y[0]
        r = y.t_()
        seen += [r is y, tuple(y.shape), y.grad_fn.name(), y._base is None, v._base is y, y.is_contiguous()]
        y[0, 1] = 100
        seen += [v.grad_fn.name(), v.tolist()]
        (y * T.arange(6.0).reshape(3, 2)).sum().backward()
        seen.append(a.grad.tolist())
        z = T.zeros(2, 3)
        w = z[0]
        z.t_()
        z[1, 0] = 5
        seen += [w.tolist(), z._version, z.is_contiguous(), z.contiguous().is_contiguous()]
        z.t_()
        seen += [z._base is None, z.is_contiguous(), tuple(z.shape), z.tolist()]
        base = T.arange(6.0).reshape(2, 3)
        part = base[:, :2]
        part.t_()
        part[1, 0] = -1
        seen += [base.tolist(), part._base is base._base]
        s = T.tensor(5.0)
        s.t_()
        seen += [s._version, tuple(s.shape)]
        leaf = T.ones(2, 3, requires_grad=True)
        with T.no_grad():
            leaf.t_()
        seen += [tuple(leaf.shape), leaf.is_leaf, leaf.requires_grad, leaf._version, leaf.grad_fn]
        (leaf * T.arange(6.0).reshape(3, 2)).sum().backward()
        seen.append(leaf.grad.tolist())
        for refused in (lambda: T.ones(2, 3, requires_grad=True).t_(), lambda: T.zeros(2, 3, 4).t_(),
                        lambda: T.ones(2, 3, requires_grad=True)[:1].t_()):
            with pytest.raises(RuntimeError) as caught:
                refused()
            seen.append(str(caught.value))
        b = T.ones(2, 3, requires_grad=True)
        saved = (b * 1).exp()
        saved.t_()
        with pytest.raises(RuntimeError) as caught:
            saved.sum().backward()
        seen.append(str(caught.value).split(" is at version")[0])
        return seen

    assert run(symgrad) == run(torch)


# ------------------------------------------------------------------ errors

ERRORS = {
    "movedim lengths": lambda T: T.movedim(T.zeros(2, 3, 4), (0,), (1, 2)),
    "movedim int and tuple": lambda T: T.movedim(T.zeros(2, 3, 4), 0, (1, 2)),
    "movedim repeated source": lambda T: T.zeros(2, 3, 4).movedim((0, 0), (1, 2)),
    "movedim repeated destination": lambda T: T.zeros(2, 3, 4).movedim((0, 1), (1, 1)),
    "movedim out of range": lambda T: T.zeros(2, 3).movedim(2, 0),
    "swapaxes out of range": lambda T: T.zeros(2, 3).swapaxes(0, 2),
    "unflatten sizes": lambda T: T.zeros(2, 3, 4).unflatten(2, (3,)),
    "unflatten inferred": lambda T: T.zeros(2, 3, 4).unflatten(2, (-1, 5)),
    "unflatten empty": lambda T: T.zeros(2, 3, 4).unflatten(2, ()),
    "unflatten 0-d": lambda T: T.tensor(1.0).unflatten(0, (1,)),
    "view_as size": lambda T: T.zeros(2, 3).view_as(T.zeros(5)),
    "rot90 dims": lambda T: T.rot90(T.zeros(2, 3), 1, [0]),
    "rot90 same dims": lambda T: T.rot90(T.zeros(2, 3), 1, (0, -2)),
    "rot90 1-d": lambda T: T.rot90(T.zeros(3)),
    "rot90 out of range": lambda T: T.rot90(T.zeros(2, 3), 1, (0, 2)),
    "diff 0-d": lambda T: T.diff(T.tensor(3.0)),
    "diff negative n": lambda T: T.diff(T.zeros(2, 3), n=-1),
    "diff prepend rank": lambda T: T.diff(T.zeros(2, 3), prepend=T.zeros(3)),
    "diff prepend shape": lambda T: T.diff(T.zeros(2, 3), prepend=T.zeros(3, 1)),
    "diff prepend number": lambda T: T.diff(T.zeros(2, 3), prepend=1.0),
    "diff dim": lambda T: T.diff(T.zeros(2, 3), dim=2),
    "meshgrid 2-d": lambda T: T.meshgrid(T.zeros(3, 1), T.zeros(2), indexing="ij"),
    "meshgrid dtypes": lambda T: T.meshgrid(T.zeros(3), T.zeros(2, dtype=T.int32), indexing="ij"),
    "meshgrid indexing": lambda T: T.meshgrid(T.zeros(3), T.zeros(2), indexing="ab"),
    "meshgrid none": lambda T: T.meshgrid(indexing="ij"),
    "cartesian_prod 2-d": lambda T: T.cartesian_prod(T.zeros(3, 1), T.zeros(2)),
    "repeat_interleave counts": lambda T: T.repeat_interleave(T.zeros(2, 2), T.tensor([1, 2, 3]), dim=0),
    "repeat_interleave negative": lambda T: T.repeat_interleave(T.zeros(2, 2), -1),
    "repeat_interleave negative count": lambda T: T.repeat_interleave(T.zeros(2, 2), T.tensor([1, -2]), dim=0),
    "repeat_interleave float counts": lambda T: T.repeat_interleave(T.zeros(2, 2), T.tensor([1.0, 2.0]), dim=0),
    "repeat_interleave 2-d counts": lambda T: T.repeat_interleave(T.zeros(2, 2), T.tensor([[1, 2]]), dim=0),
    "repeat_interleave 2-d counts alone": lambda T: T.repeat_interleave(T.tensor([[1, 2]])),
    "std_mean of ints": lambda T: T.std_mean(T.tensor([1, 2])),
    "logcumsumexp of ints": lambda T: T.logcumsumexp(T.tensor([1, 2]), 0),
    "cummax dim": lambda T: T.cummax(T.zeros(2, 3), 2),
    "nanmean of ints": lambda T: T.nanmean(T.tensor([1, 2])),
    "aminmax empty": lambda T: T.aminmax(T.zeros(0)),
    "aminmax empty dim": lambda T: T.aminmax(T.zeros(2, 0), dim=1),
    "aminmax tuple dim": lambda T: T.aminmax(T.zeros(2, 3), dim=(0, 1)),
    "baddbmm inner sizes": lambda T: T.baddbmm(T.zeros(2, 3), T.zeros(4, 2, 5), T.zeros(4, 4, 3)),
    "baddbmm input": lambda T: T.baddbmm(T.zeros(4, 2), T.zeros(4, 2, 5), T.zeros(4, 5, 3)),
    "baddbmm 2-d": lambda T: T.baddbmm(T.zeros(2, 3), T.zeros(2, 5), T.zeros(5, 3)),
    "baddbmm dtypes": lambda T: T.baddbmm(T.zeros(2, 3, dtype=T.float64), T.zeros(4, 2, 5), T.zeros(4, 5, 3)),
    "addbmm batches": lambda T: T.addbmm(T.zeros(2, 3), T.zeros(4, 2, 5), T.zeros(3, 5, 3)),
    "addmv sizes": lambda T: T.addmv(T.zeros(3), T.zeros(3, 2), T.zeros(3)),
    "addmv input": lambda T: T.addmv(T.zeros(2), T.zeros(3, 2), T.zeros(2)),
    "addmv dtypes": lambda T: T.addmv(T.zeros(3), T.zeros(3, 2, dtype=T.float64), T.zeros(2)),
    "tensordot sizes": lambda T: T.tensordot(T.zeros(2, 3, 4), T.zeros(4, 3, 5), dims=([1], [0])),
    "tensordot lengths": lambda T: T.tensordot(T.zeros(2, 3, 4), T.zeros(4, 3, 5), dims=([1, 2], [1])),
    "tensordot negative": lambda T: T.tensordot(T.zeros(2, 3, 4), T.zeros(4, 3, 5), dims=-1),
    "tensordot int sizes": lambda T: T.tensordot(T.zeros(2, 3, 4), T.zeros(4, 3, 5), dims=2),
    "tensordot dtypes": lambda T: T.tensordot(T.zeros(2, 3, 4), T.zeros(4, 3, 5, dtype=T.float64), dims=1),
    "tensordot repeated": lambda T: T.tensordot(T.zeros(2, 3, 4), T.zeros(4, 3, 5), dims=([1, 1], [1, 1])),
    "tensordot too many": lambda T: T.tensordot(T.zeros(2, 3, 4), T.zeros(4, 3, 5), dims=4),
    "cdist columns": lambda T: T.cdist(T.zeros(3, 4), T.zeros(5, 3)),
    "cdist 1-d": lambda T: T.cdist(T.zeros(4), T.zeros(5, 4)),
    "cdist negative p": lambda T: T.cdist(T.zeros(3, 4), T.zeros(5, 4), p=-1),
    "cdist ints": lambda T: T.cdist(T.zeros(3, 4, dtype=T.int32), T.zeros(5, 4, dtype=T.int32)),
    "cdist dtypes": lambda T: T.cdist(T.zeros(3, 4), T.zeros(5, 4, dtype=T.float64)),
}


PREFIXES = {"meshgrid 2-d": "but got", "movedim int and tuple": "but expected one of:"}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_as_pytorch(torch, name):
    assert_same_error(torch, ERRORS[name], PREFIXES.get(name))


def test_select_is_an_index_of_one_dim_and_a_view(torch):
    def run(T):
        x = T.arange(12.0).reshape(3, 4).requires_grad_()
        y = x * 1
        column, row = T.select(y, 1, -1), y.select(0, 2)
        (column.sum() + (row * 2).sum()).backward()
        errors = []
        for bad in (lambda: y.select(1, 4), lambda: y.select(1, -5), lambda: T.tensor(1.0).select(0, 0),
                    lambda: y.select(2, 0)):
            with pytest.raises(IndexError) as error:
                bad()
            errors.append(str(error.value))
        return column.tolist(), row.tolist(), type(row.grad_fn).__name__, row._base is y, x.grad.tolist(), errors

    assert run(symgrad) == run(torch)


@pytest.mark.parametrize("name", ["addmm", "addmv", "baddbmm", "addbmm", "addr"])
def test_beta_zero_leaves_input_out_but_sends_it_zero_times_the_gradient(torch, name):
    """PyTorch's kernels ignore input's values at beta = 0 (its NaN too), and its backward still sends
    input ``0 * g``: NaN for an infinite cotangent (was: input left out of the graph, gradient 0)."""
    shapes = {"addmm": ((1, 2), (1, 3), (3, 2)), "addmv": ((2,), (2, 3), (3,)), "baddbmm": ((1, 2), (2, 1, 3), (2, 3, 2)),
              "addbmm": ((1, 2), (2, 1, 3), (2, 3, 2)), "addr": ((2, 3), (2,), (3,))}[name]

    def run(T, cotangent):
        base = T.ones(*shapes[0], requires_grad=True)
        out = getattr(T, name)(base * float("nan"), T.ones(*shapes[1]), T.ones(*shapes[2]), beta=0)
        (out * cotangent).sum().backward()
        return out.detach().numpy(), base.grad.numpy()

    for cotangent in (-math.inf, 2.0):
        for ours, theirs in zip(run(symgrad, cotangent), run(torch, cotangent)):
            np.testing.assert_array_equal(ours, theirs)
