"""Reductions, sorting and cumulative ops against PyTorch on the same inputs: values, dtypes,
indices (PyTorch's tie rule), grad_fn names and gradients, with ties, zeros, NaN and infinities
in the input, 0-d and empty tensors, and PyTorch's errors.  The registry's generic tests
(test_ops.py) cover ordinary values."""
import math
import warnings

import numpy as np
import pytest

import symgrad
from symgrad.ops import reductions

NAN, INF = math.nan, math.inf

# Ties in rows and columns, zeros (one and two in a row), a NaN, infinities of both signs.
EDGY = np.array([[1, 3, 3, 2], [5, 5, 1, NAN], [0, -2, 0, 4], [2, INF, 3, 0], [1, 2, -INF, 3]], dtype=np.float32)
# Distinct values, a single zero: where PyTorch's tie order is its kernel's (topk), no ties.
PLAIN = np.array([[0.5, -1.5, 2.0, 0.25], [3.0, 0.0, -0.75, 1.25], [-2.5, 1.75, 0.125, -0.5]], dtype=np.float32)


def linalg(T):
    """torch.linalg, or the module where symgrad's vector_norm and matrix_norm live."""
    return T.linalg if T is not symgrad else reductions


def _outputs(result):
    return tuple(result) if isinstance(result, tuple) else (result,)


def run(T, fn, values):
    """The outputs of ``fn(T, x)`` and, if the first one has a gradient, x's gradient for a
    cotangent with negative and positive entries."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's degrees-of-freedom warning for var
        x = T.tensor(values, requires_grad=values.dtype.kind == "f")
        outputs = _outputs(fn(T, x))
        first = outputs[0]
        grad = None
        if first.requires_grad:
            size = int(np.prod(tuple(first.shape)))
            cotangent = (np.arange(size, dtype=np.float32) - 1.5).reshape(tuple(first.shape))
            first.backward(T.tensor(cotangent))
            grad = x.grad
    names = [type(o.grad_fn).__name__ if o.grad_fn is not None else None for o in outputs]
    arrays = [o.detach().numpy() for o in outputs]
    return arrays, [repr(o.dtype) for o in outputs], names, None if grad is None else grad.numpy()


def assert_like_pytorch(torch, fn, values, rtol=2e-6):
    ours, theirs = run(symgrad, fn, values), run(torch, fn, values)
    for a, b in zip(ours[0], theirs[0]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6, equal_nan=True)
    assert ours[1:3] == theirs[1:3]
    assert (ours[3] is None) == (theirs[3] is None)
    if ours[3] is not None:
        np.testing.assert_allclose(ours[3], theirs[3], rtol=rtol, atol=1e-6, equal_nan=True)


ON_EDGES = {
    "max()": lambda T, x: x.max(),
    "min()": lambda T, x: T.min(x),
    "max(dim)": lambda T, x: T.max(x, 1),
    "max(dim=0, keepdim)": lambda T, x: x.max(dim=0, keepdim=True),
    "min(dim=-1)": lambda T, x: x.min(-1),
    "min(dim=0)": lambda T, x: T.min(x, 0),
    "amax(dim)": lambda T, x: x.amax(1),
    "amin()": lambda T, x: x.amin(),
    "amin(dims, keepdim)": lambda T, x: T.amin(x, (0, 1), keepdim=True),
    "argmax": lambda T, x: (x.sum(), x.argmax(1), x.argmax(), T.argmax(x, 0, keepdim=True), x.argmax(keepdim=True)),
    "argmin": lambda T, x: (x.sum(), x.argmin(0), T.argmin(x), x.argmin(-1, True)),
    "max(a, b)": lambda T, x: T.max(x, T.tensor(EDGY[::-1].copy())),
    "min(a, b)": lambda T, x: T.min(x, x * 0.5),
    "prod()": lambda T, x: x.prod(),
    "prod(dim)": lambda T, x: x.prod(1),
    "prod(0, keepdim)": lambda T, x: T.prod(x, 0, keepdim=True),
    "var()": lambda T, x: x.var(),
    "var(dim, correction=0)": lambda T, x: x.var(1, correction=0),
    "std(dim, keepdim)": lambda T, x: T.std(x, 0, keepdim=True),
    "std(unbiased=False)": lambda T, x: x.std(1, unbiased=False),
    "norm()": lambda T, x: x.norm(),
    "norm(dim)": lambda T, x: T.norm(x, dim=1),
    "norm(p=1)": lambda T, x: x.norm(p=1, dim=0, keepdim=True),
    "norm(p=inf)": lambda T, x: x.norm(p=INF, dim=1),
    "norm(p=-inf)": lambda T, x: x.norm(p=-INF, dim=0),
    "norm(p=0)": lambda T, x: (x.detach().norm(p=0, dim=1),),
    "vector_norm(1)": lambda T, x: linalg(T).vector_norm(x, 1, dim=1),
    "vector_norm(inf, all)": lambda T, x: linalg(T).vector_norm(x, INF),
    "matrix_norm(fro)": lambda T, x: linalg(T).matrix_norm(x),
    "matrix_norm(1)": lambda T, x: linalg(T).matrix_norm(x, 1),
    "matrix_norm(-1, keepdim)": lambda T, x: linalg(T).matrix_norm(x, -1, keepdim=True),
    "matrix_norm(inf)": lambda T, x: linalg(T).matrix_norm(x, INF),
    "matrix_norm(-inf, dims)": lambda T, x: linalg(T).matrix_norm(x, -INF, dim=(1, 0)),
    "any/all/count_nonzero": lambda T, x: (x.sum(), x.any(), x.any(1), T.all(x, 0), x.all(dim=(0, 1)),
                                           x.count_nonzero(), T.count_nonzero(x, 1), x.count_nonzero((0, 1))),
    "cumsum": lambda T, x: x.cumsum(1),
    "cumsum(0)": lambda T, x: T.cumsum(x, 0),
    "cumprod": lambda T, x: x.cumprod(1),
    "cumprod(0)": lambda T, x: T.cumprod(x, dim=0),
    "cumprod(-1)": lambda T, x: x.cumprod(-1),
    "sort": lambda T, x: x.sort(),
    "sort(0, descending)": lambda T, x: T.sort(x, 0, descending=True),
    "sort(stable)": lambda T, x: x.sort(dim=1, stable=True),
    "argsort": lambda T, x: (x.sum(), x.argsort(1), T.argsort(x, 0, descending=True)),
}


@pytest.mark.parametrize("name", list(ON_EDGES))
def test_on_ties_zeros_nan_and_infinities(torch, name):
    assert_like_pytorch(torch, ON_EDGES[name], EDGY)


ON_PLAIN = {
    "topk": lambda T, x: x.topk(2),
    "topk(smallest, dim 0)": lambda T, x: T.topk(x, 2, dim=0, largest=False),
    "topk(k = n)": lambda T, x: x.topk(4, 1),
    "prod() one zero": lambda T, x: x.prod(),
    "prod(dim) one zero": lambda T, x: x.prod(0),
    "cumprod one zero": lambda T, x: x.cumprod(1),
    "norm(p=inf) distinct": lambda T, x: x.norm(p=INF),
    "max(dim) distinct": lambda T, x: x.max(1),
}


@pytest.mark.parametrize("name", list(ON_PLAIN))
def test_on_distinct_values(torch, name):
    assert_like_pytorch(torch, ON_PLAIN[name], PLAIN)


SPECIAL = {  # name: (values, function)
    "prod() two zeros: zeros": (np.array([2.0, 0.0, 3.0, 0.0], np.float32), lambda T, x: x.prod()),
    "prod() zero and inf": (np.array([2.0, 0.0, 3.0, INF], np.float32), lambda T, x: x.prod()),
    "prod(dim) zeros elsewhere": (np.array([[2.0, 0.0], [3.0, INF]], np.float32), lambda T, x: x.prod(1)),
    "cumprod zero after inf": (np.array([[2.0, INF, 3.0, 0.0], [1.0, 2.0, INF, 3.0]], np.float32),
                               lambda T, x: x.cumprod(1)),
    "prod and cumprod over a dim of one": (np.array([[2.0, 0.0, INF]], np.float32),
                                           lambda T, x: x.prod(0).sum() + x.cumprod(0).sum()),
    "cumprod of an empty tensor": (np.zeros((0, 3), np.float32), lambda T, x: x.cumprod(1)),
    "float32 running totals in double": (np.array([[1e8, 1.0, -1e8], [1e20, 1e20, 1e-20]], np.float32),
                                         lambda T, x: (x.cumsum(1), x.cumprod(1))),
    "cumprod zeros first": (np.array([0.0, 0.0, 2.0, 1.0], np.float32), lambda T, x: x.cumprod(0)),
    "norm of zeros: 0, not NaN": (np.zeros((2, 3), np.float32), lambda T, x: x.norm()),
    "norm(dim) with a zero row": (np.array([[0.0, 0.0], [3.0, 4.0]], np.float32), lambda T, x: x.norm(dim=1)),
    "std of a constant: 0, not NaN": (np.full((3,), 2.0, np.float32), lambda T, x: x.std()),
    "std of equal values that do not sum exactly: 0": (np.full((2, 3, 4), 0.3, np.float32),
                                                        lambda T, x: x.std((0, 2), correction=2)),
    "float64 std of equal values: 0": (np.full((3,), 0.3), lambda T, x: x.std()),
    "var of one entry: NaN": (np.array([2.0], np.float32), lambda T, x: x.var()),
    "var(correction=3) over 2: inf": (np.array([[1.0, 2.0], [3.0, 5.0]], np.float32),
                                      lambda T, x: x.var(0, correction=3)),
    "signed zeros are equal: sort, max(dim), argmin": (np.array([[0.0, -0.0, 1.0, -0.0, 0.0]], np.float32),
                                                       lambda T, x: (*x.sort(1), *x.max(1), x.argmin(1))),
    "max(dim) NaN first": (np.array([[NAN, 1.0, NAN]], np.float32), lambda T, x: x.max(1)),
    "min(dim) of infinities": (np.array([[INF, -INF, -INF]], np.float32), lambda T, x: x.min(1)),
    "max(dim) of a 0-d tensor": (np.array(3.0, np.float32), lambda T, x: x.max(0)),
    "amax and amin of a 0-d tensor over dim 0, -1, (0, -1)": (np.array(3.0, np.float32),
                                                           lambda T, x: (x.amax(0), x.amin(-1), x.amax((0,)))),
    "min(dim=-1, keepdim) of a 0-d tensor": (np.array(3.0, np.float32), lambda T, x: x.min(-1, keepdim=True)),
    "argmax of a 0-d tensor": (np.array(3.0, np.float32), lambda T, x: (x * 1, x.argmax(), x.argmin(0))),
    "prod of a 0-d inf": (np.array(INF, np.float32), lambda T, x: x.prod()),
    "cumsum of a 0-d tensor": (np.array(2.0, np.float32), lambda T, x: x.cumsum(0)),
    "cumprod of a 0-d tensor": (np.array(2.0, np.float32), lambda T, x: x.cumprod(-1)),
    "sort of a 0-d tensor": (np.array(2.0, np.float32), lambda T, x: x.sort()),
    "topk of a 0-d tensor": (np.array(2.0, np.float32), lambda T, x: x.topk(1)),
    "max(dim) of an empty tensor": (np.zeros((0, 3), np.float32), lambda T, x: x.max(1)),
    "amin(dim) of an empty tensor": (np.zeros((0, 3), np.float32), lambda T, x: x.amin(1)),
    "prod of an empty tensor": (np.zeros((0, 3), np.float32), lambda T, x: x.prod()),
    "norm of an empty tensor": (np.zeros((0, 3), np.float32), lambda T, x: x.norm()),
    "any/all of an empty tensor": (np.zeros((0, 3), np.float32),
                                   lambda T, x: (x.sum(), x.any(), x.all(), x.count_nonzero(0))),
    "cumsum of an empty tensor": (np.zeros((0, 3), np.float32), lambda T, x: x.cumsum(0)),
    "sort of an empty tensor": (np.zeros((0, 3), np.float32), lambda T, x: x.sort(0)),
    "integer max(dim), argmax, sort": (np.array([[3, 1, 3], [0, 7, 7]], np.int64),
                                       lambda T, x: (*x.max(1), x.argmax(0), *x.sort(1))),
    "integer prod, cumsum, cumprod": (np.array([[3, 1, 2], [0, 7, 7]], np.int64),
                                      lambda T, x: (x.prod(), x.prod(1), x.cumsum(0), x.cumprod(1))),
    "bool any, all, sum of cumsum": (np.array([[True, False], [True, True]]),
                                     lambda T, x: (x.any(1), x.all(0), x.cumsum(1), x.prod(), *x.max(0))),
    "cumsum(dtype)": (np.array([[1, 2], [3, 4]], np.int64), lambda T, x: (x.cumsum(0, dtype=T.float64),)),
    "prod(dtype)": (np.array([[1.5, 2], [3, 4]], np.float32), lambda T, x: x.prod(dtype=T.float64)),
    "float64 var, norm": (np.array([[1.0, 2.0], [3.0, 5.0]]), lambda T, x: (x.var() + x.norm(p=1) + x.std(1).sum())),
}


@pytest.mark.parametrize("name", list(SPECIAL))
def test_special_inputs(torch, name):
    values, fn = SPECIAL[name]
    assert_like_pytorch(torch, fn, values)


def test_return_types_print_and_unpack_as_pytorch(torch):
    from parity import assert_same_printout
    for T in (symgrad, torch):
        values, indices = T.tensor(PLAIN).max(1)
        assert tuple(indices.tolist()) == (2, 0, 1)
    for fn in (lambda T, x: T.max(x, 1), lambda T, x: x.min(0, keepdim=True), lambda T, x: x.sort(),
               lambda T, x: x.topk(2)):
        ours, theirs = fn(symgrad, symgrad.tensor(PLAIN)), fn(torch, torch.tensor(PLAIN))
        assert_same_printout(repr(ours), repr(theirs))
        assert ours.values is ours[0] and ours.indices is ours[1]


def test_indices_have_no_gradient_and_values_do(torch):
    x = symgrad.tensor(PLAIN, requires_grad=True)
    values, indices = x.max(1)
    assert values.requires_grad and not indices.requires_grad and indices.grad_fn is None
    assert not x.argsort().requires_grad and not x.any().requires_grad


ERRORS = {
    "max(dim) out of range": lambda T, x: x.max(5),
    "argmax out of range": lambda T, x: T.argmax(x, -3),
    "sort out of range": lambda T, x: x.sort(2),
    "cumsum out of range": lambda T, x: x.cumsum(2),
    "prod out of range": lambda T, x: x.prod(-3),
    "var out of range": lambda T, x: x.var(4),
    "norm out of range": lambda T, x: x.norm(dim=3),
    "any out of range": lambda T, x: x.any(2),
    "0-d max(dim=1)": lambda T, x: x[0, 0].max(1),
    "max(dim) over an empty dim": lambda T, x: x[:0].max(0),
    "amin over an empty dim": lambda T, x: x[:0].amin(0),
    "amax over every dim, named, of an empty tensor": lambda T, x: x[:0].amax((0, 1)),
    "amin() of an empty tensor": lambda T, x: x[:0].amin(),
    "amax over a repeated empty dim (emptiness is found first)": lambda T, x: x[:0].amax((0, 0)),
    "amin over a repeated dim after an empty one": lambda T, x: x[:, :0].amin((0, 1, 0)),
    "amax over a repeated dim": lambda T, x: x.amax((1, -2, 1)),
    "amin of a 0-d tensor over dim 1": lambda T, x: x[0, 0].amin(1),
    "argmax over an empty dim": lambda T, x: x[:0].argmax(0),
    "argmax of an empty tensor": lambda T, x: x[:0].argmax(),
    "topk k too large": lambda T, x: x.topk(5),
    "topk k negative": lambda T, x: x.topk(-1),
    "matrix_norm of a vector": lambda T, x: linalg(T).matrix_norm(x[0]),
    "matrix_norm order 3": lambda T, x: linalg(T).matrix_norm(x, 3),
    "matrix_norm equal dims": lambda T, x: linalg(T).matrix_norm(x, dim=(0, 0)),
    "norm('fro') over three dims": lambda T, x: x.norm("fro", dim=(0, 1, 1)),
    "vector_norm ord 'fro'": lambda T, x: linalg(T).vector_norm(x, "fro"),
    "argmax of bools": lambda T, x: (x > 0).argmax(),
    "norm with an order matrix_norm refuses": lambda T, x: x.norm("abc"),
    "matrix_norm's order is checked before the rank": lambda T, x: linalg(T).matrix_norm(x[0], "abc"),
    "vector_norm of integers, with a float dtype": lambda T, x: linalg(T).vector_norm(x.long(), dtype=T.float64),
    "vector_norm of integers, before the dims": lambda T, x: linalg(T).vector_norm(x.long(), dim=5),
}
RECORD_TIME_ERRORS = {  # raised by the op's shape and dtype rule: PyTorch's words, then op, shapes, dtypes
    "max() of an empty tensor": lambda T, x: x[:0].max(),
    "min() of an empty tensor": lambda T, x: x[:0].min(),
    "var of integers": lambda T, x: x.long().var(),
    "std of integers": lambda T, x: x.long().std(0),
    "norm of integers": lambda T, x: x.long().norm(),
    "matrix_norm of integers": lambda T, x: linalg(T).matrix_norm(x.long(), 1),
    "inf norm of an empty tensor": lambda T, x: linalg(T).vector_norm(x[:0], INF),
}


def _error(T, fn):
    try:
        fn(T, T.tensor(PLAIN, requires_grad=True))
    except Exception as error:  # noqa: BLE001  (class and words are compared)
        return type(error), str(error)
    raise AssertionError("no error")


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_have_pytorchs_class_and_words(torch, name):
    assert _error(symgrad, ERRORS[name]) == _error(torch, ERRORS[name])


@pytest.mark.parametrize("name", list(RECORD_TIME_ERRORS))
def test_errors_at_record_time_start_with_pytorchs_words(torch, name):
    (ours, our_words), (theirs, their_words) = (_error(T, RECORD_TIME_ERRORS[name]) for T in (symgrad, torch))
    assert ours is theirs
    assert our_words.startswith(their_words)


def test_a_failed_call_records_nothing_and_later_calls_work(torch):
    x = symgrad.tensor(PLAIN, requires_grad=True)
    with pytest.raises(IndexError):
        x.max(7)
    with pytest.raises(RuntimeError):
        x.long().var()
    values, _ = x.max(1)
    values.sum().backward()
    expected = np.zeros_like(PLAIN)
    expected[[0, 1, 2], [2, 0, 1]] = 1
    np.testing.assert_array_equal(x.grad.numpy(), expected)


@pytest.mark.parametrize("ord", [3, 0.5, 1.5, -1, 2.5, 4])
def test_p_norms_to_second_order_with_zero_rows_and_entries(torch, ord):
    """Any real p: PyTorch's values, its norm_backward (zero where the norm is 0, or at x = 0 for
    p < 1), and the gradient of that gradient."""
    values = np.array([[0.5, -1.5, 0.0, 2.0], [1.0, 0.0, -0.25, 3.0], [0.0, 0.0, 0.0, 0.0]])
    found = []
    for T in (symgrad, torch):
        x = T.tensor(values, requires_grad=True)
        norms = T.linalg.vector_norm(x, ord, dim=1)
        (g,) = T.autograd.grad((norms * T.tensor([1.0, -2.0, 0.5])).sum(), [x], create_graph=True)
        (h,) = T.autograd.grad((g * T.tensor(np.arange(12.0).reshape(3, 4) / 7)).sum(), [x])
        found.append([norms.detach().numpy(), g.detach().numpy(), h.numpy(), type(norms.grad_fn).__name__])
    for ours, theirs in zip(found[0][:3], found[1][:3]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, equal_nan=True)
    assert found[0][3] == found[1][3] == "LinalgVectorNormBackward0"


def test_gradients_are_symbolic_and_programs_are_shared(torch):
    """The second call of the same structure runs the compiled program: PyTorch's numbers again."""
    for values in (PLAIN, PLAIN * 2):
        assert_like_pytorch(torch, lambda T, x: x.max(1)[0].sum() + x.cumprod(1).sum() + x.topk(2)[0].sum(), values)


def test_torch_linalg_namespace(torch):
    results = []
    for T in (symgrad, torch):
        x = T.tensor([[3.0, 4.0], [1.0, 2.0]], requires_grad=True)
        a = T.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
        y = T.linalg.vector_norm(x) + T.linalg.matrix_norm(x, ord=1) + T.linalg.cross(a, T.tensor([[0.0, 1.0, 5.0]])).sum()
        y.backward()
        results.append((y.item(), x.grad.numpy(), a.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    for ours, theirs in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("ord", [float("inf"), float("-inf")])
def test_extreme_norm_gradient_multiplies_its_mask(torch, ord):
    """PyTorch's norm_backward for +-inf: sign(x) * (g / count) * mask, so an infinite cotangent is NaN at
    the entries that do not reach the norm (helper's fuzzer find: norm(inf) then acos gave 0 there)."""
    def run(T):
        x = T.tensor([[1.0, -2.0, 2.0], [0.5, 0.25, float("nan")], [0.0, -0.0, 0.0]], requires_grad=True)
        norm = T.linalg.vector_norm(x, ord, dim=1)
        (norm * T.tensor([-float("inf"), 1.0, 3.0])).sum().backward()
        return norm.detach().numpy(), x.grad.numpy()

    for ours, theirs in zip(run(symgrad), run(torch)):
        np.testing.assert_array_equal(ours, theirs)
