"""Special functions (``torch.lgamma`` ... and ``torch.special``) and their elementwise neighbours
(nan_to_num, logit, logaddexp, deg2rad, ldexp, frexp, heaviside, float_power, positive and the
other spellings of neg, trunc and abs), against PyTorch on the same inputs: a grid of ordinary and
edge values (zeros of both signs, the poles of lgamma and digamma, the ends of erfinv's domain, inf,
NaN), values and gradients in float32 and float64, result dtypes, backward nodes and errors.

Each group is one graph per library and dtype (a leaf per function, one backward), so a handful of
programs are compiled for the whole file."""
import math

import numpy as np
import pytest
import sympy as sp

import symgrad
from symgrad.ir import special as S

INF, NAN = math.inf, math.nan
# No subnormal numbers: XLA's CPU code flushes them to zero, PyTorch computes with them.
GRID = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, -2.5, 1e-30, -1e-30, 1e-5, 0.999999, -0.999999, 3.0, 10.0,
        -10.0, 30.0, 100.0, 1e10, 1e30, -1e30, INF, -INF, NAN, 1.5, -1.5, 0.25, 4.9, 5.0, 5.1, -0.75, 0.9, 7.3,
        -26.0, -0.3]
TOLERANCE = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-10, atol=1e-14)}

UNARY = {
    "lgamma": lambda t, x: t.lgamma(x), "digamma": lambda t, x: t.digamma(x), "erfinv": lambda t, x: x.erfinv(),
    "erfc": lambda t, x: t.erfc(x), "i0": lambda t, x: t.i0(x), "sinc": lambda t, x: t.sinc(x),
    "deg2rad": lambda t, x: t.deg2rad(x), "rad2deg": lambda t, x: x.rad2deg(),
    "logit": lambda t, x: t.logit(x), "logit(eps=0.1)": lambda t, x: t.logit(x, 0.1),
    "logit(eps=0.7)": lambda t, x: x.logit(eps=0.7), "logit(eps=-0.1)": lambda t, x: t.logit(x, -0.1),
    "nan_to_num": lambda t, x: t.nan_to_num(x),
    "nan_to_num(1.5, 7, -1e300)": lambda t, x: x.nan_to_num(nan=1.5, posinf=7.0, neginf=-1e300),
    "polygamma(0)": lambda t, x: t.polygamma(0, x), "polygamma(1)": lambda t, x: t.polygamma(1, x),
    "polygamma(2)": lambda t, x: x.polygamma(2), "polygamma(5)": lambda t, x: t.polygamma(5, x),
    "mvlgamma(3)": lambda t, x: x.mvlgamma(p=3), "frexp": lambda t, x: t.frexp(x).mantissa,
    "special.erfcx": lambda t, x: t.special.erfcx(x), "special.ndtr": lambda t, x: t.special.ndtr(x),
    "special.ndtri": lambda t, x: t.special.ndtri(x), "special.log_ndtr": lambda t, x: t.special.log_ndtr(x),
    "special.i0e": lambda t, x: t.special.i0e(x), "special.i1": lambda t, x: t.special.i1(x),
    "special.i1e": lambda t, x: t.special.i1e(x), "special.entr": lambda t, x: t.special.entr(x),
}
# Other spellings of the same ops (compared on a few values, and by their backward nodes).
ALIASES = {
    "special.gammaln": lambda t, x: t.special.gammaln(x), "special.psi": lambda t, x: t.special.psi(x),
    "special.digamma": lambda t, x: t.special.digamma(x), "special.polygamma": lambda t, x: t.special.polygamma(3, x),
    "special.multigammaln": lambda t, x: t.special.multigammaln(x, 2), "mvlgamma(1)": lambda t, x: t.mvlgamma(x, 1),
    "special.erf": lambda t, x: t.special.erf(x), "special.erfc": lambda t, x: t.special.erfc(x),
    "special.erfinv": lambda t, x: t.special.erfinv(x), "special.i0": lambda t, x: t.special.i0(x),
    "special.sinc": lambda t, x: t.special.sinc(x), "special.expit": lambda t, x: t.special.expit(x),
    "special.logit": lambda t, x: t.special.logit(x, eps=0.2), "special.round": lambda t, x: t.special.round(x),
    "special.round(decimals=1)": lambda t, x: t.special.round(x, decimals=1),
    "special.exp2": lambda t, x: t.special.exp2(x), "special.expm1": lambda t, x: t.special.expm1(x),
    "special.log1p": lambda t, x: t.special.log1p(x), "negative": lambda t, x: t.negative(x),
    "fix": lambda t, x: x.fix(), "absolute": lambda t, x: t.absolute(x), "positive": lambda t, x: t.positive(x) * 1,
}


def _skipped(name, dtype, x):
    """Where the numbers cannot agree for a reason outside symgrad: sinc's gradient near 0 is a
    difference of nearly equal numbers whose last bits are each libm's."""
    return name == "sinc" and x == 1e-5 and dtype == "float64"


def _run(lib, dtype, functions, inputs):
    """Each function on leaves of its own (made by ``inputs``; PyTorch's strided, ``_strided``), and
    one backward for all of them: the sum of each result and of result.detach() * w, whose gradient
    in w carries the values out of the same program."""
    make, view = (inputs, lambda x: x) if lib is symgrad else (_strided(inputs), lambda x: x[::2])
    leaves, outs, carriers = {}, {}, {}
    for name, f in functions.items():
        leaves[name] = make(lib, dtype)
        outs[name] = f(lib, *map(view, leaves[name]))
        carriers[name] = lib.zeros(outs[name].shape, dtype=outs[name].dtype, requires_grad=True)
    sum(o.sum() + (o.detach() * carriers[name]).sum() for name, o in outs.items()).backward()
    return {name: (carriers[name].grad.numpy(),
                   [None if x.grad is None else view(x.grad).numpy() for x in leaves[name]],
                   type(outs[name].grad_fn).__name__, str(outs[name].dtype)) for name in functions}


def _grid(lib, dtype):
    return (lib.tensor(GRID, dtype=getattr(lib, dtype), requires_grad=True),)


def _strided(inputs):
    """PyTorch's leaves twice as long as ``inputs``' (zeros between), the functions run on every
    other entry: its CPU kernels then take their scalar loop, as for a small tensor (its vectorized
    loop gives logit another gradient at NaN and -0.0; symgrad's is the scalar loop's)."""
    def make(lib, dtype):
        leaves = []
        for x in inputs(lib, dtype):
            wide = lib.zeros(2 * x.shape[0], dtype=x.dtype)
            wide[::2] = x.detach()
            leaves.append(wide.requires_grad_())
        return leaves
    return make


@pytest.fixture(scope="module", params=["float32", "float64"])
def unary(request, torch):
    dtype = request.param
    return dtype, _run(symgrad, dtype, UNARY, _grid), _run(torch, dtype, UNARY, _grid)


def _assert_same(ours, theirs, dtype, what, keep=None):
    """Equal numbers within the dtype's tolerance: inf where PyTorch's is inf, NaN where it is NaN,
    and the sign of each zero."""
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    keep = np.ones(theirs.shape, bool) if keep is None else keep
    np.testing.assert_allclose(ours[keep], theirs[keep], equal_nan=True, err_msg=what, **TOLERANCE[dtype])
    zeros = keep & (theirs == 0) & (ours == 0)
    assert (np.signbit(ours[zeros]) == np.signbit(theirs[zeros])).all(), what


@pytest.mark.parametrize("name", UNARY)
def test_values_gradients_and_nodes_match_pytorch_on_the_grid(unary, name):
    dtype, ours, theirs = unary
    (value, (grad,), node, kind), (t_value, (t_grad,), t_node, t_kind) = ours[name], theirs[name]
    keep = np.array([not _skipped(name, dtype, x) for x in GRID])
    _assert_same(value, t_value, dtype, f"{name} value", keep)
    _assert_same(grad, t_grad, dtype, f"{name} gradient", keep)
    assert kind == t_kind
    if name != "special.ndtr":  # PyTorch multiplies by the number 0.5 in C++ (MulBackward1)
        assert node == t_node


@pytest.mark.parametrize("name", ALIASES)
def test_other_spellings_are_the_same_ops(torch, name):
    f = ALIASES[name]
    ours, theirs = (f(lib, lib.tensor([0.3, 1.5, -2.25, 4.0], requires_grad=True)) for lib in (symgrad, torch))
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__
    _assert_same(ours.detach().numpy(), theirs.detach().numpy(), "float32", name)


A = [0.0, -0.0, 1.0, -1.0, 2.5, INF, -INF, INF, NAN, 3.0, 0.0, 1e30, -7.0, 0.5, 0.0, 2.0, 1.0, -INF]
B = [0.0, 0.0, -1.0, 2.0, -0.5, INF, -INF, -INF, 1.0, NAN, -2.0, 1e30, 3.0, 10.0, -1.0, 0.0, -1.0, 5.0]
BINARY = {
    "logaddexp": lambda t, a, b: t.logaddexp(a, b), "logaddexp2": lambda t, a, b: a.logaddexp2(b),
    "special.xlog1py": lambda t, a, b: t.special.xlog1py(a, b), "special.xlogy": lambda t, a, b: t.special.xlogy(a, b),
    "special.xlog1py(x, 2)": lambda t, a, b: t.special.xlog1py(a, 2.0),
    "special.xlog1py(2, y)": lambda t, a, b: t.special.xlog1py(2.0, b),
    "special.xlog1py(x, nan)": lambda t, a, b: t.special.xlog1py(a, NAN),  # masked unless the number is > -1
    "special.xlog1py(x, -inf)": lambda t, a, b: t.special.xlog1py(a, -INF),
    "ldexp": lambda t, a, b: t.ldexp(a, b),
    "float_power": lambda t, a, b: t.float_power(a, b), "float_power(a, 3)": lambda t, a, b: a.float_power(3),
    "float_power(2, b)": lambda t, a, b: t.float_power(2, b),
}


def _pairs(lib, dtype):
    return tuple(lib.tensor(v, dtype=getattr(lib, dtype), requires_grad=True) for v in (A, B))


@pytest.fixture(scope="module", params=["float32", "float64"])
def binary(request, torch):
    dtype = request.param
    return dtype, _run(symgrad, dtype, BINARY, _pairs), _run(torch, dtype, BINARY, _pairs)


@pytest.mark.parametrize("name", BINARY)
def test_binary_functions_match_pytorch_at_their_edges(binary, name):
    dtype, ours, theirs = binary
    (value, grads, node, kind), (t_value, t_grads, t_node, t_kind) = ours[name], theirs[name]
    _assert_same(value, t_value, dtype, f"{name} value")
    for g, t_g in zip(grads, t_grads):
        if t_g is None:  # an input the function does not use
            assert g is None
        else:
            _assert_same(g, t_g, dtype, f"{name} gradient")
    assert (node, kind) == (t_node, t_kind)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zeta_at_its_poles_and_its_gradient_in_q(torch, dtype):
    """PyTorch's Cephes rules: inf at x = 1 and where q is 0 or a negative integer, NaN for x < 1
    and for a non-integer x at negative q, its early stop at a huge x (computed in float64, as
    PyTorch's float32 kernel accumulates); PyTorch differentiates in q only."""
    x = [1.0, 0.5, 2.0, 3.0, 3.0, 2.5, 2.0, 7.0, 3.0, 2.0, 2.0, INF, 2.0, 4.0, 7.0, 1e30, 1e30, 1e30, 1e4, NAN, INF,
         0.0, 0.5, 1e30, 3e13, 1e13]
    q = [1.0, 1.0, 0.0, 0.0, -1.0, -1.5, -1.5, -2.5, -INF, INF, NAN, 2.0, 1e-3, 0.7, 2.5, 1.0, 0.5, -2.5, 2.0, 0.0, 1.0,
         -2.0, 0.0, 1e30, 2.0, 2.0]
    results = []
    for lib in (symgrad, torch):
        xs, qs = lib.tensor(x, dtype=getattr(lib, dtype)), lib.tensor(q, dtype=getattr(lib, dtype), requires_grad=True)
        out = lib.special.zeta(xs, qs)
        out.sum().backward()
        results.append((out.detach().numpy(), qs.grad.numpy(), type(out.grad_fn).__name__))
    (value, grad, node), (t_value, t_grad, t_node) = results
    _assert_same(value, t_value, dtype, "zeta")
    _assert_same(grad, t_grad, dtype, "zeta's gradient in q")
    assert node == t_node == "SpecialZetaBackward0"
    for lib in (symgrad, torch):
        s = lib.tensor([3.0, 2.0], requires_grad=True)
        with pytest.raises(NotImplementedError, match="the derivative for 'zeta' is not implemented"):
            lib.special.zeta(s, lib.tensor([1.0, 2.0])).sum().backward()
        assert type(lib.special.zeta(2.0, s).grad_fn).__name__ == "SpecialZetaBackward1"
        assert type(lib.special.zeta(s, 2.0).grad_fn).__name__ == "SpecialZetaBackward2"
    ours, theirs = (lib.special.zeta(lib.tensor([2.0, 3.0, 4.5], dtype=getattr(lib, dtype)), -1.5)
                    for lib in (symgrad, torch))  # x the tensor, q a number
    _assert_same(ours.detach().numpy(), theirs.detach().numpy(), dtype, "zeta of a number q")


def test_zeta_of_an_empty_tensor_is_empty(torch):
    """Was: its loop's bound, a max over the shifts, raised on no elements (random-programs fuzzer)."""
    for lib in (symgrad, torch):
        q = lib.zeros(2, 0, requires_grad=True)
        out = lib.special.zeta(2.0, q)
        out.sum().backward()
        assert tuple(out.shape) == (2, 0) and tuple(q.grad.shape) == (2, 0)


def test_ldexp_by_integer_exponents_and_pytorchs_integer_gradient(torch):
    """x 2^e exactly (inf where it overflows the dtype); the gradient in x is PyTorch's pow(2, e) in
    e's integer dtype: 0 below 0 and from the width on, the sign bit at width - 1."""
    for dtype, kind in (("float64", "int64"), ("float32", "int32"), ("float32", "int64")):
        e = [200, -1, 2, 31, 40, 62, 63, 64, 0]
        results = []
        for lib in (symgrad, torch):
            x = lib.tensor([1.0, 1.0, 3.0, 1.0, 2.0, 1.0, -1.0, 2.0, NAN], dtype=getattr(lib, dtype),
                           requires_grad=True)
            out = lib.ldexp(x, lib.tensor(e, dtype=getattr(lib, kind)))
            out.sum().backward()
            results.append((out.detach().numpy(), x.grad.numpy(), str(out.dtype)))
        (value, grad, kind_out), (t_value, t_grad, t_kind) = results
        _assert_same(value, t_value, dtype, "ldexp")
        _assert_same(grad, t_grad, dtype, "ldexp's gradient")
        assert kind_out == t_kind
    for lib in (symgrad, torch):
        out = lib.ldexp(lib.tensor([3, 1]), lib.tensor([-1, 2]))
        assert out.tolist() == [1.5, 4.0] and str(out.dtype) == "torch.float32"
        with pytest.raises(NotImplementedError, match="\"ldexp_cpu_exp\" not implemented for 'Bool'"):
            lib.ldexp(lib.tensor([1.0]), lib.tensor([True]))


def test_heaviside_values_dtypes_and_no_derivative(torch):
    x, v = [-1.0, 0.0, -0.0, 2.0, NAN, INF, -INF], [0.5]
    for dtype in ("float32", "int64", "bool"):
        xs = [1, 0, -3] if dtype == "int64" else [True, False] if dtype == "bool" else x
        vs = [7] if dtype == "int64" else [True] if dtype == "bool" else v
        outs = [lib.heaviside(lib.tensor(xs, dtype=getattr(lib, dtype)), lib.tensor(vs, dtype=getattr(lib, dtype)))
                for lib in (symgrad, torch)]
        assert outs[0].tolist() == outs[1].tolist() and str(outs[0].dtype) == str(outs[1].dtype)
    for lib in (symgrad, torch):
        a = lib.tensor(x, requires_grad=True)
        out = a.heaviside(lib.tensor(v))
        assert type(out.grad_fn).__name__ == "NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
            out.sum().backward()
        with pytest.raises(RuntimeError, match="heaviside is not yet implemented for tensors with different dtypes"):
            lib.heaviside(lib.tensor([1.0]), lib.tensor([1.0], dtype=lib.float64))
        with pytest.raises(TypeError, match="argument 'values' .* must be Tensor, not float"):
            lib.heaviside(lib.tensor([1.0]), 0.5)
        b = lib.tensor([-1.0, 0.0, 3.0])
        b.heaviside_(lib.tensor([0.25]))
        assert b.tolist() == [0.0, 0.25, 1.0]


def test_frexp_splits_into_mantissa_and_int32_exponent(torch):
    x = [0.0, -0.0, 1.0, 0.75, -3.5, 1e30, -1e-30, INF, -INF, NAN, 2.0 ** 100, 6.0]
    for dtype in ("float32", "float64"):
        ours, theirs = (lib.frexp(lib.tensor(x, dtype=getattr(lib, dtype))) for lib in (symgrad, torch))
        _assert_same(ours.mantissa.numpy(), theirs.mantissa.numpy(), dtype, "mantissa")
        assert ours.exponent.tolist() == theirs.exponent.tolist()
        assert str(ours.exponent.dtype) == str(theirs.exponent.dtype) == "torch.int32"
        assert str(ours.mantissa.dtype) == str(theirs.mantissa.dtype)
    assert repr(symgrad.tensor([6.0]).frexp()).startswith("torch.return_types.frexp(\nmantissa=tensor([0.7500])")
    for lib in (symgrad, torch):
        with pytest.raises(RuntimeError, match=r"torch.frexp\(\) only supports floating-point dtypes"):
            lib.frexp(lib.tensor([1, 2]))


def test_integer_and_bool_inputs_give_the_default_float(torch):
    functions = {name: f for name, f in {**UNARY, **ALIASES}.items() if name not in (
        "negative", "fix", "absolute", "positive", "special.round", "special.round(decimals=1)", "frexp",
        "nan_to_num", "nan_to_num(1.5, 7, -1e300)", "mvlgamma(3)", "mvlgamma(1)", "special.multigammaln")}
    for dtype, values in (("int64", [1, 2, 0, -1, 3, -2]), ("bool", [True, False])):
        ours, theirs = ({name: f(lib, lib.tensor(values, dtype=getattr(lib, dtype))) for name, f in functions.items()}
                        for lib in (symgrad, torch))
        assert {n: str(o.dtype) for n, o in ours.items()} == {n: str(o.dtype) for n, o in theirs.items()}
        assert all(str(o.dtype) == "torch.float32" for o in ours.values())
        stacked = symgrad.stack(list(ours.values())).numpy()  # one program
        for name, row in zip(ours, stacked):
            _assert_same(row, theirs[name].numpy(), "float32", f"{name} of {dtype}")
    for lib in (symgrad, torch):  # nothing to replace in an integer: the same values and dtype
        with pytest.raises(RuntimeError, match="The input tensor may not be a boolean tensor"):
            lib.mvlgamma(lib.tensor([True]), 1)
        assert str(lib.mvlgamma(lib.tensor([3, 4]), 2).dtype) == "torch.float32"
        out = lib.nan_to_num(lib.tensor([1, -2], dtype=lib.int32), nan=3.0, posinf=2.0)
        assert out.tolist() == [1, -2] and str(out.dtype) == "torch.int32"


def test_in_place_spellings_write_pytorchs_values(torch):
    methods = {"lgamma_": (), "digamma_": (), "erfinv_": (), "erfc_": (), "i0_": (), "sinc_": (), "deg2rad_": (),
               "rad2deg_": (), "logit_": (0.1,), "nan_to_num_": (), "polygamma_": (1,), "mvlgamma_": (1,),
               "negative_": (), "fix_": (), "absolute_": ()}
    for name, args in methods.items():
        ours, theirs = (lib.tensor([0.3, -0.7, 2.5, NAN, INF]) for lib in (symgrad, torch))
        assert getattr(ours, name)(*args) is ours
        getattr(theirs, name)(*args)
        _assert_same(ours.numpy(), theirs.numpy(), "float32", name)
        ours, theirs = (lib.tensor([0.3, 2.5], requires_grad=True) * 1 for lib in (symgrad, torch))
        getattr(ours, name)(*args), getattr(theirs, name)(*args)
        assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__, name  # polygamma_: PolygammaBackward1
    for lib in (symgrad, torch):
        x = lib.tensor([2.0, 3.0], dtype=lib.float64)
        x.float_power_(2)
        assert x.tolist() == [4.0, 9.0]
        with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype Float but the operation's "
                                               "result requires dtype Double"):
            lib.tensor([2.0]).float_power_(2)


def test_errors_are_pytorchs(torch):
    for lib in (symgrad, torch):
        x = lib.tensor([0.5, 2.0])
        with pytest.raises(RuntimeError, match=r"polygamma\(n, x\) does not support negative n"):
            lib.polygamma(-1, x)
        with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
            lib.mvlgamma(x, 0)
        with pytest.raises(NotImplementedError, match="\"logaddexp_cpu\" not implemented for 'Long'"):
            lib.logaddexp(lib.tensor([1]), lib.tensor([2]))
        with pytest.raises(NotImplementedError, match="\"logaddexp2_cpu\" not implemented for 'Bool'"):
            lib.logaddexp2(lib.tensor([True]), lib.tensor([False]))
        with pytest.raises(TypeError, match="argument 'other' .* must be Tensor, not float"):
            lib.logaddexp(x, 2.0)
        with pytest.raises(TypeError, match="argument 'other' .* must be Tensor, not int"):
            lib.ldexp(x, 2)
        with pytest.raises(TypeError, match="float_power"):
            lib.float_power(2, 3)
        with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported"):
            lib.positive(lib.tensor([True]))
        with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
            lib.negative(lib.tensor([True]))
        with pytest.raises(NotImplementedError, match="\"trunc_vml_cpu\" not implemented for 'Bool'"):
            lib.fix(lib.tensor([True]))
    for lib in (symgrad, torch):  # after the errors, everything works
        assert lib.lgamma(lib.tensor([1.0, 3.0])).tolist() == pytest.approx([0.0, math.log(2)], abs=1e-6)


def test_positive_is_the_tensor_itself(torch):
    for lib in (symgrad, torch):
        x = lib.tensor([1, -2])
        assert lib.positive(x) is x and x.positive() is x and (+x) is x


def test_mvlgamma_below_its_domain_is_inf_or_nan_as_pytorchs(torch):
    """PyTorch checks p, not that x > (p - 1) / 2: below it the sum meets lgamma's poles."""
    x = [0.5, 1.0, 0.75, -0.5, NAN, INF]
    ours, theirs = (lib.mvlgamma(lib.tensor(x, dtype=lib.float64), 3) for lib in (symgrad, torch))
    _assert_same(ours.numpy(), theirs.numpy(), "float64", "mvlgamma")


def test_second_derivative_of_lgamma_is_trigamma(torch):
    results = []
    for lib in (symgrad, torch):
        x = lib.tensor([0.3, 2.5, -1.5], dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(lib.lgamma(x).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        results.append((g.detach().numpy(), gg.numpy()))
    for ours, theirs in zip(*results):
        _assert_same(ours, theirs, "float64", "lgamma's derivatives")


def test_the_gradient_is_symbolic_and_heads_lambdify_to_codegens_numbers():
    x = symgrad.tensor([0.5, 1.5], dtype=symgrad.float64, requires_grad=True)
    grads = symgrad.symbolic.gradient(symgrad.lgamma(x).sum(), {"x": x})
    assert "digamma" in str(grads["x"])
    a, b = sp.symbols("a b", real=True)
    values = {a: np.array([0.0, -0.0, 0.3, -2.5, 4.0]), b: np.array([0.7, 2.0, 0.2, 3.5, 1.5])}
    heads = [S.lgamma(a), S.digamma(a), S.polygamma(1, a), S.polygamma(3, b), S.erfcx(a), S.log_ndtr(a), S.i1(a),
             S.entr(b), S.sinc(a), S.logaddexp(a, b), S.logit_clamped(b, 0.1, 0.9), S.xlog1py(a, b), S.zeta(b + 1, b)]
    program = symgrad.ir.Program()  # one program computing every head
    inputs = [program.input((5,), "float64", s.name) for s in (a, b)]
    for head in heads:
        program.output(head.xreplace(dict(zip((a, b), inputs))), (5,), "float64", "out")
    compiled = symgrad.engine.compile_program(program)(*values.values())
    for head, by_codegen in zip(heads, compiled):
        with np.errstate(all="ignore"):  # NumPy computes both sides of a where
            by_scipy = sp.lambdify([a, b], head, modules=["scipy", "numpy"])(*values.values())
        np.testing.assert_allclose(by_scipy, by_codegen, rtol=1e-8, equal_nan=True, err_msg=str(head))
        if head.func in (S.digamma, S.zeta):  # (JAX run eagerly is slow: two are enough)
            by_jax = sp.lambdify([a, b], head, modules="jax")(*values.values())
            np.testing.assert_allclose(np.asarray(by_jax), by_codegen, rtol=1e-15, equal_nan=True, err_msg=str(head))


def test_constants_fold_to_the_programs_numbers():
    """A head of numbers folds through its own code (JAX, float64): digamma(-0.0) is inf, not NaN."""
    assert S.digamma(sp.Float(0.0)) == -sp.oo and S.lgamma(sp.Float(-2.0)) == sp.oo
    assert float(S.erfcx(sp.Float(30.0))) == pytest.approx(1 / (30 * math.sqrt(math.pi)) * (1 - 1 / 1800), rel=1e-6)
    assert float(S.polygamma(1, sp.Float(1.0))) == pytest.approx(math.pi ** 2 / 6, rel=1e-9)


def test_special_namespace_names_and_out(torch):
    names = ["expit", "logit", "erf", "erfc", "erfcx", "erfinv", "gammaln", "digamma", "psi", "polygamma",
             "multigammaln", "ndtr", "ndtri", "log_ndtr", "i0", "i0e", "i1", "i1e", "sinc", "entr", "xlogy", "xlog1py",
             "logsumexp", "softmax", "log_softmax", "round", "exp2", "expm1", "log1p", "zeta"]
    assert all(hasattr(torch.special, n) and callable(getattr(symgrad.special, n)) for n in names)
    out = symgrad.empty(3)
    assert symgrad.special.i1(symgrad.tensor([0.0, 1.0, -1.0]), out=out) is out
    assert out.tolist() == pytest.approx(torch.special.i1(torch.tensor([0.0, 1.0, -1.0])).tolist())
    x = [[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]]
    for f in (lambda t, a: t.special.softmax(a, 1, dtype=t.float64), lambda t, a: t.special.log_softmax(a, 0),
              lambda t, a: t.special.logsumexp(a, 1, keepdim=True)):
        ours, theirs = (f(lib, lib.tensor(x)) for lib in (symgrad, torch))
        assert str(ours.dtype) == str(theirs.dtype)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


SAVED = {  # (function, the tensor written in place after it): PyTorch's backward keeps the input, the result or both
    "lgamma, input": (lambda t, a, e: t.lgamma(a), "input"),
    "erfcx, result": (lambda t, a, e: t.special.erfcx(a), "out"),
    "ndtri, input": (lambda t, a, e: t.special.ndtri(a), "input"),
    "ndtri, result": (lambda t, a, e: t.special.ndtri(a), "out"),
    "i1e, result": (lambda t, a, e: t.special.i1e(a), "out"),
    "log_ndtr, input": (lambda t, a, e: t.special.log_ndtr(a), "input"),
    "deg2rad, input": (lambda t, a, e: t.deg2rad(a), "input"),
    "frexp, input": (lambda t, a, e: t.frexp(a).mantissa, "input"),
    "ldexp, input": (lambda t, a, e: t.ldexp(a, e), "input"), "ldexp, result": (lambda t, a, e: t.ldexp(a, e), "out"),
    "ldexp, result of a constant exponent": (lambda t, a, e: t.ldexp(a, e.detach()), "out"),
    "ldexp, exponent": (lambda t, a, e: t.ldexp(a, e), "exponent"),
}


@pytest.mark.parametrize("name", SAVED)
def test_a_saved_tensor_written_in_place_refuses_the_backward_as_pytorchs(torch, name):
    f, written = SAVED[name]
    outcomes = []
    for lib in (symgrad, torch):
        x, y = lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([1.0, -2.0], requires_grad=True)
        a, e = x * 1, y * 1
        out = f(lib, a, e)
        {"input": a, "out": out, "exponent": e}[written].add_(1)
        try:
            out.sum().backward()
            outcomes.append(None)
        except RuntimeError as error:
            outcomes.append(str(error)[:160])
    assert outcomes[0] == outcomes[1]
