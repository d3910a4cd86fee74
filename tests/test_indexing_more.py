"""Indexing with ranges and lists, positions of nonzero elements, writes that add (index_add,
put_, index_put_), take, masked_scatter, unique and median, against PyTorch on the same inputs:
values, dtypes, grad_fn names, gradients, versions, refusals after an in-place write into a saved
value, and PyTorch's exceptions.  The registry's generic tests (test_ops.py) cover each op's
examples against finite differences and jax.grad."""
import math
import warnings

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch

X = np.arange(20, dtype=np.float32).reshape(4, 5) / 3 - 2
X[1, 2], X[2, 3], X[3, 0] = math.nan, math.inf, 0.0


def _name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _run(T, fn, *arrays):
    """``fn(T, *leaves)``'s results (tensors, or tuples of them), then the leaves' gradients of a
    weighted sum of the float results."""
    leaves = [T.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(T, *leaves)
    outs = out if isinstance(out, tuple) else (out,)
    seen = [(o.detach().numpy(), repr(o.dtype), _name(o), o.requires_grad) for o in outs]
    terms = [(o * T.arange(o.numel(), dtype=o.dtype).reshape(o.shape).cos()).sum() for o in outs if o.requires_grad]
    if terms:
        sum(terms[1:], terms[0]).backward()
    return seen, [None if t.grad is None else t.grad.numpy() for t in leaves if t.requires_grad]


def _same(torch, fn, *arrays):
    ours, theirs = _run(symgrad, fn, *arrays), _run(torch, fn, *arrays)
    assert len(ours[0]) == len(theirs[0])
    for (value, *rest), (t_value, *t_rest) in zip(ours[0], theirs[0]):
        assert rest == t_rest
        assert value.shape == t_value.shape
        np.testing.assert_allclose(value, t_value, rtol=1e-6, atol=1e-6, equal_nan=True)
    for a, b in zip(ours[1], theirs[1]):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)


# ------------------------------------------------------------------ ranges and lists

KEYS = {
    "range with a tensor": lambda T: (range(4), T.tensor([0, 4, 2, 2])),
    "range alone": lambda T: range(2),
    "range backwards": lambda T: range(3, 0, -2),
    "two ranges": lambda T: (range(2), range(1, 3)),
    "negative range": lambda T: (range(-2, 0), 1),
    "empty range": lambda T: range(0),
    "range after ellipsis": lambda T: (..., range(2)),
    "range after slice": lambda T: (slice(1, None), range(2)),
    "one-element range": lambda T: (range(1), 0),
    "list with negative tensor": lambda T: ([0, -1], T.tensor([-5, 2])),
    "bools with a tensor": lambda T: ([True, False, True, False], T.tensor([1, 3])),
    "tuple of ints": lambda T: ((0, 1),),
    "list of a range": lambda T: [range(2), [1, 1]],
}


@pytest.mark.parametrize("name", list(KEYS))
def test_getitem_with_ranges_and_lists_as_pytorch(torch, name):
    _same(torch, lambda T, x: x[KEYS[name](T)], X)


def test_nll_of_the_nn_tutorial(torch):
    """``-input[range(target.shape[0]), target].mean()``, PyTorch's "What is torch.nn really?"."""
    logits = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    target = np.array([3, 0, 1, 1, 2, 0])
    seen = {}
    for T in (symgrad, torch):
        w = T.tensor(logits, requires_grad=True)
        input = w.log_softmax(-1)
        y = T.tensor(target)
        loss = -input[range(y.shape[0]), y].mean()
        loss.backward()
        seen[T] = loss.item(), _name(loss), _name(input[range(y.shape[0]), y]), w.grad.numpy()
    assert seen[symgrad][1:3] == seen[torch][1:3] == ("NegBackward0", "IndexBackward0")
    np.testing.assert_allclose(seen[symgrad][0], seen[torch][0], rtol=1e-6)
    np.testing.assert_allclose(seen[symgrad][3], seen[torch][3], rtol=1e-5, atol=1e-7)


def _written(T, w, v):
    x = w * 1
    x[[0, 2]] = 1
    x[range(2), T.tensor([2, -1])] += v * 2
    x[range(-1, 1), [0, 0]] = v
    return x, T.tensor(x._version)


def test_setitem_with_ranges_and_lists_as_pytorch(torch):
    """Values, IndexPutBackward0, gradients to both, three versions."""
    _same(torch, _written, X, np.array([10, 20], np.float32))


RANGE_ERRORS = [
    lambda T: T.tensor(X)[range(5)],
    lambda T: T.tensor(X)[range(4), T.tensor([0, 1, 2, 5])],
    lambda T: T.tensor(X)[range(-5, 0)],
    lambda T: T.tensor(X)[[0, 4]],
    lambda T: T.tensor(X)[range(3), range(2)],
    lambda T: T.tensor(X)[range(2), 0, 1],
]


@pytest.mark.parametrize("call", RANGE_ERRORS)
def test_range_errors_are_pytorchs(torch, call):
    assert_raises_as_pytorch(call, torch, symgrad)


def test_a_write_out_of_range_raises_and_writes_nothing(torch):
    """PyTorch's kernel writes the positions before the bad one (x[range(5), 0] = 1 leaves rows
    0..3 written); symgrad checks first and leaves x as it was, as the project's errors do."""
    for T in (symgrad, torch):
        x = T.tensor(X)
        with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
            x[range(5), 0] = 1.0
    x = symgrad.tensor(X)
    with pytest.raises(IndexError):
        x[range(5), 0] = 1.0
    np.testing.assert_array_equal(x.numpy(), X)
    assert x._version == 0


# ------------------------------------------------------------------------- positions

POSITIONS = {
    "nonzero": lambda T, x: T.nonzero(x),
    "nonzero method, as tuple": lambda T, x: x.nonzero(as_tuple=True),
    "argwhere": lambda T, x: T.argwhere(x > 0),
    "argwhere method": lambda T, x: x.argwhere(),
    "where of a condition": lambda T, x: T.where(x > 0),
    "where of floats": lambda T, x: T.where(x[0] * 2),
    "0-d nonzero": lambda T, x: T.nonzero(x[0, 1]),
    "0-d zero": lambda T, x: T.nonzero(T.tensor(0)),
    "0-d as tuple": lambda T, x: T.nonzero(x[0, 1], as_tuple=True),
    "0-d where": lambda T, x: T.where(T.tensor(True)),
    "empty": lambda T, x: T.nonzero(T.zeros(2, 0, 3)),
    "none found": lambda T, x: T.nonzero(x[:2] > 100, as_tuple=True),
    "bools": lambda T, x: T.nonzero(T.tensor([True, False, True])),
    "int32": lambda T, x: T.nonzero(T.tensor([0, 3, -0, 1], dtype=T.int32)),
    "negative zero": lambda T, x: T.nonzero(T.tensor([-0.0, 0.0, 1e-45])),
    "three axes": lambda T, x: T.nonzero(x.reshape(2, 2, 5) > 1),
}


@pytest.mark.parametrize("name", list(POSITIONS))
def test_nonzero_argwhere_and_where_as_pytorch(torch, name):
    """int64 positions without history (NaN and inf are nonzero, -0.0 is zero)."""
    _same(torch, POSITIONS[name], X)


@pytest.mark.parametrize("call", [lambda T: T.where(T.tensor([True]), T.ones(1)),
                                  lambda T: T.where(T.tensor([True]), other=T.ones(1))])
def test_where_with_one_of_input_and_other_is_a_type_error(torch, call):
    with pytest.raises(TypeError, match="where\\(\\) received an invalid combination of arguments"):
        call(torch)
    with pytest.raises(TypeError, match="where\\(\\) received an invalid combination of arguments"):
        call(symgrad)


def test_nonzero_in_a_traced_function_is_refused():
    with pytest.raises(NotImplementedError, match="nonzero inside a traced function"):
        symgrad.grad(lambda x: x.nonzero().sum() * x.sum())(symgrad.ones(3))


# -------------------------------------------------------------- writes that add, take

ADDS = {
    "index_add": lambda T, x, s: x.index_add(0, T.tensor([3, 0, 3]), s[:3]),
    "index_add alpha": lambda T, x, s: T.index_add(x, 1, T.tensor([4, 0], dtype=T.int32), s[:4, :2], alpha=-2.5),
    "index_add 0-d index": lambda T, x, s: x.index_add(0, T.tensor(1), s[:1]),
    "index_add 0-d": lambda T, x, s: x[0, 0].index_add(0, T.tensor([0]), s[1, 1]),
    "index_add empty": lambda T, x, s: x.index_add(0, T.tensor([], dtype=T.int64), s[:0]),
    "index_add ints": lambda T, x, s: T.ones(3, dtype=T.int64).index_add(0, T.tensor([2, 2]), T.tensor([4, 5]),
                                                                         alpha=3),
    "index_add_": lambda T, x, s: (x * 1).index_add_(0, T.tensor([1, 1]), s[2:4]),
    "take": lambda T, x, s: T.take(x, T.tensor([[0, -1], [19, 7]])),
    "take method, 0-d": lambda T, x, s: x[1, 1].take(T.tensor([0, -1, 0])),
    "take 0-d index": lambda T, x, s: x.take(T.tensor(-3)),
    "put": lambda T, x, s: x.put(T.tensor([0, -1, 6]), s[0, :3]),
    "put accumulate": lambda T, x, s: T.put(x, T.tensor([[5, 5], [-15, 0]]), s[:2, :2], accumulate=True),
    "put_": lambda T, x, s: (x * 1).put_(T.tensor([2, 3]), s[3, 3:]),
    "put_ accumulate, 0-d": lambda T, x, s: (x[2, 2] * 1).put_(T.tensor([0, 0]), s[0, :2], accumulate=True),
    "index_put": lambda T, x, s: x.index_put((T.tensor([0, 2]), T.tensor([-1, 1])), s[0, :2]),
    "index_put broadcast": lambda T, x, s: x.index_put((T.tensor([3, 1]),), s[1]),
    "index_put mask": lambda T, x, s: x.index_put((T.tensor([True, False, True, False]),), s[2, 0]),
    "index_put accumulate": lambda T, x, s: x.index_put((T.tensor([0, 0, 3]), T.tensor([1, 1, 1])), s[0, :3],
                                                        accumulate=True),
    "index_put accumulate mask": lambda T, x, s: x.index_put((T.tensor([True, False, True, False]),), s[:2],
                                                             accumulate=True),
    "index_put_": lambda T, x, s: (x * 1).index_put_([T.tensor([1])], s[3, 0], accumulate=True),
    "masked_scatter": lambda T, x, s: x.masked_scatter(s.detach() > 0, s.flip(0)),
    "masked_scatter broadcasts": lambda T, x, s: x[0].masked_scatter(T.tensor([[True], [False]]), s[0]),
    "masked_scatter none": lambda T, x, s: x.masked_scatter(T.zeros(5, dtype=T.bool), s[:0, 0]),
    "masked_scatter 0-d": lambda T, x, s: x[0, 0].masked_scatter(T.tensor(True), s[0, :2]),
    "masked_scatter_": lambda T, x, s: (x * 1).masked_scatter_(T.tensor([True, False, False, True, True]), s),
}
S = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
S[0, 0] = math.nan


@pytest.mark.parametrize("name", list(ADDS))
def test_index_add_take_put_and_masked_scatter_as_pytorch(torch, name):
    """Values, grad_fn names and the gradients to the tensor and to the source (a position given
    twice gets both adds; a NaN source reaches only where it is written)."""
    _same(torch, ADDS[name], X, S)


def _saved_then_written(T, write):
    """``write`` into a tensor sin saved: backward refuses, as PyTorch's version counter does."""
    x = T.tensor(X, requires_grad=True)
    y = x * 1
    z = y.sin()
    write(T, y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    return y._version


WRITES = {
    "index_add_": lambda T, y: y.index_add_(0, T.tensor([0]), T.ones(1, 5)),
    "put_": lambda T, y: y.put_(T.tensor([0]), T.ones(1), accumulate=True),
    "index_put_": lambda T, y: y.index_put_((T.tensor([0]),), T.tensor(2.0)),
    "masked_scatter_": lambda T, y: y.masked_scatter_(T.ones(5, dtype=T.bool), T.ones(4, 5)),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_in_place_writes_count_and_refuse_a_saved_value(torch, name):
    assert _saved_then_written(symgrad, WRITES[name]) == _saved_then_written(torch, WRITES[name]) == 1


@pytest.mark.parametrize("name", list(WRITES))
def test_in_place_writes_into_a_leaf_are_refused(torch, name):
    for T in (symgrad, torch):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            WRITES[name](T, T.tensor(X, requires_grad=True))


ADD_ERRORS = [
    lambda T: T.zeros(3, 4).index_add(0, T.tensor([0, 3]), T.ones(2, 4)),
    lambda T: T.zeros(3, 4).index_add(0, T.tensor([0, -1]), T.ones(2, 4)),
    lambda T: T.zeros(3, 4).index_add(0, T.tensor([0, 1.0]), T.ones(2, 4)),
    lambda T: T.zeros(3, 4).index_add(0, T.tensor([0, 1]), T.ones(2, 4, dtype=T.float64)),
    lambda T: T.zeros(3, 4).index_add(1, T.tensor([0, 1]), T.ones(3, 3)),
    lambda T: T.zeros(3, 4).index_add(0, T.tensor([[0, 1]]), T.ones(2, 4)),
    lambda T: T.zeros(3, 4).index_add(2, T.tensor([0]), T.ones(3, 1)),
    lambda T: T.zeros(3, 4).index_add(0, T.tensor([0, 1]), T.ones(2, 5)),
    lambda T: T.zeros(3, 4).index_add(0, T.tensor([0]), T.ones(1, 4, 1)),
    lambda T: T.take(T.zeros(2, 3), T.tensor([6])),
    lambda T: T.take(T.zeros(2, 3), T.tensor([-7])),
    lambda T: T.take(T.zeros(2, 3), T.tensor([1], dtype=T.int32)),
    lambda T: T.zeros(2, 3).put_(T.tensor([0, 6]), T.ones(2)),
    lambda T: T.zeros(2, 3).put_(T.tensor([0, 1]), T.ones(3)),
    lambda T: T.zeros(2, 3).put_(T.tensor([0, 1]), T.ones(2, dtype=T.float64)),
    lambda T: T.zeros(2, 3).put(T.tensor([0, 1.0]), T.ones(2)),
    lambda T: T.zeros(2, 3).index_put_((T.tensor([0, 1]),), 5.0),
    lambda T: T.zeros(2, 3).index_put_((None, T.tensor([0, 1])), T.tensor(5.0)),
    lambda T: T.zeros(2, 3).index_put_((T.tensor([0, 1]),), T.tensor([5.0], dtype=T.float64)),
    lambda T: T.zeros(2, 3).index_put_((T.tensor([0, 2]),), T.tensor(5.0), accumulate=True),
    lambda T: T.zeros(2, 3).index_put_((T.tensor([0, 1]),), T.tensor([5.0, 6.0]), accumulate=True),
    lambda T: T.zeros(2, 3).masked_scatter(T.tensor([True, False, True]), T.ones(1)),
    lambda T: T.zeros(2, 3).masked_scatter(T.ones(3), T.ones(6)),
    lambda T: T.zeros(2, 3).masked_scatter(T.ones(3, dtype=T.bool), T.ones(6, dtype=T.int64)),
    lambda T: T.zeros(2, 3).masked_scatter(T.ones(2, dtype=T.bool), T.ones(6)),
]


@pytest.mark.parametrize("call", ADD_ERRORS)
def test_add_take_put_errors_are_pytorchs(torch, call):
    assert_raises_as_pytorch(call, torch, symgrad)


def test_a_refused_write_leaves_the_tensor_as_it_was():
    x = symgrad.tensor(X)
    for write in (lambda: x.index_add_(0, symgrad.tensor([0, 4]), symgrad.ones(2, 5)),
                  lambda: x.put_(symgrad.tensor([0, 20]), symgrad.ones(2)),
                  lambda: x.index_put_((symgrad.tensor([4]),), symgrad.tensor(1.0)),
                  lambda: x.masked_scatter_(symgrad.ones(5, dtype=symgrad.bool), symgrad.ones(4))):
        with pytest.raises((IndexError, RuntimeError)):
            write()
    np.testing.assert_array_equal(x.numpy(), X)
    assert x._version == 0


# -------------------------------------------------------------------- median, unique

Y = np.array([[3, 1, 4, 2, 7], [2, 1, 3, 5, 5], [9, -1, 0, -0.0, 6], [1, 2, 1, 1, 2]], np.float32)
MEDIANS = {
    "whole": lambda T, x: x.median(),
    "whole, even count": lambda T, x: T.median(x[:, :4]),
    "whole with NaN": lambda T, x: T.median(x.detach() * 0 + T.tensor(X)) + x.median(),
    "along rows": lambda T, x: x.median(1),
    "along columns, kept": lambda T, x: T.median(x, 0, keepdim=True),
    "negative dim": lambda T, x: x[:3].median(-1),
    "NaN in a row": lambda T, x: (x * T.tensor(X).isnan().logical_not()).median(1),
    "0-d": lambda T, x: x[0, 0].median(),
    "0-d along 0": lambda T, x: x[0, 0].median(0),
    "empty": lambda T, x: x[:0].median(),
    "ints": lambda T, x: T.tensor([[4, 1, 3], [2, 2, 9]]).median(1),
    "nanmedian whole": lambda T, x: T.nanmedian(x / T.tensor(X).isnan().logical_not()),
    "nanmedian along": lambda T, x: (x / T.tensor(X).isnan().logical_not()).nanmedian(1),
    "nanmedian all NaN": lambda T, x: (x[:2, :3] * math.nan).nanmedian(1),  # (the index is the kernel's choice)
    "nanmedian whole, all NaN": lambda T, x: (x * math.nan).nanmedian(),
    "whole, ties": lambda T, x: x[3].median(),
}


@pytest.mark.parametrize("name", list(MEDIANS))
def test_median_and_nanmedian_as_pytorch(torch, name):
    """The lower middle value (NaN where there is one; for nanmedian, of the others), its index,
    and the gradient to the chosen element."""
    _same(torch, MEDIANS[name], Y)


def test_median_of_an_empty_dimension_is_refused(torch):
    assert_raises_as_pytorch(lambda T: T.zeros(2, 0).median(1), torch, symgrad)


UNIQUES = {
    "values": lambda T, x: T.unique(x),
    "NaN and signed zeros": lambda T, x: T.unique(T.tensor([3.0, -0.0, 0.0, math.nan, 1.0, math.nan, 3.0]),
                                                  return_inverse=True, return_counts=True),
    "inverse of a 2-D tensor": lambda T, x: x.unique(return_inverse=True),
    "counts": lambda T, x: x.unique(sorted=True, return_counts=True),
    "ints unsorted": lambda T, x: T.unique(T.tensor([5, 1, 5, 2, 9, 1]), sorted=False, return_inverse=True),
    "bools": lambda T, x: T.unique(T.tensor([True, False, True]), return_counts=True),
    "0-d": lambda T, x: T.unique(x[0, 0], return_inverse=True),
    "empty": lambda T, x: T.unique(x[:0], return_inverse=True, return_counts=True),
}


@pytest.mark.parametrize("name", list(UNIQUES))
def test_unique_as_pytorch(torch, name):
    def values_only(T, x):  # unique's values have Unique2Backward0, which has no derivative
        out = UNIQUES[name](T, x)
        return tuple(o.detach() for o in (out if isinstance(out, tuple) else (out,)))

    _same(torch, values_only, Y)
    names = {}
    for T in (symgrad, torch):
        out = UNIQUES[name](T, T.tensor(Y, requires_grad=True))
        names[T] = _name(out[0] if isinstance(out, tuple) else out)
    assert names[symgrad] == names[torch]


def test_a_backward_through_unique_is_refused(torch):
    for T in (symgrad, torch):
        x = T.tensor(Y, requires_grad=True)
        with pytest.raises(NotImplementedError, match="the derivative for '_unique2' is not implemented."):
            (x.unique() * 2).sum().backward()


KEEPS = {
    "index_add": lambda T, x, s: x.index_add(0, T.tensor([0, 2]), s, alpha=2),
    "put": lambda T, x, s: x.put(T.tensor([[0, 1, 2], [3, 4, 5]]), s),
    "put accumulate": lambda T, x, s: x.put(T.tensor([[0, 1, 2], [3, 4, 4]]), s, accumulate=True),
    "index_put": lambda T, x, s: x.index_put((T.tensor([0, 2]),), s),
    "index_put accumulate": lambda T, x, s: x.index_put((T.tensor([0, 0]),), s, accumulate=True),
    "take": lambda T, x, s: x.take(T.tensor([0, 2])) + s.sum(),
    "masked_scatter": lambda T, x, s: x.masked_scatter(T.tensor([True, False, True]), s.repeat(2, 1)),
    "median": lambda T, x, s: x.median() + s.sum(),
    "median along": lambda T, x, s: x.median(0).values.sum() + s.sum(),
    "nanmedian": lambda T, x, s: x.nanmedian() + s.sum(),
}


def _refusals(T, fn):
    """Whether a backward is refused after x was written, after s was written, and a second time."""
    seen = []
    for written in ("x", "s", None):
        x, s = T.tensor(S[:, :3], requires_grad=True), T.tensor(S[:2, :3] * 2, requires_grad=True)
        out = fn(T, x, s).sum()
        if written:
            with T.no_grad():
                (x if written == "x" else s).mul_(1)
        try:
            out.backward()
            if written is None:
                out.backward()
            seen.append(False)
        except RuntimeError:
            seen.append(True)
    return seen


@pytest.mark.parametrize("name", list(KEEPS))
def test_what_each_backward_keeps_is_pytorchs(torch, name):
    """index_add and put keep the source, take and a whole median the tensor, index_put,
    masked_scatter and a median along an axis only their indices."""
    assert _refusals(symgrad, KEEPS[name]) == _refusals(torch, KEEPS[name])


ZERO_DIM_ALONG = {  # PyTorch counts a 0-dim tensor as 1-dim in gather and scatter
    "one-hot as the Transforms tutorial makes it": lambda T: T.zeros(10).scatter_(0, T.tensor(3), value=1),
    "scatter a 0-dim source": lambda T: T.zeros(10).scatter(0, T.tensor(3), T.tensor(5.0)),
    "scatter_add at a 0-dim index": lambda T: T.zeros(4).scatter_add(0, T.tensor(1), T.tensor(2.5)),
    "scatter from a longer source": lambda T: T.zeros(3).scatter(0, T.tensor(1), T.tensor([7.0, 8.0])),
    "gather at a 0-dim index": lambda T: T.arange(10.0).gather(0, T.tensor(3)),
    "gather from a 0-dim input": lambda T: T.tensor(4.0).gather(0, T.tensor([0, 0])),
}


@pytest.mark.parametrize("name", list(ZERO_DIM_ALONG))
def test_a_0d_index_or_input_counts_as_1d_in_gather_and_scatter(torch, name):
    """Was: refused ("Index tensor must have the same number of dimensions"; tutorial sweep)."""
    ours, theirs = (ZERO_DIM_ALONG[name](T) for T in (symgrad, torch))
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_index_add_out_of_range_raises_pytorchs_class(torch):
    """PyTorch's kernels for a vector, or that scale the source (alpha != 1), raise IndexError; its
    others RuntimeError (random-programs fuzzer: symgrad raised RuntimeError for both)."""
    def errors(T):
        found = []
        for dim, shape, source in ((1, (3, 5), (3, 2)), (0, (5,), (2,)), (0, (5, 1), (2, 1))):
            for alpha in (1, -2.5):
                for index in ([5, 0], [-1, 0], [4, 0]):
                    try:
                        T.zeros(shape).index_add(dim, T.tensor(index), T.ones(source), alpha=alpha)
                        found.append(None)
                    except (IndexError, RuntimeError) as error:
                        found.append((type(error).__name__, str(error).split(" [")[0]))
        return found

    assert errors(symgrad) == errors(torch)
