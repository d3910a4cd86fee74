"""Rounded division, inverse trigonometric and hyperbolic functions, atan2, fmod, hypot and copysign
at their edges (zeros of both signs, inf, NaN, integers, the domain's ends), against PyTorch on
the same inputs: values, dtypes, grad_fn names and gradients."""
import numpy as np
import pytest

import symgrad

INF, NAN = float("inf"), float("nan")


def _same(s, t):
    """Equal values (NaN where PyTorch's is, the sign of every zero) and dtype."""
    s, t = np.asarray(s.detach().numpy()), t.detach().numpy(force=True)  # sgn's gradient is a ZeroTensor
    assert str(s.dtype) == str(t.dtype)
    np.testing.assert_allclose(s, t, rtol=1e-6, atol=0, equal_nan=True)
    zeros = t == 0
    assert (np.signbit(s[zeros]) == np.signbit(t[zeros])).all(), (s, t)


def _compare(torch, f, *values, dtype="float32", grads=True):
    """``f`` run by both libraries on ``values``; with ``grads``, the backward of its sum too."""
    differentiable = dtype.startswith("float")
    ts = [torch.tensor(v, dtype=getattr(torch, dtype), requires_grad=differentiable) for v in values]
    ss = [symgrad.tensor(v, dtype=getattr(symgrad, dtype), requires_grad=differentiable) for v in values]
    t, s = f(torch, *ts), f(symgrad, *ss)
    _same(s, t)
    assert type(s.grad_fn).__name__ == type(t.grad_fn).__name__
    if grads and t.requires_grad:
        t.sum().backward()
        s.sum().backward()
        for a, b in zip(ss, ts):
            _same(a.grad, b.grad)
    return s


A = [-7.0, 7.0, -7.5, 3.0, 0.0, -0.0, 1.0, -1.0, INF, NAN, 5.0]
B = [0.1, -0.1, 2.0, 0.0, 0.0, 3.0, INF, -INF, 2.0, 1.0, -0.7]


@pytest.mark.parametrize("mode", ["floor", "trunc", None])
def test_div_rounding_mode_values_and_zero_gradient(torch, mode):
    """Floor mode is PyTorch's div_floor (7 / 0.1 floors to 69, a zero takes the sign of a / b);
    a rounded quotient's gradient is zero everywhere, NaN and inf included (DivBackward2)."""
    out = _compare(torch, lambda t, a, b: t.div(a, b, rounding_mode=mode), A, B)
    assert type(out.grad_fn).__name__ == "DivBackward2"
    _compare(torch, lambda t, a, b: a.div(b, rounding_mode=mode), A, B, dtype="float64")
    _compare(torch, lambda t, a: t.divide(a, -0.7, rounding_mode=mode), A)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_rounding_mode_on_integers_stays_integer(torch, mode):
    a, b = [-7, 7, 5, -5, 0], [2, -2, 3, 3, -4]
    out = _compare(torch, lambda t, a, b: t.div(a, b, rounding_mode=mode), a, b, dtype="int64")
    assert out.dtype is symgrad.int64
    _compare(torch, lambda t, a: t.div(a, 2, rounding_mode=mode), a, dtype="int32")
    _compare(torch, lambda t, a: t.div(a, 2.5, rounding_mode=mode), a, dtype="int64")  # a float number: float
    _compare(torch, lambda t, b: t.div(7, b, rounding_mode=mode), b, dtype="int64")
    _compare(torch, lambda t, a, b: t.div(a, b.bool(), rounding_mode=mode), a, b, dtype="int64")


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_integer_division_by_zero_and_bool_refused_as_pytorch(torch, mode):
    for lib in (torch, symgrad):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            lib.div(lib.tensor([1, 2]), lib.tensor([0, 1]), rounding_mode=mode)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            lib.div(lib.tensor([1, 2]), 0, rounding_mode=mode)
        with pytest.raises(NotImplementedError, match=f'"div_{mode}_cpu" not implemented for \'Bool\''):
            lib.div(lib.tensor([True]), lib.tensor([True]), rounding_mode=mode)
        x = lib.tensor([5, 7])
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            x.div_(lib.tensor([0, 1]), rounding_mode=mode)
        assert x.tolist() == [5, 7]  # unchanged after the error
    _compare(torch, lambda t, a, b: t.div(a, b, rounding_mode=mode), [1.0, 0.0, -1.0], [0.0, 0.0, -0.0])


def test_div_in_place_and_aliases(torch):
    for lib in (torch, symgrad):
        x = lib.tensor([5, -7])
        x.div_(2, rounding_mode="floor")
        assert x.tolist() == [2, -4]
        x.divide_(lib.tensor([-2, 3]), rounding_mode="trunc")
        assert x.tolist() == [-1, -1]
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
            x.div_(2.5, rounding_mode="floor")
        with pytest.raises(RuntimeError, match="div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                                               "but found 'round'"):
            lib.div(x, 2, rounding_mode="round")
    out = _compare(torch, lambda t, a, b: t.true_divide(a, b), A, B)
    assert type(out.grad_fn).__name__ == "DivBackward0"
    _compare(torch, lambda t, a, b: a.true_divide(b) + a.divide(b) + t.divide(a, b), A, B)
    _compare(torch, lambda t, a, b: t.div(a, b, rounding_mode=None), [1, 2, -3], [2, 4, 0], dtype="int64")


def test_floor_divide_and_remainder_gradient_follow_div_floor(torch):
    """``//`` and remainder's d/d(other) are PyTorch's div_floor: the sign of a zero quotient."""
    _compare(torch, lambda t, a: a // 0.7, [-0.0, 0.0, 0.5, -0.5], grads=False)
    _compare(torch, lambda t, a, b: t.remainder(a, b), [-0.0, 0.0, 0.5, -0.5, 7.0], [0.7, -0.7, 0.7, 0.7, 0.1])


UNARY = ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]
ALIASES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
           "atanh": "arctanh"}
EDGES = [1.0, -1.0, 0.5, 2.0, 0.0, -0.0, -2.0, INF, -INF, NAN, 1e30, 100.0]


@pytest.mark.parametrize("name", UNARY)
def test_inverse_and_hyperbolic_functions_at_their_edges(torch, name):
    """asin'(1) and atanh'(1) are inf, acosh'(-2) a number (its value NaN), sinh'(inf) inf."""
    _compare(torch, lambda t, x: getattr(t, name)(x), EDGES)
    _compare(torch, lambda t, x: getattr(t, name)(x), EDGES, dtype="float64")
    out = _compare(torch, lambda t, x: getattr(t, name)(x), [1, 0, -1, 3], dtype="int64")
    assert out.dtype is symgrad.float32
    _compare(torch, lambda t, x: getattr(t, name)(x), [True, False], dtype="bool")
    _compare(torch, lambda t, x: getattr(x, name)() * 2, 0.5)


@pytest.mark.parametrize("name", UNARY)
def test_aliases_and_in_place_variants(torch, name):
    for spelling in {name, ALIASES.get(name, name)}:
        _compare(torch, lambda t, x: getattr(t, spelling)(x), EDGES)
        _compare(torch, lambda t, x: getattr(x, spelling)(), EDGES)
        written = name not in ("asinh", "acosh", "atanh")  # theirs have no derivative (below)
        _compare(torch, lambda t, x: getattr(x * 1, f"{spelling}_")(), EDGES, grads=written)
    for lib in (torch, symgrad):
        x = lib.tensor([1, 2])
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
            getattr(x, f"{name}_")()
        assert x.tolist() == [1, 2]


@pytest.mark.parametrize("name", ["asinh", "acosh", "atanh"])
def test_in_place_inverse_hyperbolic_has_no_derivative_in_pytorch(torch, name):
    """``asinh_`` is recorded as AsinhBackward1, whose backward PyTorch never wrote."""
    for spelling in (name, ALIASES[name]):
        _compare(torch, lambda t, x: getattr(x * 1, f"{spelling}_")(), EDGES, grads=False)
        for lib in (torch, symgrad):
            x = lib.tensor([1.5, 0.5], requires_grad=True)
            y = getattr(x * 1, f"{spelling}_")()
            assert type(y.grad_fn).__name__ == f"{name.capitalize()}Backward1"
            with pytest.raises(NotImplementedError, match=f"the derivative for 'inplace version of {name}' is not "
                                                          "implemented"):
                y.sum().backward()


def test_atan2_quadrants_zeros_and_gradient(torch):
    """At (0, 0), and where y^2 + x^2 underflows, PyTorch's gradient is 0 (its reciprocal is masked)."""
    y = [0.0, 1.0, -0.0, 0.0, 1e-30, INF, 1.0, -1.0, NAN, -0.0]
    x = [0.0, 0.0, -1.0, -0.0, 0.0, 1.0, INF, -INF, 0.0, -0.0]
    out = _compare(torch, lambda t, a, b: t.atan2(a, b), y, x)
    assert type(out.grad_fn).__name__ == "Atan2Backward0"
    _compare(torch, lambda t, a, b: t.arctan2(a, b) + a.atan2(b) + a.arctan2(b), y, x, dtype="float64")
    _compare(torch, lambda t, a, b: (a * 1).atan2_(b) + (a * 1).arctan2_(b), y, x)
    _compare(torch, lambda t, a, b: t.atan2(a, b), [1, 0, -1], [2, 0, -3], dtype="int64")
    _compare(torch, lambda t, a, b: t.atan2(a, b[0]), [[1.0, -2.0], [0.5, 3.0]], [-1.5, 2.0])  # broadcast 0-d
    for lib in (torch, symgrad):
        with pytest.raises(TypeError, match=r"atan2\(\): argument 'input' \(position 1\) must be Tensor, not float"):
            lib.atan2(1.0, lib.tensor([1.0]))


def test_fmod_takes_the_sign_of_the_dividend(torch):
    a = [5.5, -5.5, 0.0, -0.0, 3.0, INF, 2.0, -2.0]
    b = [2.0, 2.0, -1.0, 1.0, 0.0, 1.0, INF, -0.7]
    out = _compare(torch, lambda t, x, y: t.fmod(x, y), a, b)
    assert type(out.grad_fn).__name__ == "FmodBackward1"
    assert type(_compare(torch, lambda t, x: x.fmod(-1.5), a).grad_fn).__name__ == "FmodBackward0"
    _compare(torch, lambda t, x, y: (x * 1).fmod_(y), a, b)
    _compare(torch, lambda t, x, y: t.fmod(x, y), [5, -5, 7, 0], [2, 3, -4, 5], dtype="int64")
    _compare(torch, lambda t, x: t.fmod(x, 2.5), [5, -5], dtype="int64")
    for lib in (torch, symgrad):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            lib.fmod(lib.tensor([5, -5]), lib.tensor([0, 3]))
        with pytest.raises(NotImplementedError, match='"fmod_cpu" not implemented for \'Bool\''):
            lib.fmod(lib.tensor([True]), lib.tensor([True]))


def test_hypot_and_copysign(torch):
    a = [5.5, -5.5, 0.0, -0.0, 3.0, INF, 2.0, NAN, 1e30]
    b = [2.0, 2.0, -1.0, 1.0, 0.0, 1.0, INF, 1.0, 1e30]
    out = _compare(torch, lambda t, x, y: t.hypot(x, y), a, b)
    assert type(out.grad_fn).__name__ == "HypotBackward0"
    _compare(torch, lambda t, x, y: x.hypot(y[0]) + (x * 1).hypot_(y), a, b, dtype="float64")
    out = _compare(torch, lambda t, x, y: t.copysign(x, y), a, [2.0, -2.0, -1.0, 1.0, -0.0, 1.0, -INF, NAN, -1.0])
    assert type(out.grad_fn).__name__ == "CopysignBackward0"
    assert type(_compare(torch, lambda t, x: x.copysign(-0.0), a).grad_fn).__name__ == "CopysignBackward1"
    _compare(torch, lambda t, x, y: (x * 1).copysign_(y), a, b)
    assert _compare(torch, lambda t, x, y: t.copysign(x, y), [5, -5], [-2, 3], dtype="int64").dtype is symgrad.float32
    for lib in (torch, symgrad):
        with pytest.raises(NotImplementedError, match='"hypot_cpu" not implemented for \'Long\''):
            lib.hypot(lib.tensor([5]), lib.tensor([1]))
        with pytest.raises(TypeError, match=r"hypot\(\): argument 'other' \(position 2\) must be Tensor, not float"):
            lib.hypot(lib.tensor([5.0]), 1.0)


def test_sgn_is_sign_for_real_tensors_and_signbit_reads_the_bit(torch):
    """sgn's gradient is zero even for a NaN cotangent; signbit is true at -0.0 and -inf, false for bools."""
    x = [-2.0, 0.0, -0.0, 3.0, NAN, -INF, INF]
    _compare(torch, lambda t, a: t.sgn(a) + a.sgn() + (a * 1).sgn_(), x, dtype="float64")
    out = _compare(torch, lambda t, a: t.sgn(a), x)
    assert type(out.grad_fn).__name__ == "SgnBackward0"
    _compare(torch, lambda t, a: t.sgn(a), [-3, 0, 2], dtype="int64")
    _compare(torch, lambda t, a: t.sgn(a), [True, False], dtype="bool")
    ts, ss = torch.tensor(x, requires_grad=True), symgrad.tensor(x, requires_grad=True)
    torch.sgn(ts).backward(torch.tensor([NAN] * len(x)))
    symgrad.sgn(ss).backward(symgrad.tensor([NAN] * len(x)))
    _same(ss.grad, ts.grad)
    out = _compare(torch, lambda t, a: t.signbit(a), x)
    assert out.dtype is symgrad.bool and not out.requires_grad
    _compare(torch, lambda t, a: a.signbit(), [-1, 0, 2], dtype="int64")
    _compare(torch, lambda t, a: a.signbit(), [True, False], dtype="bool")


def test_fmax_fmin_ignore_nan_and_give_ties_to_input(torch):
    a = [1.0, 2.0, NAN, NAN, 3.0, -0.0, 0.0, -INF]
    b = [1.0, NAN, 2.0, NAN, 1.0, 0.0, -0.0, INF]
    for name in ("fmax", "fmin"):
        out = _compare(torch, lambda t, x, y: getattr(t, name)(x, y), a, b)
        assert type(out.grad_fn).__name__ == f"{name.capitalize()}Backward0"
        _compare(torch, lambda t, x, y: getattr(x, name)(y[0]), a, b, dtype="float64")  # a 0-d other
        _compare(torch, lambda t, x, y: getattr(t, name)(x, y), [1, 5, -2], [3, 2, -2], dtype="int64")
        _compare(torch, lambda t, x, y: getattr(t, name)(x, y), [True, False], [False, False], dtype="bool")
        for lib in (torch, symgrad):
            with pytest.raises(TypeError, match=rf"{name}\(\): argument 'other' \(position 2\) must be Tensor"):
                getattr(lib, name)(lib.tensor([1.0]), 2.0)


def test_xlogy_is_zero_at_zero_x_unless_y_is_nan(torch):
    x = [0.0, 0.0, 0.0, 1.0, 2.0, -1.0, 0.0, NAN, -0.0]
    y = [0.0, NAN, -1.0, 0.0, 3.0, 2.0, INF, 1.0, 5.0]
    out = _compare(torch, lambda t, a, b: t.xlogy(a, b), x, y)
    assert type(out.grad_fn).__name__ == "XlogyBackward0"
    assert type(_compare(torch, lambda t, a: t.xlogy(a, 2.5), x).grad_fn).__name__ == "XlogyBackward2"
    weights = [-0.75, 0.5, 1.25, -1.5, 0.25, 2.0, -1.0, 3.0, -2.0]
    # a number y: log(0) is -inf, signed (random-programs fuzzer: SymPy's log(0) is an unsigned infinity), and x == 0
    # masks the gradient unless y > 0, a NaN y included (PyTorch's XlogyBackward2)
    for number in (0.0, -0.0, NAN, -1.0, INF, -INF, 2.0):
        _compare(torch, lambda t, a: t.xlogy(a, number) * t.tensor(weights), x)
    assert type(_compare(torch, lambda t, b: t.xlogy(2, b), y).grad_fn).__name__ == "XlogyBackward1"
    _compare(torch, lambda t, a, b: a.xlogy(b) + (a * 1).xlogy_(b), x, y, dtype="float64")
    assert _compare(torch, lambda t, a, b: t.xlogy(a, b), [0, 2], [0, 3], dtype="int64").dtype is symgrad.float32


def test_a_float_exponent_that_changes_keeps_pytorchs_sqrt(torch):
    """The same structure with another Python float compiles one program taking the floats as inputs;
    pow's exponent stays baked (``Op.reads_numbers``): at 0.5 PyTorch takes sqrt, so (-inf) ** 0.5 is NaN
    and (-0.0) ** 0.5 is -0.0 after 0.7 was used too (a generic jnp.power gave inf and 0.0)."""
    for exponent in (0.7, 0.5, 2.0, -0.5, 0.5):
        _compare(torch, lambda t, a: a ** exponent, [-INF, -0.0, 4.0, 0.0, INF])
