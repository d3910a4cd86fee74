"""Indexing, gathers and scatters, splits, flips, rolls, repeats, triangles and diagonals against
PyTorch on the same inputs: values, dtypes, grad_fn names and gradients (repeated and negative
indices, empty selections, 0-d tensors, NaN and infinities), PyTorch's exceptions, and one node
and one compiled program for indexing in a loop.  The registry's generic tests (test_ops.py)
cover each op's examples against finite differences and jax.grad."""
import math
import warnings

import numpy as np
import pytest

import codegen
import symgrad

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5) / 7 - 3
X[0, 1, 2], X[1, 2, 3], X[2, 0, 0] = math.nan, math.inf, -math.inf


def _name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _run(T, fn, *arrays):
    """``fn(T, *leaves)``'s results (a tensor or a tuple), then the leaves' gradients of a weighted sum."""
    leaves = [T.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(T, *leaves)
    outs = out if isinstance(out, tuple) else (out,)
    seen = [(o.detach().numpy(), repr(o.dtype), _name(o)) for o in outs]
    terms = [(o * T.arange(o.numel(), dtype=o.dtype).reshape(o.shape).cos()).sum() for o in outs if o.requires_grad]
    if terms:
        sum(terms[1:], terms[0]).backward()
    return seen, [None if t.grad is None else t.grad.numpy() for t in leaves if t.requires_grad]


def _same(torch, fn, *arrays):
    ours, theirs = _run(symgrad, fn, *arrays), _run(torch, fn, *arrays)
    assert len(ours[0]) == len(theirs[0])
    for (value, dtype, name), (t_value, t_dtype, t_name) in zip(ours[0], theirs[0]):
        assert (dtype, name) == (t_dtype, t_name)
        np.testing.assert_allclose(value, t_value, rtol=1e-6, atol=1e-6, equal_nan=True)
    for a, b in zip(ours[1], theirs[1]):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)


KEYS = {
    "list": lambda T: [2, 0, 2],
    "negative": lambda T: [-1, 0, -3],
    "tensor 2-D": lambda T: T.tensor([[0, 1], [2, 0]]),
    "int32 tensor": lambda T: T.tensor([1, 2], dtype=T.int32),
    "second axis": lambda T: (slice(None), [3, 0, 3]),
    "two arrays": lambda T: ([0, 2], [1, 3]),
    "arrays apart": lambda T: ([0, 2, 1], slice(None), [4, 0, 4]),
    "broadcast arrays": lambda T: (T.tensor([[0], [2]]), slice(1, 3), T.tensor([1, 4, 0])),
    "int then array": lambda T: (1, slice(None), [0, 4]),
    "int, array apart": lambda T: ([0, 1], 2, [1, 3]),
    "slice and array": lambda T: (slice(1, None), [0, 3]),
    "none and ellipsis": lambda T: (None, ..., [1, 4]),
    "mask": lambda T: T.tensor([True, False, True]),
    "2-D mask": lambda T: T.tensor(np.arange(12).reshape(3, 4) % 3 == 0),
    "mask after slice": lambda T: (slice(None), T.tensor([False, True, True, False])),
    "empty mask": lambda T: T.zeros(3, dtype=T.bool),
    "list of bools": lambda T: [True, False, True],
    "empty list": lambda T: [],
    "python True": lambda T: True,
    "python False": lambda T: (False, 1),
    "0-d bool": lambda T: T.tensor(True),
    "0-d int": lambda T: T.tensor(2),
    "0-d int with array": lambda T: (T.tensor(0), slice(None), [2, 2]),
    "numpy array": lambda T: np.array([2, 1]),
    "numpy mask": lambda T: np.array([False, True, False]),
    "nested list": lambda T: [[0, 1], [1, 2]],
    "basic": lambda T: (1, slice(None, None, 2)),
    "two ellipses": lambda T: (..., 0, ...),
    "two ellipses and none": lambda T: (..., None, ...),
}


@pytest.mark.parametrize("key", list(KEYS))
def test_getitem_as_pytorch(torch, key):
    _same(torch, lambda T, x: x[KEYS[key](T)], X)


@pytest.mark.parametrize("key", ["python True", "0-d bool", "none"])
def test_getitem_of_a_0d_tensor(torch, key):
    keys = {"python True": True, "0-d bool": "mask", "none": None}
    _same(torch, lambda T, x: x[T.tensor(True)] if keys[key] == "mask" else x[keys[key]], np.float32(2.5))


def test_repeated_indices_add_their_gradients(torch):
    def run(T):
        x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x[[0, 0, 2, -1]].backward(T.tensor([1.0, 2.0, 3.0, 4.0]))
        return x.grad.numpy()

    np.testing.assert_array_equal(run(symgrad), [3.0, 0.0, 7.0])
    np.testing.assert_array_equal(run(symgrad), run(torch))


ERRORS = {
    "index 5 is out of bounds for dimension 0 with size 3": lambda T, x: x[[5]],
    "index -4 is out of bounds for dimension 0 with size 3": lambda T, x: x[T.tensor([0, -4])],
    "index 9 is out of bounds for dimension 1 with size 5": lambda T, x: x[[0], :, [9]],
    "index 5 is out of bounds for dimension 0 with size 3 (0-d)": lambda T, x: x[T.tensor(5)],
    "tensors used as indices must be long, int, byte or bool tensors": lambda T, x: x[T.tensor([0.0])],
    "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4, 5] at index 0":
        lambda T, x: x[T.tensor([True, False])],
    "too many indices for tensor of dimension 3": lambda T, x: x[[0], [0], [0], [0]],
    "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]":
        lambda T, x: x[[0, 1], [0, 1, 2]],
}


@pytest.mark.parametrize("message", list(ERRORS))
def test_indexing_errors_are_pytorchs(torch, message):
    with pytest.raises(Exception) as theirs:
        ERRORS[message](torch, torch.tensor(X))
    with pytest.raises(type(theirs.value)) as ours:
        ERRORS[message](symgrad, symgrad.tensor(X))
    assert str(ours.value) == str(theirs.value).split("\n")[0]
    assert message.split(" (")[0] == str(ours.value)


# ------------------------------------------------------------------------- x[key] = v

SETS = {
    "int, number": lambda T, y, v: y.__setitem__(1, 2.5),
    "slice, tensor": lambda T, y, v: y.__setitem__((slice(None), slice(1, 3)), v[:, :2]),
    "broadcast row": lambda T, y, v: y.__setitem__((0, slice(None, None, 2)), v[0, 0]),
    "leading ones": lambda T, y, v: y.__setitem__(2, v[None, 0]),
    "list, tensor": lambda T, y, v: y.__setitem__([2, 0], v[:2]),
    "repeated list": lambda T, y, v: y.__setitem__(([0, 0], 1), v[0, 0]),
    "mask, number": lambda T, y, v: y.__setitem__(y.detach() > 0, -1.0),
    "mask, nan": lambda T, y, v: y.__setitem__(y.detach() < 0, math.nan),
    "mask, tensor": lambda T, y, v: y.__setitem__(T.tensor([True, False, True]), v[0, 0, :]),
    "int and array": lambda T, y, v: y.__setitem__((1, slice(None), [0, 3]), v[0, :, :2]),
    "array after slice": lambda T, y, v: y.__setitem__((slice(None), [1]), v[0, 0, 0]),
    "ellipsis, number": lambda T, y, v: y.__setitem__(..., 7.0),
    "whole, 0-d": lambda T, y, v: y.__setitem__(slice(None), v[1, 1, 1]),
    "whole, tensor": lambda T, y, v: y.__setitem__(slice(None), v[0]),
    "none": lambda T, y, v: y.__setitem__((None, 1), v[0]),
    "0-d int": lambda T, y, v: y.__setitem__(T.tensor(0), v[1]),
    "empty list": lambda T, y, v: y.__setitem__([], 3.0),
}


@pytest.mark.parametrize("key", list(SETS))
def test_setitem_as_pytorch(torch, key):
    """Values, grad_fn and the gradients of both the overwritten tensor's history and the value."""
    v0 = np.linspace(-2, 2, 60, dtype=np.float32).reshape(3, 4, 5)

    def run(T, x, v):
        y = x * 2
        SETS[key](T, y, v * 1)
        return y

    _same(torch, run, X, v0)


def test_setitem_of_a_0d_tensor(torch):
    def run(T, x):
        y, z = x[0, 0, 1] * 2, x[0, 0, 3] * 2
        y[...] = 3.0
        z[...] = x[1, 1, 1] * 4
        return y, z

    _same(torch, run, X)


def test_setitem_under_no_grad_and_without_history(torch):
    def run(T, x):
        y = x.sin()
        with T.no_grad():
            y[0, 1] = 5.0  # not recorded: y keeps its gradient
        plain = T.zeros(3, 4)
        plain[[0, 2]] = x[0, :, 0].detach()  # a tensor without history stays one
        plain[1] = T.tensor(1.5)
        return y, plain

    _same(torch, run, X)


def test_setitem_with_a_value_that_requires_grad(torch):
    def run(T, v):
        y = T.zeros(4, 3)
        y[1:3] = v[0, :2, :3].sin()
        z = T.ones(4)
        z[[3, 0]] = v[0, 0, :2]
        return y, z

    _same(torch, run, X)


SET_ERRORS = {
    "a view of a leaf Variable that requires grad is being used in an in-place operation.":
        lambda T, x, v: x.__setitem__(0, 1.0),
    "a leaf Variable that requires grad is being used in an in-place operation.":
        lambda T, x, v: x.__setitem__([0], 1.0),
    "Index put requires the source and destination dtypes match, got Float for the destination and Double for "
    "the source.": lambda T, x, v: (x * 1).__setitem__([0], v[0].double()),
    "shape mismatch: value tensor of shape [3, 4, 5] cannot be broadcast to indexing result of shape [1, 4, 5]":
        lambda T, x, v: (x * 1).__setitem__([1], v.double()),
    "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [1, 4, 5]":
        lambda T, x, v: (x * 1).__setitem__([1], v[0, 0, :3]),
    "The expanded size of the tensor (5) must match the existing size (3) at non-singleton dimension 1.  Target "
    "sizes: [4, 5].  Tensor sizes: [3]": lambda T, x, v: (x * 1).__setitem__(1, v[0, 0, :3]),
    "The expanded size of the tensor (5) must match the existing size (2) at non-singleton dimension 1.  Target "
    "sizes: [4, 5].  Tensor sizes: [2]": lambda T, x, v: (x * 1).__setitem__(1, v[:1, :1, :2]),  # leading 1s dropped
    "index 3 is out of bounds for dimension 0 with size 3": lambda T, x, v: (x * 1).__setitem__(3, 1.0),
    "value cannot be converted to type int64_t without overflow":
        lambda T, x, v: T.ones(3, dtype=T.int64).__setitem__(0, math.nan),
}


@pytest.mark.parametrize("message", list(SET_ERRORS))
def test_setitem_errors_are_pytorchs(torch, message):
    def call(T):
        x = T.tensor(X, requires_grad=True)
        SET_ERRORS[message](T, x, T.tensor(X))

    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(symgrad)
    assert str(ours.value) == message == str(theirs.value).split("\n")[0]


def test_a_failed_setitem_records_nothing():
    y = symgrad.tensor(X, requires_grad=True) * 1
    node = y._node
    with pytest.raises(IndexError):
        y[[0, 7]] = 1.0
    assert y._node is node


# ------------------------------------------------------------------- shapes and pieces

SHAPE_OPS = {
    "split": lambda T, x: x.split(2, 2),
    "split sizes": lambda T, x: T.split(x, [1, 3], dim=1),
    "chunk": lambda T, x: x.chunk(2, -1),
    "chunk more than size": lambda T, x: T.chunk(x, 5, 0),
    "unbind": lambda T, x: x.unbind(1),
    "flip": lambda T, x: x.flip(0, 2),
    "flip list": lambda T, x: T.flip(x, [-1]),
    "roll": lambda T, x: x.roll(1, 0),
    "roll dims": lambda T, x: T.roll(x, (-1, 7), (2, 1)),
    "roll flat": lambda T, x: x.roll(3),
    "repeat": lambda T, x: x.repeat(2, 1, 1, 2),
    "repeat zero": lambda T, x: x.repeat(1, 0, 1),
    "tile": lambda T, x: x.tile((2,)),
    "tile function": lambda T, x: T.tile(x, (2, 1, 1, 1)),
    "tril": lambda T, x: x.tril(),
    "triu": lambda T, x: T.triu(x, 1),
    "tril negative": lambda T, x: T.tril(x, -2),
    "diagonal": lambda T, x: x.diagonal(),
    "diagonal dims": lambda T, x: T.diagonal(x, 1, 2, 0),
    "diagonal past the end": lambda T, x: x.diagonal(7, -1, -2),
    "diag of a matrix": lambda T, x: x[0].diag(-1),
    "diag of a vector": lambda T, x: T.diag(x[1, 1], 2),
    "trace": lambda T, x: x[2].trace(),
    "trace of ints": lambda T, x: T.trace(T.ones(3, 2, dtype=T.int32)),
    "wider cotangent": lambda T, x: (x.diagonal() + T.ones(3, dtype=T.float64), x[2].trace() + T.tensor(1.0).double(),
                                     x[[0]].flip(1).roll(1, 2).tril() + T.ones(5, dtype=T.float64)),
    "0-d flip": lambda T, x: x[0, 0, 0].flip(()),
    "0-d repeat": lambda T, x: x[1, 1, 1].repeat(2, 2),
}


@pytest.mark.parametrize("name", list(SHAPE_OPS))
def test_shape_op_as_pytorch(torch, name):
    _same(torch, SHAPE_OPS[name], X)


SHAPE_ERRORS = [
    lambda T, x: x.split(0), lambda T, x: x.split([1, 1]), lambda T, x: x.chunk(0), lambda T, x: x.split(-1),
    lambda T, x: x[0, 0, 0].unbind(), lambda T, x: x.flip(0, 0), lambda T, x: x.roll((1, 2), 0),
    lambda T, x: x.repeat(2), lambda T, x: x.repeat(1, -1, 1), lambda T, x: x[0, 0].tril(),
    lambda T, x: x.diag(), lambda T, x: x.trace(), lambda T, x: x.diagonal(0, 1, 1),
    lambda T, x: T.trace(T.ones(2, 2, dtype=T.bool)),
]


@pytest.mark.parametrize("call", SHAPE_ERRORS)
def test_shape_op_errors_are_pytorchs(torch, call):
    with pytest.raises(Exception) as theirs:
        call(torch, torch.tensor(X))
    with pytest.raises(type(theirs.value)) as ours:
        call(symgrad, symgrad.tensor(X))
    assert str(ours.value).split(" [")[0] == str(theirs.value).split("\n")[0].split(" [")[0]


# ------------------------------------------------------------- gathers and scatters

I = np.array([[0, 4, 4, 1], [2, 2, 0, 0], [3, 1, 1, 1]])


def _index(T):
    return T.tensor(I)


ALONG = {
    "gather": lambda T, x: x[:, 0].gather(1, _index(T)),
    "gather rows": lambda T, x: T.gather(x[:, :, 1], 0, _index(T)[:2, :3] % 3),
    "gather int32": lambda T, x: x[1].gather(1, _index(T).int()[:, :2]),
    "gather 0-d": lambda T, x: x[0, 0, 1].gather(0, T.tensor(0)),
    "scatter": lambda T, x: x[:, 0].scatter(1, _index(T)[:, :1], x[:, 1, :1]),
    "scatter value": lambda T, x: T.scatter(x[:, 0], 1, _index(T)[:, 1:2], -2.5),
    "scatter_add": lambda T, x: x[:, 0].scatter_add(1, _index(T), x[:, 1, :4] * 3),
    "scatter_add rows": lambda T, x: T.scatter_add(x[0], 0, _index(T) % 4, x[1, :3, :4]),
    "index_select": lambda T, x: x.index_select(2, T.tensor([4, 0, 4, -0])),
    "index_select int32 0-d": lambda T, x: T.index_select(x, 0, T.tensor(2, dtype=T.int32)),
    "index_select empty": lambda T, x: x.index_select(1, T.tensor([], dtype=T.int64)),
    "masked_fill": lambda T, x: x.masked_fill(x.detach() > 0, 0.5),
    "masked_fill nan": lambda T, x: T.masked_fill(x, T.tensor([True, False, False, True, False]), math.nan),
    "masked_fill tensor": lambda T, x: x.masked_fill(T.tensor([[True], [False], [True], [False]]), x[0, 0, 2] * 2),
    "masked_fill broadcasts": lambda T, x: x[0, 0].masked_fill(T.ones(2, 5, dtype=T.bool), 1.0),
    "masked_fill of ints": lambda T, x: T.ones(3, dtype=T.int64).masked_fill(T.tensor([True, False, True]), 2.7),
    "index_fill repeated": lambda T, x: x[0].index_fill(1, T.tensor([0, 0, 3]), x[1, 1, 1] * 2),
    "index_fill number": lambda T, x: T.index_fill(x, 2, T.tensor(-1), math.inf),
    "masked_select": lambda T, x: x.masked_select(x.detach() > 1),
    "masked_select broadcast": lambda T, x: T.masked_select(x[0, 0], T.tensor([[True], [False]])),
    "masked_select empty": lambda T, x: x.masked_select(T.zeros(5, dtype=T.bool)),
    "masked_select 0-d": lambda T, x: x[1, 1, 1].masked_select(T.tensor(True)),
}


@pytest.mark.parametrize("name", list(ALONG))
def test_gather_scatter_and_masks_as_pytorch(torch, name):
    _same(torch, ALONG[name], X)


def test_in_place_scatters_and_fills(torch):
    def run(T, x):
        y = x[:, 0] * 1
        y.scatter_(1, _index(T)[:, :1], 9.0)
        y.scatter_add_(1, _index(T), x[:, 2, :4])
        y.masked_fill_(T.tensor([False, True, False, False, True]), -7.0)
        y.index_fill_(0, T.tensor([2]), 0.5)
        z = T.zeros(3, 5)
        z.scatter_add_(0, T.tensor([[0, 0, 2, 2, 2]]), x[0, 3:4])
        return y, z

    _same(torch, run, X)


ALONG_ERRORS = [
    lambda T, x: x[0].gather(1, T.tensor([[5]])), lambda T, x: x[0].gather(1, T.tensor([[-1]])),
    lambda T, x: x[0].gather(1, T.tensor([[0.0]])), lambda T, x: x[0].gather(1, T.tensor([0])),
    lambda T, x: x[0].gather(1, T.zeros(5, 1, dtype=T.int64)),
    lambda T, x: x[0].index_select(0, T.tensor([4])), lambda T, x: x[0].index_select(0, T.tensor([-1])),
    lambda T, x: x[0].index_select(0, T.tensor([[0]])), lambda T, x: x[0].index_select(0, T.tensor([0.0])),
    lambda T, x: x[0].scatter(1, T.tensor([[5]]), 1.0), lambda T, x: x[0].scatter(1, T.tensor([[0]]), x[0].double()),
    lambda T, x: x[0].scatter_add(1, T.tensor([[0, 1]]), T.ones(1, 1)),
    lambda T, x: x[0].masked_fill(T.ones(4, 5), 1.0), lambda T, x: x[0].masked_fill(T.ones(4, 5) > 0, T.ones(1)),
    lambda T, x: x[0].masked_fill(T.ones(3, dtype=T.bool), 1.0),
    lambda T, x: x[0].masked_select(T.ones(4, 5)), lambda T, x: x[0].masked_select(T.ones(3, dtype=T.bool)),
    lambda T, x: x.index_fill(1, T.tensor([4]), 1.0), lambda T, x: x.index_fill(1, T.tensor([0], dtype=T.int32), 1.0),
    lambda T, x: x.index_fill(1, T.tensor([[0]]), 1.0), lambda T, x: x.index_fill(1, T.tensor([0]), T.ones(1)),
]


@pytest.mark.parametrize("call", ALONG_ERRORS)
def test_gather_scatter_errors_are_pytorchs(torch, call):
    with pytest.raises(Exception) as theirs:
        call(torch, torch.tensor(X))
    with pytest.raises(type(theirs.value)) as ours:
        call(symgrad, symgrad.tensor(X))
    assert str(ours.value).split(" [")[0] == str(theirs.value).split("\n")[0].split(" [")[0]


# ------------------------------------------------------------------------ in a loop


MOVING = {
    "rows": lambda T, x, i: (x[i:i + 3] ** 2).sum(),
    "a row, twice": lambda T, x, i: (T.sin(x[i]) * x[i + 1]).sum(),
    "a row's columns, and a column": lambda T, x, i: (x[i, 1:3] * 3).sum() + x[2:4, i % 4].sum(),
    "a window": lambda T, x, i: x[i:i + 2, i % 3:i % 3 + 2].exp().sum(),
    "a step of 2, a new axis": lambda T, x, i: x[i:i + 4:2].sum() + x[:, None, i % 4].sum(),
    "a value read": lambda T, x, i: x[i:i + 2].detach().sum() * x[i + 2].sum(),
}


@pytest.mark.parametrize("name", MOVING)
def test_slices_and_integers_at_moving_offsets_compile_once(torch, name):
    """``x[i:i + 3]``, ``x[i]`` with a new ``i`` each step: values and gradients PyTorch's at every
    step, and one program taking the starts as inputs once a second offset came, or from the first
    for a slice of the leaf (not one compiled per offset; a slice of step 2 keeps its start in the
    program)."""
    fn = MOVING[name]
    data = np.random.default_rng(5).standard_normal((9, 4)).astype(np.float32)
    steps, compiles = {}, []
    for T in (symgrad, torch):
        x, steps[T] = T.tensor(data, requires_grad=True), []
        for i in range(6):
            loss = fn(T, x, i)
            loss.backward()
            steps[T].append((loss.item(), x.grad.numpy().copy()))
            x.grad = None
            compiles.append(codegen.stats.compiles)
    for (value, grad), (t_value, t_grad) in zip(steps[symgrad], steps[torch]):
        np.testing.assert_allclose(value, t_value, rtol=1e-5)
        np.testing.assert_allclose(grad, t_grad, rtol=1e-5, atol=1e-6)
    if "step of 2" not in name:  # a slice of the leaf given (a batch) takes its start as an input from the first
        assert compiles[5] == compiles[0 if name in ("rows", "a window") else 1], compiles[:6]


def _written_at_moving_positions(T, w, k):
    i, j = k % 3, (k * 5) % 4
    onehot = T.zeros(2, 3, 4)
    onehot[1][i][j] = 1  # the char-RNN tutorial's one-hot: an int written into a view of a view
    x = w * 2
    x[i] = w[(i + 1) % 3] * 3  # a row written with history
    x[:, j] = -1.0
    x[i, 1:3] = w[0, :2]
    x[i:i + 1, [0, 3]] = 5.0  # a moving slice beside an advanced index
    return (x * onehot[1]).sum() + (x ** 2).sum(), onehot


def test_writes_at_moving_positions_compile_once(torch):
    """``x[i] = v``, ``x[0][i] = 1``, ``x[i:i + 1, idx] = v`` with a new ``i`` each step: values and
    gradients PyTorch's at every step (second derivatives in the first steps), and the write's start
    an input of the step's programs once the loop settles (the char-RNN tutorial compiled a
    program per letter)."""
    steps, compiles = {}, []
    for T in (symgrad, torch):
        w, steps[T] = T.tensor(np.linspace(-1, 1, 12).reshape(3, 4), dtype=T.float32, requires_grad=True), []
        for k in range(10):
            y, onehot = _written_at_moving_positions(T, w, k)
            (g,) = T.autograd.grad(y, w, create_graph=k < 2)
            results = [y, g, onehot] + ([T.autograd.grad((g * g).sum(), w)[0]] if k < 2 else [])
            steps[T].append([t.detach().numpy().copy() for t in results])
            compiles.append(codegen.stats.compiles)
    for ours, theirs in zip(steps[symgrad], steps[torch]):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert compiles[9] == compiles[6], compiles[:10]


def test_indices_drawn_from_an_array_with_one_out_of_bounds(torch):
    """``x[order[i:i + 4]]`` with one bad index in ``order``: the batches without it index as usual
    (the bounds are checked on ``order`` first, then on the batch), the one with it raises
    PyTorch's IndexError."""
    order = np.arange(12)
    order[9] = 40
    data = np.arange(36, dtype=np.float32).reshape(12, 3)
    seen = {}
    for T in (symgrad, torch):
        x, o, seen[T] = T.tensor(data), T.tensor(order), []
        for i in range(0, 12, 4):
            try:
                seen[T].append(x[o[i:i + 4]].sum().item())
            except IndexError as error:
                seen[T].append(str(error))
    assert seen[symgrad] == seen[torch]
    assert seen[torch][2] == "index 40 is out of bounds for dimension 0 with size 12"


def test_indexing_in_a_loop_records_one_node_per_call_and_compiles_once():
    rng = np.random.default_rng(0)
    w = symgrad.tensor(rng.standard_normal((10, 3)), requires_grad=True)
    totals, compiles = [], None
    for step in range(12):
        index = symgrad.tensor(rng.integers(0, 10, size=4))
        picked = w[index]
        assert picked._node.op.name == "take" and picked._node.inputs == (w._node, index._node)
        gathered = w.gather(0, index.reshape(4, 1).expand(4, 3))
        assert gathered._node.inputs[0] is w._node
        (picked * gathered).sum().backward()
        totals.append(w.grad.numpy().sum())
        if step == 1:
            compiles = codegen.stats.compiles
    assert codegen.stats.compiles == compiles
    assert len(set(totals)) > 6  # each step read its own indices


def test_narrow_is_pytorchs_slice(torch):
    """``narrow``: its values, gradient, ``grad_fn``, a write through it reaching the base (a view),
    and PyTorch's errors."""
    def seen(T):
        out = []
        for args in [(0, 5, 1), (0, 2, 3), (0, 1, -1), (0, -2, 2), (1, 0, 1)]:
            try:
                out.append(tuple(T.ones(4).narrow(*args).shape))
            except (IndexError, RuntimeError) as error:
                out.append((type(error).__name__, str(error)))
        try:
            T.tensor(1.0).narrow(0, 0, 1)
        except RuntimeError as error:
            out.append(str(error))
        x = T.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        v = T.narrow(x, -1, T.tensor(1), 2)
        (v * v).sum().backward()
        base = T.zeros(3, 4)
        base.narrow(0, 1, 1).fill_(7.0)
        out.append((type(v.grad_fn).__name__, v.tolist(), x.grad.tolist(), base.tolist()))
        return out

    assert seen(symgrad) == seen(torch)
