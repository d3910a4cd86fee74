"""Variants of existing ops against PyTorch on the same inputs: einsum over diagonals (a repeated
subscript), max_pool2d's indices, and ``//`` (whose gradient PyTorch refuses)."""
import numpy as np
import pytest

import symgrad

RNG = np.random.default_rng(3)
NAN = float("nan")


@pytest.mark.parametrize("equation,shapes", [("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("iij->ji", [(3, 3, 2)]),
                                             ("iji->j", [(3, 2, 3)]), ("iii", [(2, 2, 2)]),
                                             ("ij,jj->i", [(2, 3), (3, 3)]), ("...ii->...i", [(2, 3, 3)])])
def test_einsum_with_repeated_subscripts(equation, shapes, torch):
    values = [RNG.standard_normal(s) for s in shapes]
    results = []
    for lib in (symgrad, torch):
        inputs = [lib.tensor(v, requires_grad=True) for v in values]
        out = lib.einsum(equation, *inputs)
        (out * lib.tensor(np.arange(1.0, 1 + out.numel()).reshape(tuple(out.shape)))).sum().backward()
        results.append((out.detach().numpy(), [x.grad.numpy() for x in inputs], type(out.grad_fn).__name__))
    (value, grads, name), (t_value, t_grads, t_name) = results
    np.testing.assert_allclose(value, t_value, rtol=1e-12)
    for g, t in zip(grads, t_grads):
        np.testing.assert_allclose(g, t, rtol=1e-12)
    assert name == t_name


def test_einsum_repeated_subscript_of_other_sizes_raises_as_pytorch(torch):
    with pytest.raises(RuntimeError) as ours:
        symgrad.einsum("ii", symgrad.ones(3, 4))
    with pytest.raises(RuntimeError) as theirs:
        torch.einsum("ii", torch.ones(3, 4))
    assert str(ours.value).startswith(str(theirs.value))


@pytest.mark.parametrize("values,args", [
    (np.array([[[[1.0, 3.0, 3.0, 0.0], [NAN, 2.0, 5.0, 5.0], [0.0, NAN, 1.0, 1.0]]]]), (2, 1, 1)),
    (RNG.standard_normal((2, 3, 7, 6)), (3, 2, 1, 2, True)),
    (RNG.standard_normal((3, 7, 6)), ((2, 3), (1, 2), (1, 0), (2, 1))),
])
def test_max_pool2d_indices(values, args, torch):
    """The first largest entry of each window, or its last NaN, as a position in the input plane."""
    results = []
    for lib in (symgrad, torch):
        x = lib.tensor(values, requires_grad=True)
        out, indices = lib.nn.functional.max_pool2d(x, *args, return_indices=True)
        results.append((out.detach().numpy(), indices.numpy(), repr(indices.dtype), indices.requires_grad,
                        type(out.grad_fn).__name__))
    np.testing.assert_allclose(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][2:] == results[1][2:]


def test_floor_divide_values_and_refused_gradient(torch):
    a, b = np.array([3.5, -2.5, 4.0, -0.5]), np.array([2.0, 2.0, 0.0, 1.0])
    outcomes = []
    for lib in (symgrad, torch):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b)
        values = [x // y, 7.0 // x, x.floor_divide(2), lib.floor_divide(lib.tensor([7, -7]), 2),
                  lib.tensor([5, -5]) // lib.tensor([2.5])]
        names = [type(v.grad_fn).__name__ for v in values]
        with pytest.raises(RuntimeError) as refused:
            (x // y).sum().backward()
        held = lib.tensor(a, requires_grad=True)
        ((held // 2).detach() * held).sum().backward()  # a gradient around the division still flows
        outcomes.append(([v.detach().numpy() for v in values], [repr(v.dtype) for v in values], names,
                         str(refused.value), held.grad.numpy()))
    ours, theirs = outcomes
    for o, t in zip(ours[0], theirs[0]):
        np.testing.assert_array_equal(o, t)
    assert ours[1:4] == theirs[1:4]
    np.testing.assert_array_equal(ours[4], theirs[4])


def test_remainder_of_a_number_refuses_its_gradient_and_remainder_in_place(torch):
    """``2.0 % x`` (``__rmod__``) and ``torch.remainder(2.0, x)``: PyTorch's NotImplemented node;
    ``x %= d`` writes into x."""
    a = np.array([0.7, -1.3, 2.5, -4.0])
    outcomes = []
    for lib in (symgrad, torch):
        y = lib.tensor(a, requires_grad=True)
        values = [2.0 % y, lib.remainder(-3.0, y), y % 0.75]
        with pytest.raises(RuntimeError) as refused:
            values[0].sum().backward()
        w = lib.tensor(a)
        alias = w
        w %= 0.75
        outcomes.append(([v.detach().numpy() for v in values], [type(v.grad_fn).__name__ for v in values],
                         str(refused.value), alias is w, w.numpy()))
    ours, theirs = outcomes
    for o, t in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(o, t, rtol=1e-12)
    assert ours[1:4] == theirs[1:4]
    np.testing.assert_allclose(ours[4], theirs[4], rtol=1e-12)


def test_round_to_decimals_as_function_method_and_in_place(torch):
    a = np.array([0.125, -2.5, 1234.5678, 0.35, -0.05])
    outcomes = []
    for lib in (symgrad, torch):
        x = lib.tensor(a, requires_grad=True)
        values = [x.round(decimals=2), lib.round(x, decimals=-1), lib.round(x, decimals=0), x.round()]
        sum(v.sum() for v in values).backward()
        q = lib.tensor(a)
        q.round_(decimals=1)
        with pytest.raises(NotImplementedError) as refused:
            lib.round(lib.tensor([1, 2]), decimals=1)
        outcomes.append(([v.detach().numpy() for v in values] + [q.numpy(), x.grad.numpy()],
                         [type(v.grad_fn).__name__ for v in values], str(refused.value)))
    ours, theirs = outcomes
    for o, t in zip(ours[0], theirs[0]):  # XLA's vectorized division may differ in the last bit (docs/api.md)
        np.testing.assert_allclose(o, t, rtol=1e-15, atol=0)
    assert ours[1:] == theirs[1:]


@pytest.mark.parametrize("fn", [lambda t: t.tensor([1]) // 0, lambda t: t.tensor([1]) // t.tensor([0]),
                                lambda t: t.tensor([True]) // t.tensor([True]),
                                # were: 0 (XLA's integer remainder by zero), and remainder_ wrote it
                                lambda t: t.tensor([1, 2]) % 0, lambda t: t.tensor([4, 5]) % t.tensor([1, 0]),
                                lambda t: 5 % t.tensor([0, 1]), lambda t: t.remainder(t.tensor(True), t.tensor(0)),
                                lambda t: t.tensor([3]).remainder_(0)])
def test_floor_divide_errors(fn, torch):
    with pytest.raises(Exception) as ours:
        fn(symgrad)
    with pytest.raises(Exception) as theirs:
        fn(torch)
    assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


def test_an_integer_remainder_by_zero_leaves_its_tensor_as_it_was(torch):
    """The refused ``remainder_`` wrote nothing (it wrote the zeros XLA computes).  PyTorch's loop
    writes the elements before the zero and then raises; ours is the tensor as it was."""
    def run(T):
        a = T.tensor([7, -7])
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            a.remainder_(T.tensor([2, 0]))
        return a.tolist(), (T.tensor([7.0, -7.0]) % 0).tolist()

    ours, theirs = run(symgrad), run(torch)
    assert ours[0] == [7, -7] and theirs[0] == [1, -7]
    assert np.isnan(ours[1]).all() and np.isnan(theirs[1]).all()
