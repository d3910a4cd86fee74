"""``out=`` on PyTorch's functions: the result written into the given tensor, with PyTorch's
casts, resizes, warnings and refusals (compared with the installed PyTorch)."""
import warnings

import numpy as np
import pytest

import symgrad


def _both(torch, fn):
    """fn(T) under symgrad and PyTorch: (result is out, out's values and dtype, warnings) each."""
    results = []
    for T in (symgrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned, out = fn(T)
        results.append((returned is out, np.asarray(out.numpy()), str(out.dtype), [str(w.message)[:60] for w in caught]))
    return results


CASES = {
    "matmul": lambda T: (lambda out: (T.matmul(T.ones(2, 3), T.ones(3, 2) * 2, out=out), out))(T.zeros(2, 2)),
    "mul, a wider out dtype": lambda T: (lambda out: (T.mul(T.ones(2), 3, out=out), out))(T.zeros(2, dtype=T.float64)),
    "add of integers into floats": lambda T: (lambda out: (T.add(T.ones(2, dtype=T.int64), 2, out=out), out))(T.zeros(2)),
    "an empty out is resized silently": lambda T: (lambda out: (T.exp(T.zeros(2, 2), out=out), out))(T.zeros(0)),
    "a full out is resized with a warning": lambda T: (lambda out: (T.sub(T.ones(2, 2), 1, out=out), out))(T.ones(3)),
    "sum": lambda T: (lambda out: (T.sum(T.arange(6.).reshape(2, 3), 1, out=out), out))(T.zeros(2)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_out_gets_pytorchs_values_and_is_returned(torch, name):
    ours, theirs = _both(torch, CASES[name])
    assert ours[0] and theirs[0]
    np.testing.assert_array_equal(ours[1], theirs[1])
    assert ours[2:] == theirs[2:]


def test_a_tuple_result_fills_a_tuple_of_outs(torch):
    found = []
    for T in (symgrad, torch):
        values, indices = T.zeros(2), T.zeros(2, dtype=T.int64)
        result = T.max(T.tensor([[1., 5., 2.], [7., 0., 3.]]), 1, out=(values, indices))
        assert result[0] is values and result[1] is indices
        found.append((values.tolist(), indices.tolist()))
    assert found[0] == found[1] == ([5.0, 7.0], [1, 0])


ERRORS = {
    "an input requires grad": lambda T: T.mul(T.ones(2, requires_grad=True), 2, out=T.zeros(2)),
    "out requires grad": lambda T: T.mul(T.ones(2), 2, out=T.zeros(2, requires_grad=True)),
    "a float result into integers": lambda T: T.mul(T.ones(2), 2, out=T.zeros(2, dtype=T.int64)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_refusals_are_pytorchs_and_change_nothing(torch, name):
    messages = []
    for T in (symgrad, torch):
        with pytest.raises(RuntimeError) as error:
            ERRORS[name](T)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    out = symgrad.ones(2)
    with pytest.raises(RuntimeError):
        symgrad.mul(symgrad.ones(2, requires_grad=True), 2, out=out)
    assert out.tolist() == [1.0, 1.0]


def test_under_no_grad_out_takes_a_result_of_tensors_that_require_grad():
    a = symgrad.tensor([1., 2.], requires_grad=True)
    out = symgrad.zeros(2)
    with symgrad.no_grad():
        symgrad.mul(a, a, out=out)
    assert out.tolist() == [1.0, 4.0] and not out.requires_grad
