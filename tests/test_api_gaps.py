"""Top-level and Tensor names ordinary PyTorch code reaches for, against the installed PyTorch on the
same inputs: dtype questions (finfo, iinfo, promotion), tensor questions, aliases and in-place
spellings, layout changes in place, unfold, sum_to_size, take_along_dim, unique_consecutive,
unravel_index, constructors, print options, runtime settings, windows, histogram, gradient and the
seeded log_normal_/geometric_/cauchy_ draws: values, dtypes, grad_fn names, gradients and errors."""
import math
import warnings

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch
from test_nn_functional import check, normal

DTYPES = ("bool", "int32", "int64", "float16", "float32", "float64")


def both(torch, name):
    return getattr(torch, name), getattr(symgrad, name)


# ----------------------------------------------------------------------------- dtype questions


def test_finfo_iinfo_and_promotion_are_pytorchs(torch):
    for name in ("float16", "float32", "float64"):
        theirs, ours = torch.finfo(getattr(torch, name)), symgrad.finfo(getattr(symgrad, name))
        for attribute in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
            assert getattr(ours, attribute) == getattr(theirs, attribute), (name, attribute)
        assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
    assert repr(symgrad.finfo()) == repr(torch.finfo()) and symgrad.finfo() == symgrad.finfo(symgrad.float32)
    for name in ("int32", "int64"):
        theirs, ours = torch.iinfo(getattr(torch, name)), symgrad.iinfo(getattr(symgrad, name))
        assert (ours.bits, ours.max, ours.min, ours.dtype, repr(ours)) == (
            theirs.bits, theirs.max, theirs.min, theirs.dtype, repr(theirs))
    for make in (lambda T: T.finfo(T.int32), lambda T: T.iinfo(T.float32), lambda T: T.iinfo(T.bool),
                 lambda T: T.finfo(3), lambda T: T.promote_types(1, T.int32), lambda T: T.can_cast(T.int32, 2)):
        assert_raises_as_pytorch(make, torch, symgrad)
    for a in DTYPES:
        for b in DTYPES:
            ta, tb, sa, sb = getattr(torch, a), getattr(torch, b), getattr(symgrad, a), getattr(symgrad, b)
            assert repr(symgrad.promote_types(sa, sb)) == repr(torch.promote_types(ta, tb)), (a, b)
            assert symgrad.can_cast(sa, sb) == torch.can_cast(ta, tb), (a, b)


@pytest.mark.parametrize("make", [
    lambda T: (2, 3.0), lambda T: (True, 2), lambda T: (T.tensor(1, dtype=T.int32), 2.0),
    lambda T: (T.ones(2, dtype=T.int32), T.tensor(2)), lambda T: (T.tensor([1], dtype=T.int32), T.tensor(2.0, dtype=T.float64)),
    lambda T: (2, T.ones(1, dtype=T.float16)), lambda T: (T.ones(2, dtype=T.bool), 1)])
def test_result_type_is_pytorchs(torch, make):
    assert repr(symgrad.result_type(*make(symgrad))) == repr(torch.result_type(*make(torch)))


def test_typename_is_pytorchs(torch):
    for make in (lambda T: T.ones(2), lambda T: T.ones(2, dtype=T.int32), lambda T: 3, lambda T: None,
                 lambda T: T.ones(2).requires_grad_()):
        assert symgrad.typename(make(symgrad)) == torch.typename(make(torch))
    name = symgrad.typename(symgrad.nn.Linear(2, 2))  # (symgrad's module path, PyTorch's torch.nn.modules.linear)
    assert name.startswith("symgrad.nn.") and name.endswith(".Linear") and name == symgrad.typename(symgrad.nn.Linear)


# ----------------------------------------------------------------------------- tensor questions


def test_tensor_questions_are_pytorchs(torch):
    made = {T: (T.ones(2, 3), T.ones(2, dtype=T.int64), T.ones(1, dtype=T.bool)) for T in (torch, symgrad)}
    for ask in (lambda T, x, i, b: T.is_floating_point(x), lambda T, x, i, b: T.is_floating_point(i),
                lambda T, x, i, b: T.is_complex(x), lambda T, x, i, b: x.is_complex(),
                lambda T, x, i, b: T.is_signed(b), lambda T, x, i, b: i.is_signed(),
                lambda T, x, i, b: T.is_nonzero(T.tensor([0.0])), lambda T, x, i, b: T.tensor(float("nan")).is_nonzero(),
                lambda T, x, i, b: T.is_same_size(x, T.ones(3, 2)), lambda T, x, i, b: x.is_same_size(T.ones(2, 3)),
                lambda T, x, i, b: T.is_inference(x), lambda T, x, i, b: x.ndimension(), lambda T, x, i, b: x.nbytes,
                lambda T, x, i, b: T.ones(3, dtype=T.float16).nbytes, lambda T, x, i, b: i.itemsize,
                lambda T, x, i, b: x.is_cpu, lambda T, x, i, b: (x.is_conj(), x.is_neg(), x.get_device()),
                lambda T, x, i, b: (x.conj() is x, x.resolve_conj() is x, x.resolve_neg() is x),
                lambda T, x, i, b: (T.pi, T.e, T.inf, T.newaxis)):
        assert ask(symgrad, *made[symgrad]) == ask(torch, *made[torch])
    for make in (lambda T: T.is_nonzero(T.ones(2)), lambda T: T.is_nonzero(T.ones(0)), lambda T: T.ones(2).is_nonzero(),
                 lambda T: T.is_same_size(T.ones(1), 1), lambda T: T.is_floating_point(1), lambda T: T.is_signed(1),
                 lambda T: T.ones(3).H, lambda T: T.ones(3).mH, lambda T: T.ones(3).adjoint(),
                 lambda T: T.ones(2, 2, 2).H, lambda T: T.adjoint(T.ones(3))):
        assert_raises_as_pytorch(make, torch, symgrad)


def test_conjugate_transposes_are_transposes(torch):
    check(torch, lambda T, x, y: (x.H, x.mH, x.adjoint(), T.adjoint(y), y.mH), [normal(2, 3), normal(4, 2, 3)])
    with pytest.warns(UserWarning, match="Tensor.H is deprecated on 0-D tensors"):
        assert symgrad.tensor(2.0).H.item() == 2.0


# ----------------------------------------------------------------------------- aliases


def test_aliases_are_their_ops(torch):
    a, b = np.array([1.0, 2.0, 3.0, 2.0], np.float32), np.array([2.0, 2.0, 1.0, 5.0], np.float32)
    check(torch, lambda T, x, y: (T.multiply(x, y), x.multiply(y), T.subtract(x, y, alpha=2), x.subtract(y),
                                  T.greater(x, y), x.greater_equal(y), T.less(x, 2.0), x.less_equal(y),
                                  T.not_equal(x, y), x.fliplr() if x.ndim > 1 else T.flipud(x)), [a, b])
    for name in ("multiply_", "subtract_", "greater_", "greater_equal_", "less_", "less_equal_", "not_equal_"):
        results = []
        for T in (torch, symgrad):
            x = T.tensor(a)
            out = getattr(x, name)(T.tensor(b))
            results.append((out is x, x.numpy().tolist(), repr(x.dtype)))
        assert results[0] == results[1], name


def test_flips_and_take_along_dim_are_pytorchs(torch):
    index = np.array([[0, 1, 1]])
    check(torch, lambda T, x, i: (T.fliplr(x), x.flipud(), T.take_along_dim(x, i, 0), x.take_along_dim(i.t()[:2], 1),
                                  T.take_along_dim(x, T.tensor([5, 0])), T.take_along_dim(x, i[:, :1], 1)),
          [normal(2, 3), index])
    for make in (lambda T: T.fliplr(T.ones(3)), lambda T: T.flipud(T.ones(())),
                 lambda T: T.take_along_dim(T.ones(2, 3), T.tensor([[0.0]]), 1),
                 lambda T: T.take_along_dim(T.ones(2, 3), T.tensor([[0]]), 5),
                 lambda T: T.take_along_dim(T.ones(2, 3), T.tensor([[[0]]]), 1)):
        assert_raises_as_pytorch(make, torch, symgrad)


def test_sum_to_size_is_pytorchs(torch):
    check(torch, lambda T, x: (x.sum_to_size(1, 3), x.sum_to_size(3), x.sum_to_size(T.Size([2, 1])),
                               x.sum_to_size((1, 1))), [normal(2, 3)])
    x = symgrad.ones(2, 3, requires_grad=True)
    assert x.sum_to_size(2, 3) is x
    for size in ((3, 3), (2,), (1, 2, 3)):
        assert_raises_as_pytorch(lambda T: T.ones(2, 3).sum_to_size(*size), torch, symgrad)


def test_unique_consecutive_and_unravel_index_are_pytorchs(torch):
    values = [1.0, 1.0, 2.0, 2.0, 3.0, 1.0, 1.0, float("nan"), float("nan"), 2.0]

    def found(T):
        x = T.tensor(values, requires_grad=True)
        return (T.unique_consecutive(x, return_inverse=True, return_counts=True), x.unique_consecutive(),
                T.unique_consecutive(T.tensor([[1, 1], [2, 2]]), return_inverse=True),
                T.unique_consecutive(T.tensor(3)), T.unique_consecutive(T.tensor([], dtype=T.int32), return_counts=True),
                T.unravel_index(T.tensor([[4, 1]]), (2, 3)), T.unravel_index(T.tensor(4), (2, 3)),
                T.unravel_index(T.tensor([7, -7]), (2, 3)), T.unravel_index(T.tensor([3]), 4),
                T.unravel_index(T.tensor([3], dtype=T.int32), T.Size([2, 2])), T.unravel_index(T.tensor([3]), ()))
    ours = found(symgrad)
    _same_tensors(ours, found(torch))
    assert type(ours[0][0].grad_fn).__name__ == "UniqueConsecutiveBackward0"
    leaves = {T: T.ones(2, requires_grad=True) for T in (torch, symgrad)}  # (held: symgrad runs no backward
    # that reaches no live leaf)
    assert_raises_as_pytorch(lambda T: T.unique_consecutive(leaves[T]).sum().backward(), torch, symgrad)
    for make in (lambda T: T.unravel_index(T.tensor([1.0]), (2, 3)), lambda T: T.unravel_index(T.tensor([True]), (2,)),
                 lambda T: T.unravel_index(T.tensor([3]), (2.0, 2)), lambda T: T.unravel_index(T.tensor([3]), (2, -3)),
                 lambda T: T.unravel_index(T.tensor([3]), (0, 2))):
        assert_raises_as_pytorch(make, torch, symgrad)


def _same_tensors(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same_tensors(o, t)
        return
    assert repr(ours.dtype) == repr(theirs.dtype) and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


# ----------------------------------------------------------------------------- in place


LAYOUTS = {
    "squeeze_": ((2, 1, 3), lambda x: x.squeeze_()), "squeeze_dim": ((2, 1, 3), lambda x: x.squeeze_(1)),
    "squeeze_dims": ((2, 1, 3), lambda x: x.squeeze_((0, 1))), "unsqueeze_": ((2, 1, 3), lambda x: x.unsqueeze_(-1)),
    "transpose_": ((2, 1, 3), lambda x: x.transpose_(0, 2)), "swapaxes_": ((2, 1, 3), lambda x: x.swapaxes_(2, 0)),
    "swapdims_": ((2, 1, 3), lambda x: x.swapdims_(0, -1)), "t_": ((2, 3), lambda x: x.t_()),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_layout_changes_in_place_are_pytorchs(torch, name):
    """The tensor keeps its identity and storage (a view made before sees later writes), its version
    counts the change, its grad_fn and gradient are PyTorch's; a leaf that requires grad refuses."""
    shape, change = LAYOUTS[name]
    seen = []
    for T in (torch, symgrad):
        leaf = T.tensor(np.arange(6, dtype=np.float32).reshape(shape), requires_grad=True)
        x = leaf * 1
        flat = x.view(-1)
        out = change(x)
        facts = (out is x, tuple(x.shape), type(x.grad_fn).__name__, x._version, x.is_contiguous())
        x.mul_(2)
        (x * T.arange(6.0).reshape(x.shape)).sum().backward()
        seen.append((facts, flat.detach().numpy().tolist(), leaf.grad.numpy().tolist()))
    assert seen[0] == seen[1]
    assert_raises_as_pytorch(lambda T: change(T.ones(shape, requires_grad=True)), torch, symgrad)


IN_PLACE = {
    "tril_": lambda x: x.tril_(), "triu_": lambda x: x.triu_(1), "cumsum_": lambda x: x.cumsum_(0),
    "cumprod_": lambda x: x.cumprod_(1), "fill_diagonal_": lambda x: x.fill_diagonal_(5.0),
    "pow_": lambda x: x.pow_(2), "clip_": lambda x: x.clip_(-0.5, 0.5),
}


def test_in_place_methods_are_pytorchs(torch):
    def fn(T, leaf):
        found = []
        for change in IN_PLACE.values():
            x = leaf * 1
            out = change(x)
            assert out is x and x._version == 1
            found.append(x)
        return tuple(found)
    check(torch, fn, [normal(3, 3)])


@pytest.mark.parametrize("case", [((7, 3), True), ((7, 3), False), ((3, 7), True), ((2, 2, 2), False),
                                  ((4, 3), "transposed")])
def test_fill_diagonal_is_pytorchs(torch, case):
    shape, wrap = case
    results = []
    for T in (torch, symgrad):
        x = T.zeros(shape[::-1]).t() if wrap == "transposed" else T.zeros(shape)
        results.append(x.fill_diagonal_(5, wrap=wrap is True).numpy())
    np.testing.assert_array_equal(results[1], results[0])
    assert symgrad.ones(2, 2, dtype=symgrad.int64).fill_diagonal_(1.5).tolist() == [[1, 1], [1, 1]]
    for make in (lambda T: T.ones(3).fill_diagonal_(1), lambda T: T.ones(2, 3, 2).fill_diagonal_(1),
                 lambda T: T.ones(2, 2, requires_grad=True).fill_diagonal_(1)):
        assert_raises_as_pytorch(make, torch, symgrad)


def test_in_place_spellings_are_pytorchs(torch):
    """``torch.abs_(x)`` is ``x.abs_()``; ``F.elu_(x)`` is ``F.elu(x, inplace=True)``."""
    a = np.array([-1.5, -0.25, 0.5, 2.0], np.float32)
    for name, args in (("abs_", ()), ("relu_", ()), ("sigmoid_", ()), ("clamp_", (-1.0, 1.0)), ("fill_", (3.0,)),
                       ("zero_", ()), ("exp_", ()), ("square_", ()), ("neg_", ()), ("selu_", ())):
        results = []
        for T in (torch, symgrad):
            x = T.tensor(a)
            out = getattr(T, name)(x, *args)
            results.append((out is x, x.numpy()))
        assert results[0][0] == results[1][0], name
        np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-6, err_msg=name)
    for name, args in (("relu_", ()), ("elu_", (0.5,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)),
                       ("selu_", ()), ("celu_", (2.0,))):
        def fn(T, leaf):
            x = leaf * 1
            out = getattr(T.nn.functional, name)(x, *args)
            assert out is x and x._version == 1
            return x
        # symgrad names the in-place activations' backward as the out-of-place ones (EluBackward0 for
        # PyTorch's EluBackward1): values and gradients are compared here
        ours, theirs = fn(symgrad, symgrad.tensor(a)), fn(torch, torch.tensor(a))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(symgrad.celu(symgrad.tensor(a), 2.0).numpy(), torch.celu(torch.tensor(a), 2.0).numpy(),
                               rtol=1e-6)


# ----------------------------------------------------------------------------- unfold


def test_unfold_is_a_view_with_pytorchs_values_and_gradient(torch):
    check(torch, lambda T, x, y: (x.unfold(1, 2, 1), x.unfold(0, 2, 1), y.unfold(0, 3, 2), y.unfold(0, 0, 1),
                                  T.tensor(2.0).unfold(0, 1, 1)), [normal(3, 4), normal(8)])
    results = []
    for T in (torch, symgrad):
        x, y = T.arange(8.0), T.arange(8.0)
        u = x.unfold(0, 3, 2)
        facts = (u._base is x, u.is_contiguous(), tuple(u.shape))
        u.fill_(1.0)  # overlapping windows: every copy of an element gets the same value
        y.unfold(0, 2, 3).mul_(10)
        results.append((facts, x.tolist(), y.tolist()))
    assert results[0] == results[1]
    for make in (lambda T: T.ones(3).unfold(0, 4, 1), lambda T: T.ones(3).unfold(0, 2, 0),
                 lambda T: T.ones(3).unfold(1, 2, 1), lambda T: T.ones(3).unfold(0, -1, 1),
                 lambda T: T.tensor(2.0).unfold(0, 2, 1)):
        assert_raises_as_pytorch(make, torch, symgrad)


# ----------------------------------------------------------------------------- constructors


def test_constructor_aliases_are_pytorchs(torch):
    for args, kwargs in (((0, 1, 0.25), {}), ((1, 4), {}), ((1, 4), {"dtype": "int64"}), ((0, 1, 0.3), {}),
                         ((0, 1, 0.1), {}), ((4, 1, -1), {})):
        outs = []
        for T in (torch, symgrad):
            options = {k: getattr(T, v) for k, v in kwargs.items()}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                outs.append(T.range(*args, **options))
            assert any("torch.range is deprecated" in str(c.message) for c in caught)
        _same_tensors(outs[1], outs[0])
    for make in (lambda T: T.scalar_tensor(3), lambda T: T.scalar_tensor(True), lambda T: T.scalar_tensor(2, dtype=T.int64),
                 lambda T: T.asarray([1, 2]), lambda T: T.asarray([1.0, 2], dtype=T.float64), lambda T: T.asarray(3.5),
                 lambda T: T.asarray(np.arange(3)), lambda T: T.asarray(np.arange(3.0))):
        _same_tensors(make(symgrad), make(torch))
    assert symgrad.scalar_tensor(1.5, requires_grad=True).requires_grad
    t = symgrad.ones(2, requires_grad=True)
    assert symgrad.asarray(t) is t
    assert type(symgrad.asarray(t, dtype=symgrad.float64).grad_fn).__name__ == "ToCopyBackward0"
    copied = symgrad.asarray(t, copy=True)
    assert copied is not t and type(copied.grad_fn).__name__ == "CloneBackward0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for make in (lambda T: T.range(0, 1, 0), lambda T: T.range(1, 0), lambda T: T.scalar_tensor(T.ones(2)),
                     lambda T: T.asarray(T.ones(2), dtype=T.int64, copy=False), lambda T: T.range(3)):
            assert_raises_as_pytorch(make, torch, symgrad)


# ----------------------------------------------------------------------------- print options


PRINTED = [normal(4, 5), normal(30) * 1e5, np.array([1e-6, 2.5, 3], np.float32),
           np.arange(2000, dtype=np.float32).reshape(20, 100), np.array([1.0, 2.0, np.nan, np.inf], np.float32),
           np.arange(12).reshape(3, 4), np.array([123456.7, 1.0], np.float32)]


@pytest.mark.parametrize("options", [dict(precision=2), dict(precision=8), dict(threshold=5),
                                     dict(edgeitems=1, threshold=10), dict(linewidth=40), dict(profile="short"),
                                     dict(profile="full"), dict(sci_mode=True), dict(sci_mode=False),
                                     dict(profile="short", precision=6, sci_mode=True)])
def test_set_printoptions_prints_as_pytorch(torch, options):
    try:
        torch.set_printoptions(**options)
        symgrad.set_printoptions(**options)
        for values in PRINTED:
            grad = values.dtype.kind == "f"
            assert str(symgrad.tensor(values, requires_grad=grad)) == str(torch.tensor(values, requires_grad=grad))
    finally:
        torch.set_printoptions(profile="default")
        symgrad.set_printoptions(profile="default")
    assert str(symgrad.tensor(PRINTED[0])) == str(torch.tensor(PRINTED[0]))


def test_runtime_settings_are_remembered(torch):
    assert symgrad.get_num_threads() >= 1 and symgrad.get_num_interop_threads() >= 1
    threads = symgrad.get_num_threads()
    try:
        symgrad.set_num_threads(3)
        assert symgrad.get_num_threads() == 3
    finally:
        symgrad.set_num_threads(threads)
    assert symgrad.get_float32_matmul_precision() == "highest"
    try:
        symgrad.set_float32_matmul_precision("medium")
        assert symgrad.get_float32_matmul_precision() == "medium"
        with pytest.warns(UserWarning, match="bogus is not one of"):
            symgrad.set_float32_matmul_precision("bogus")
        assert symgrad.get_float32_matmul_precision() == "medium"
    finally:
        symgrad.set_float32_matmul_precision("highest")
    assert symgrad.set_flush_denormal(True) is False  # (PyTorch: True where the CPU can flush)
    for make in (lambda T: T.set_num_threads(0), lambda T: T.set_num_threads(1.5), lambda T: T.set_flush_denormal(1),
                 lambda T: T.set_num_interop_threads(0), lambda T: T.set_float32_matmul_precision(3)):
        assert_raises_as_pytorch(make, torch, symgrad)


# ----------------------------------------------------------------------------- signal helpers


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_windows_are_pytorchs(torch, name):
    theirs, ours = both(torch, name)
    for n in (0, 1, 2, 5, 16):
        for periodic in (True, False):
            for dtype in ("float16", "float32", "float64"):
                a = theirs(n, periodic, dtype=getattr(torch, dtype)).numpy()
                b = ours(n, periodic, dtype=getattr(symgrad, dtype)).numpy()
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_allclose(b, a, rtol=1e-6, atol=2e-7 if dtype != "float16" else 0)
    w = ours(4, requires_grad=True)
    assert w.requires_grad and w.is_leaf and w.dtype is symgrad.float32
    for make in (lambda T: getattr(T, name)(5, dtype=T.int64), lambda T: getattr(T, name)(-1),
                 lambda T: getattr(T, name)(2.5)):
        assert_raises_as_pytorch(make, torch, symgrad)
    if name == "hamming_window":
        np.testing.assert_allclose(ours(5, False, 0.6, 0.3).numpy(), theirs(5, False, 0.6, 0.3).numpy(), rtol=1e-6)
    if name == "kaiser_window":
        np.testing.assert_allclose(ours(6, False, 5.0).numpy(), theirs(6, False, 5.0).numpy(), rtol=1e-6)


SAMPLES = normal(50)


def test_histogram_is_pytorchs(torch):
    for make in (lambda T: T.histogram(T.tensor([1.0, 2, 1, 2.5, 4]), bins=4, range=(0.0, 3.0)),
                 lambda T: T.histogram(T.tensor([1.0, 2, 1]), bins=T.tensor([0.0, 1, 2.5, 3]),
                                       weight=T.tensor([1.0, 2.0, 4.0]), density=True),
                 lambda T: T.tensor([1.0, 2]).histogram(2), lambda T: T.histogram(T.tensor([2.0, 2.0]), 2),
                 lambda T: T.histogram(T.tensor([]), 2),
                 lambda T: T.histogram(T.tensor([1.0, float("nan"), 3.0]), 2, range=(0.0, 4.0)),
                 lambda T: T.histogram(T.tensor([[1.0, 2], [3, 4]]), 2, weight=T.tensor([[1.0, 2], [3, 4]]),
                                       density=True),
                 lambda T: T.histogram(T.tensor(SAMPLES, dtype=T.float64), 7)):
        ours, theirs = make(symgrad), make(torch)
        assert repr(ours) == repr(theirs)
        _same_tensors(tuple(ours), tuple(theirs))
    for make in (lambda T: T.histogram(T.tensor([1.0]), 0), lambda T: T.histogram(T.tensor([1.0]), 2, range=(2.0, 1.0)),
                 lambda T: T.histogram(T.tensor([1]), 2), lambda T: T.histogram(T.tensor([1.0, 2]), 2, weight=T.tensor([1.0])),
                 lambda T: T.histogram(T.tensor([1.0, float("inf")]), 2),
                 lambda T: T.histogram(T.tensor([1.0, float("nan")]), 2),
                 lambda T: T.histogram(T.tensor([1.0, 2]), T.tensor([1, 2]))):
        assert_raises_as_pytorch(make, torch, symgrad)


GRADIENTS = [dict(spacing=[2.0, 0.3], edge_order=2), dict(spacing="coordinates"),
             dict(spacing="coordinates", edge_order=2, dim=(-1,))]


def test_gradient_is_pytorchs(torch):
    """Every spacing and edge order at once (one program)."""
    def fn(T, x, c0, c1):
        found = ()
        for options in GRADIENTS:
            kw = dict(options)
            if kw.get("spacing") == "coordinates":
                kw["spacing"] = (c1.detach(),) if "dim" in kw else (c0.detach(), c1.detach())
            found += T.gradient(x, **kw)
        return found
    check(torch, fn, [normal(4, 5), np.sort(normal(4)), np.sort(normal(5))], rtol=1e-5, atol=1e-5)
    for make in (lambda T: T.gradient(T.arange(4)), lambda T: T.gradient(T.arange(6).reshape(2, 3), spacing=2, dim=1)):
        _same_tensors(make(symgrad), make(torch))
    for make in (lambda T: T.gradient(T.ones(1)), lambda T: T.gradient(T.ones(2), edge_order=2),
                 lambda T: T.gradient(T.ones(3), edge_order=3), lambda T: T.gradient(T.ones(3, 4), spacing=[1.0, 2, 3]),
                 lambda T: T.gradient(T.ones(3, 4), dim=(0, 0)), lambda T: T.gradient(T.ones(3, 4), spacing=[1.0, 2.0], dim=0),
                 lambda T: T.gradient(T.ones(3, 4), spacing=(T.ones(3, 1),), dim=0),
                 lambda T: T.gradient(T.ones(3, 4), dim=2)):
        assert_raises_as_pytorch(make, torch, symgrad)


# ----------------------------------------------------------------------------- seeded draws


@pytest.mark.parametrize("draw", [("cauchy_", (1.5, 2.0)), ("cauchy_", ()), ("log_normal_", (0.5, 0.7)),
                                  ("log_normal_", ()), ("geometric_", (0.3,))])
def test_seeded_fills_are_pytorchs_numbers(torch, draw):
    name, args = draw
    kinds = ("float32", "float64") + (("int64", "int32") if name == "geometric_" else ())
    for kind in kinds:
        torch.manual_seed(3)
        theirs = getattr(torch.empty(5, 7, dtype=getattr(torch, kind)), name)(*args)
        after_theirs = torch.randn(3)
        symgrad.manual_seed(3)
        ours = getattr(symgrad.empty(5, 7, dtype=getattr(symgrad, kind)), name)(*args)
        after_ours = symgrad.randn(3)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        np.testing.assert_array_equal(after_ours.numpy(), after_theirs.numpy())  # the generator moved as PyTorch's
    torch.manual_seed(1)
    symgrad.manual_seed(1)
    np.testing.assert_array_equal(getattr(symgrad.empty(4, 3).t(), name)(*args).numpy(),  # drawn in memory order
                                  getattr(torch.empty(4, 3).t(), name)(*args).numpy())


def test_seeded_fills_refuse_as_pytorch(torch):
    for make in (lambda T: T.empty(3).geometric_(0), lambda T: T.empty(3).geometric_(1), lambda T: T.empty(3).cauchy_(0, 0),
                 lambda T: T.empty(3).log_normal_(0, -1), lambda T: T.empty(3, dtype=T.int64).cauchy_(),
                 lambda T: T.empty(3, dtype=T.int64).log_normal_(), lambda T: T.ones(3, requires_grad=True).cauchy_(),
                 lambda T: T.ones(3, dtype=T.bool).geometric_(0.5)):
        assert_raises_as_pytorch(make, torch, symgrad)
    assert math.isfinite(symgrad.empty(2).cauchy_().sum().item())
