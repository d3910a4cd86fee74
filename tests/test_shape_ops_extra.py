"""Broadcasting, splitting and stacking along NumPy's axes, ravel and narrow_copy, diagonals,
blocks, triangles' positions, combinations and vander, against PyTorch on the same inputs: values,
dtypes, grad_fn names, gradients, which results are views of their input, and PyTorch's errors."""
import warnings

import numpy as np
import pytest

import symgrad

CUBE = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5 - 3


def _outputs(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def run(T, fn, values):
    """The outputs of ``fn(T, x)`` (values, dtypes, grad_fn names) and x's gradient for a cotangent of
    distinct entries on every output that has a gradient."""
    x = T.tensor(values, requires_grad=values.dtype.kind == "f")
    outputs = _outputs(fn(T, x))
    differentiable = [o for o in outputs if o.requires_grad]
    if differentiable:
        cotangents = (T.arange(o.numel(), dtype=o.dtype).reshape(o.shape) - 1.5 for o in differentiable)
        sum((o * c).sum() for o, c in zip(differentiable, cotangents)).backward()
    names = [None if o.grad_fn is None else type(o.grad_fn).__name__ for o in outputs]
    return ([o.detach().numpy() for o in outputs], [repr(o.dtype) for o in outputs], names,
            None if x.grad is None else x.grad.numpy())


def assert_like_pytorch(torch, fn, values=CUBE):
    ours, theirs = run(symgrad, fn, values), run(torch, fn, values)
    assert len(ours[0]) == len(theirs[0])
    for a, b in zip(ours[0], theirs[0]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True)
    assert ours[1:3] == theirs[1:3]
    assert (ours[3] is None) == (theirs[3] is None)
    if ours[3] is not None:
        np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-6, atol=1e-6)


def assert_same_error(torch, fn, upto=None):
    """The same exception class and PyTorch's message (up to ``upto`` where it goes on to print more)."""
    errors = []
    for T in (symgrad, torch):
        with pytest.raises(Exception) as caught:
            fn(T)
        errors.append(caught.value)
    ours, theirs = errors
    assert type(ours) is type(theirs), (ours, theirs)
    expected = str(theirs).split("\nException raised from")[0]
    if upto is not None:
        expected = expected[:expected.index(upto) + len(upto)]
    assert str(ours).startswith(expected), (str(ours), str(theirs))


ON_CUBE = {
    "broadcast_to": lambda T, x: T.broadcast_to(x[:, :1], (5, 2, 3, 4)),
    "broadcast_to method -1": lambda T, x: x[0, :, :1].broadcast_to((-1, 4)),
    "broadcast_tensors": lambda T, x: T.broadcast_tensors(x[:, :1], x[0, :, 0].reshape(3, 1), x[1, 1]),
    "broadcast_tensors of one shape": lambda T, x: T.broadcast_tensors(x[0] * 2, x[1] * 3),
    "tensor_split sections": lambda T, x: T.tensor_split(x, 3, dim=2),
    "tensor_split indices": lambda T, x: x.tensor_split([1, 6], dim=-1),
    "tensor_split indices backwards": lambda T, x: T.tensor_split(x, (3, 1, -1), 1),
    "tensor_split tensor indices": lambda T, x: T.tensor_split(x, T.tensor([1, 2]), dim=1),
    "tensor_split tensor sections": lambda T, x: T.tensor_split(x, T.tensor(2), dim=2),
    "hsplit": lambda T, x: x.hsplit(3),
    "hsplit indices": lambda T, x: T.hsplit(x, [2]),
    "hsplit of a vector": lambda T, x: T.hsplit(x[0, 0], 2),
    "vsplit": lambda T, x: T.vsplit(x, 2),
    "dsplit": lambda T, x: x.dsplit([1, 3]),
    "atleast_1d": lambda T, x: T.atleast_1d(x[0, 0, 0], x[0]),
    "atleast_2d": lambda T, x: T.atleast_2d((x[0, 0, 0], x[0, 0], x[0])),
    "atleast_3d": lambda T, x: T.atleast_3d([x[0, 0, 0], x[0, 0], x[0], x]),
    "atleast_3d of one": lambda T, x: T.atleast_3d(x[0, 0]),
    "dstack": lambda T, x: T.dstack([x[0, 0], x[1, 1] * 2]),
    "dstack matrices": lambda T, x: T.dstack((x[0], x[1] * 2)),
    "dstack cubes": lambda T, x: T.dstack((x, x[:, :, :1])),
    "column_stack": lambda T, x: T.column_stack([x[0, :, 0], x[0], x[1, :, :1], x[0, :, 3] * 2]),
    "column_stack of 0-d tensors": lambda T, x: T.column_stack([x[0, 0, 0], x[1, 1, 1]]),
    "row_stack": lambda T, x: T.row_stack([x[0, 0], x[1]]),
    "ravel": lambda T, x: T.ravel(x),
    "ravel of a transpose": lambda T, x: x.transpose(0, 2).ravel(),
    "ravel of a 0-d tensor": lambda T, x: x[1, 2, 3].ravel(),
    "narrow_copy": lambda T, x: T.narrow_copy(x, 2, 1, 2),
    "narrow_copy negative start": lambda T, x: x.narrow_copy(2, -3, 2),
    "narrow_copy of the last entry from a negative start": lambda T, x: x.narrow_copy(0, -1, 1),
    "diag_embed": lambda T, x: T.diag_embed(x),
    "diag_embed offset dims": lambda T, x: x.diag_embed(1, 0, 2),
    "diag_embed dims reversed": lambda T, x: T.diag_embed(x[0], -2, -1, 0),
    "diagflat": lambda T, x: T.diagflat(x[0]),
    "diagflat offset": lambda T, x: x[0, 0].diagflat(-1),
    "diagflat of a 0-d tensor": lambda T, x: T.diagflat(x[0, 0, 0], 2),
    "block_diag": lambda T, x: T.block_diag(x[0, 0, 0], x[0, 0], x[1]),
    "block_diag with empty blocks": lambda T, x: T.block_diag(x[0, :0, :2], x[0, 1], x[1, :2, :0]),
    "combinations": lambda T, x: T.combinations(x[0, 0]),
    "combinations of three with replacement": lambda T, x: T.combinations(x[0, 1, :3], 3, with_replacement=True),
    "combinations of one": lambda T, x: T.combinations(x[1, 1], r=1),
    "combinations past the size": lambda T, x: T.combinations(x[1, 1], r=5),
}


@pytest.mark.parametrize("name", list(ON_CUBE))
def test_like_pytorch(torch, name):
    assert_like_pytorch(torch, ON_CUBE[name])


@pytest.mark.parametrize("name, fn", [
    ("broadcast_shapes", lambda T: T.broadcast_shapes((2, 1), (4, 1, 3), 3)),
    ("broadcast_shapes of lists and zeros", lambda T: T.broadcast_shapes([0], (1,), [2, 1, 1])),
    ("broadcast_shapes of nothing", lambda T: T.broadcast_shapes()),
    ("combinations r=0", lambda T: T.combinations(T.tensor([1.0, 2.0]), 0)),
    ("combinations of ints", lambda T: T.combinations(T.tensor([3, 1, 2]), with_replacement=True)),
    ("block_diag promotes as result_type", lambda T: T.block_diag(T.tensor(2.0, dtype=T.float64), T.ones(2, 3),
                                                                  T.tensor([[1, 2]]))),
    ("block_diag of bools and ints", lambda T: T.block_diag(T.tensor([True, False]), T.tensor([[5]]))),
    ("block_diag of nothing", lambda T: T.block_diag()),
    ("tril_indices", lambda T: T.tril_indices(3, 4, 1)),
    ("tril_indices int32", lambda T: T.tril_indices(4, 3, -1, dtype=T.int32)),
    ("triu_indices", lambda T: T.triu_indices(3, 3, -1)),
    ("triu_indices past the corner", lambda T: T.triu_indices(2, 3, 5)),
    ("tril_indices of no rows", lambda T: T.tril_indices(0, 3)),
    ("vander", lambda T: T.vander(T.tensor([1.0, 2.0, -3.0]))),
    ("vander increasing N", lambda T: T.vander(T.tensor([1.5, -0.5]), 4, increasing=True)),
    ("vander of ints", lambda T: T.vander(T.tensor([1, 2, 3], dtype=T.int32), 4)),
    ("vander of bools", lambda T: T.vander(T.tensor([True, False]))),
    ("vander N=1", lambda T: T.vander(T.tensor([2.0, 3.0]), 1)),
    ("vander N=0", lambda T: T.vander(T.tensor([2.0, 3.0]), N=0)),
    ("vander overflowing float32", lambda T: T.vander(T.tensor([1.5, 2.5e20]), 4)),
    ("diag_embed of bools", lambda T: T.diag_embed(T.tensor([True, False]), -1)),
    ("diagflat of ints", lambda T: T.diagflat(T.tensor([[1, 2]]))),
    ("hsplit of ints", lambda T: T.hsplit(T.arange(6), 3)),
    ("column_stack of ints and floats", lambda T: T.column_stack([T.tensor([1, 2]), T.ones(2, 2)])),
])
def test_values_and_dtypes(torch, name, fn):
    ours, theirs = fn(symgrad), fn(torch)
    if not isinstance(theirs, torch.Tensor) and not isinstance(theirs, tuple):
        assert ours == theirs and type(ours).__name__ == "Size"
        return
    for a, b in zip(_outputs(ours), _outputs(theirs)):
        if isinstance(b, int):
            assert a == b
            continue
        assert repr(a.dtype) == repr(b.dtype) and tuple(a.shape) == tuple(b.shape), (a, b)
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_vander_refuses_a_backward_as_pytorch(torch):
    """PyTorch's vander writes its cumprod into its result after saving it: its backward raises, and
    with N < 2 its result has no history at all."""
    for T in (symgrad, torch):
        x = T.tensor([1.0, 2.0, -3.0], requires_grad=True)
        decreasing, increasing = T.vander(x), T.vander(x, increasing=True)
        assert (type(decreasing.grad_fn).__name__, type(increasing.grad_fn).__name__) == ("FlipBackward0",
                                                                                          "CopySlices")
        with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                               "modified by an inplace operation"):
            decreasing.sum().backward()
        assert not T.vander(x, 1).requires_grad


def test_narrow_copy_to_the_end_from_a_negative_start_keeps_pytorchs_backward(torch):
    """PyTorch's backward takes the slice again as slice(start, start + length): empty when it runs to
    the end, so one entry along the dim gets no gradient (the previous test) and more raise."""
    for T in (symgrad, torch):
        x = T.ones(2, 3, 4, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"The size of tensor a \(0\) must match the size of tensor b \(2\) at "
                                               r"non-singleton dimension 1"):
            x.narrow_copy(1, -2, 2).sum().backward()
        x.narrow_copy(2, -2, 0).sum().backward()
        assert x.grad.sum().item() == 0


def test_views_share_storage_as_pytorchs(torch):
    """broadcast_to and the pieces of tensor_split and its kin are views; ravel of a tensor in order
    is one, of a transpose a view of a copy; narrow_copy, dstack and column_stack are copies."""
    def run(T):
        seen = []
        b = T.arange(12.0).reshape(3, 4)
        wide = T.broadcast_to(b[1], (2, 4))
        pieces = T.tensor_split(b, [1, 3], dim=1)
        flat = b.ravel()
        pieces[1][0, 0] = -1
        flat[5] = -2
        seen += [wide.tolist(), b.tolist(), pieces[0]._base is b._base, wide._base is b._base, flat._base is b._base]
        h, v = b.hsplit(2), b.vsplit([2])
        h[1][2, 1] = 50
        v[1][0, 0] = 60
        seen += [b.tolist(), [p.is_contiguous() for p in h], v[0].is_contiguous()]
        t = b.t().ravel()
        t[0] = 100
        n = b.narrow_copy(0, 1, 1)
        n[0, 0] = 200
        seen += [b[0, 0].item(), t._base is None or t._base is not b, n._base is None, b.tolist()]
        single = T.atleast_2d(b)
        seen += [single is b, T.broadcast_tensors(b)[0] is b, T.atleast_1d(b[0]) is not b[0]]
        return seen

    assert run(symgrad) == run(torch)


@pytest.mark.parametrize("name, fn, upto", [
    ("broadcast_shapes mismatch", lambda T: T.broadcast_shapes((2,), (3, 3)), None),
    ("broadcast_shapes negative", lambda T: T.broadcast_shapes((2, 1), (1, -1)), None),
    ("broadcast_shapes of a float", lambda T: T.broadcast_shapes(2.5), None),
    ("broadcast_tensors mismatch", lambda T: T.broadcast_tensors(T.ones(2), T.ones(3)), None),
    ("broadcast_to narrower", lambda T: T.broadcast_to(T.ones(2, 3), (3, 3)), "must match the existing size"),
    ("tensor_split zero sections", lambda T: T.tensor_split(T.ones(3), 0), None),
    ("tensor_split of a 0-d tensor", lambda T: T.tensor_split(T.tensor(1.0), 2), None),
    ("tensor_split 2-D tensor", lambda T: T.tensor_split(T.ones(3), T.tensor([[1]])), None),
    ("tensor_split float tensor", lambda T: T.tensor_split(T.ones(3), T.tensor([1.0])), None),
    ("tensor_split bad dim", lambda T: T.tensor_split(T.ones(2, 3), 2, dim=3), None),
    ("hsplit indivisible", lambda T: T.ones(3, 4).hsplit(3), None),
    ("hsplit of a 0-d tensor", lambda T: T.tensor(1.0).hsplit(1), None),
    ("vsplit of a vector", lambda T: T.ones(3).vsplit(1), None),
    ("dsplit of a matrix", lambda T: T.ones(2, 3).dsplit(1), None),
    ("dsplit indivisible", lambda T: T.ones(2, 2, 3).dsplit(2), None),
    ("dstack of nothing", lambda T: T.dstack([]), None),
    ("column_stack of nothing", lambda T: T.column_stack([]), None),
    ("column_stack ranks", lambda T: T.column_stack([T.ones(3, 2, 1), T.ones(3)]), None),
    ("narrow_copy past the end", lambda T: T.narrow_copy(T.ones(2, 3), 1, 2, 2), None),
    ("narrow_copy of a 0-d tensor", lambda T: T.tensor(1.0).narrow_copy(0, 0, 1), None),
    ("diag_embed same dims", lambda T: T.diag_embed(T.ones(2, 3), 0, 0, 0), None),
    ("diag_embed bad dim", lambda T: T.diag_embed(T.ones(2, 3), 0, 0, 3), None),
    ("diag_embed of a 0-d tensor", lambda T: T.diag_embed(T.tensor(1.0)), None),
    ("block_diag of a cube", lambda T: T.block_diag(T.ones(2), T.ones(2, 2, 2)), None),
    ("tril_indices negative row", lambda T: T.tril_indices(-1, 3), None),
    ("triu_indices negative col", lambda T: T.triu_indices(3, -2), None),
    ("tril_indices float", lambda T: T.tril_indices(3, 3, dtype=T.float32), None),
    ("combinations of a matrix", lambda T: T.combinations(T.ones(2, 2)), None),
    ("combinations negative r", lambda T: T.combinations(T.ones(3), -1), None),
    ("vander of a matrix", lambda T: T.vander(T.ones(2, 2)), None),
    ("vander negative N", lambda T: T.vander(T.ones(2), -1), None),
])
def test_errors_as_pytorch(torch, name, fn, upto):
    assert_same_error(torch, fn, upto)


def test_row_stack_and_atleast_nd_warn_nothing(torch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        symgrad.row_stack([symgrad.ones(2), symgrad.ones(2)])
        symgrad.atleast_3d(symgrad.ones(2))
