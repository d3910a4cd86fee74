"""hardshrink, softshrink, threshold, glu, prelu, rrelu and their modules (with Softmax2d) against the
installed PyTorch on the same arrays: values bit for bit (the sign of a zero too), gradients with
infinite and NaN cotangents, grad_fn names, dtypes, the seeded random slopes of rrelu in training
(and the generator's state after them), in-place forms, module reprs and errors.  The registry's
generic tests (test_ops.py) cover ordinary values of each op's examples."""
import math
import re

import numpy as np
import pytest

import symgrad

INF, NAN = math.inf, math.nan
# The kinks of the cases below (0, +-0.5, +-1.5), both zeros, the infinities and NaN, in rows of 7: PyTorch's
# scalar loop computes all of a tensor that small (the shrinks' vectorized loop differs: docs/api.md).
EDGES = np.array([[-INF, -1.5, -0.5, -0.3, -0.0, 0.0, NAN], [0.0, 0.3, 0.5, 1.5, INF, NAN, -0.7]])
# The cotangent: infinite and NaN where a branch sends no gradient (it must stay 0) and where one does.
COTANGENT = np.array([2.0, INF, INF, -1.0, NAN, NAN, -2.0])


def F(T):
    return T.nn.functional


def run(T, fn, arrays, cotangent):
    """fn(T, *tensors) on tensors of ``arrays`` (the float ones require grad), backward from
    ``cotangent``: the result's values, dtype and grad_fn name, and each input's gradient."""
    tensors = [T.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(T, *tensors)
    seen = (out.detach().numpy(), repr(out.dtype), type(out.grad_fn).__name__ if out.grad_fn else None)
    if out.requires_grad:
        out.backward(T.tensor(cotangent.astype(out.detach().numpy().dtype)))
    return seen, [t.grad.numpy() if t.grad is not None else None for t in tensors]


def assert_same(ours, theirs, exact=True):
    """Equal values (NaN where NaN; with ``exact``, bit for bit, the sign of zeros included)."""
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    if exact:
        np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7, equal_nan=True)


def check(torch, fn, arrays, cotangent, exact=True):
    (value, dtype, grad_fn), grads = run(symgrad, fn, arrays, cotangent)
    (t_value, t_dtype, t_grad_fn), t_grads = run(torch, fn, arrays, cotangent)
    assert (dtype, grad_fn) == (t_dtype, t_grad_fn)
    assert_same(value, t_value, exact)
    for g, t_g in zip(grads, t_grads):
        assert (g is None) == (t_g is None)
        if g is not None:
            assert_same(g, t_g, exact)


ELEMENTWISE = {
    "hardshrink": lambda T, x: F(T).hardshrink(x),
    "hardshrink 1.5": lambda T, x: F(T).hardshrink(x, 1.5),
    "hardshrink below 0 is the identity": lambda T, x: F(T).hardshrink(x, -0.5),
    "hardshrink at nan": lambda T, x: F(T).hardshrink(x, NAN),
    "hardshrink at inf": lambda T, x: F(T).hardshrink(x, INF),
    "torch.hardshrink": lambda T, x: T.hardshrink(x, lambd=0.3),
    "Tensor.hardshrink": lambda T, x: x.hardshrink(0.5),
    "softshrink": lambda T, x: F(T).softshrink(x),
    "softshrink 1.5": lambda T, x: F(T).softshrink(x, 1.5),
    "softshrink 0": lambda T, x: F(T).softshrink(x, 0),
    "threshold": lambda T, x: F(T).threshold(x, 0.5, -2.0),
    "threshold at -0.0": lambda T, x: F(T).threshold(x, -0.0, 7),
    "threshold to nan": lambda T, x: F(T).threshold(x, 1.5, NAN),
    "threshold at nan": lambda T, x: T.threshold(x, NAN, 1.0),
    "threshold at inf": lambda T, x: T.threshold(x, INF, 1.0),
    "rrelu evaluation": lambda T, x: F(T).rrelu(x),
    "rrelu evaluation bounds": lambda T, x: T.rrelu(x, 0.1, 0.9),
    "prelu one weight": lambda T, x: F(T).prelu(x, T.tensor([0.25], dtype=x.dtype)),
    "prelu 0-d weight": lambda T, x: T.prelu(x, T.tensor(-0.5, dtype=x.dtype)),
    "Tensor.prelu": lambda T, x: x.prelu(T.tensor([2.0], dtype=x.dtype)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise_activations_at_their_edges(torch, name, dtype):
    for row in EDGES:  # one compiled program for both
        check(torch, ELEMENTWISE[name], [row.astype(dtype)], COTANGENT)


def test_a_float32_threshold_and_lambd_are_rounded_to_float32_first(torch):
    """0.1 as float32 is above 0.1: PyTorch's kernel compares with float32(0.1), so 0.1 is at the threshold."""
    x = np.array([0.1, 0.3, -0.3, 0.2], np.float32)
    cotangent = np.ones(4)
    check(torch, lambda T, x: F(T).threshold(x, 0.1, 5.0), [x], cotangent)
    check(torch, lambda T, x: F(T).hardshrink(x, 0.3), [x], cotangent)
    check(torch, lambda T, x: F(T).softshrink(x, 0.3), [x], cotangent)


def test_threshold_of_integers_truncates_its_numbers(torch):
    for dtype in (np.int64, np.int32):
        x = np.array([-2, -1, 0, 1, 2, 3], dtype)
        for threshold, value in ((1.5, 0.5), (-1.5, 7.9), (1, -5.7)):
            (ours, dtype_ours, _), _ = run(symgrad, lambda T, x: T.threshold(x, threshold, value), [x], None)
            (theirs, dtype_theirs, _), _ = run(torch, lambda T, x: T.threshold(x, threshold, value), [x], None)
            assert dtype_ours == dtype_theirs
            np.testing.assert_array_equal(ours, theirs)



def test_hardtanh_of_integers_stays_integer(torch):
    """Was: float32 (random-programs fuzzer, session 25).  PyTorch casts the bounds to the tensor's
    integer type (truncated) and keeps it, ``relu6`` and the in-place form too."""
    for dtype in (np.int64, np.int32):
        x = np.array([-3, -1, 0, 1, 2, 9], dtype)
        cases = [lambda T, x: F(T).hardtanh(x, 2.0, 2.0), lambda T, x: F(T).hardtanh(x, 0.5, 1.5),
                 lambda T, x: F(T).hardtanh(x, -1.5, -0.5), lambda T, x: F(T).relu6(x),
                 lambda T, x: T.nn.Hardtanh(-2, 5)(x), lambda T, x: F(T).hardtanh(x.clone(), inplace=True)]
        for case in cases:
            (ours, dtype_ours, _), _ = run(symgrad, case, [x], None)
            (theirs, dtype_theirs, _), _ = run(torch, case, [x], None)
            assert dtype_ours == dtype_theirs
            np.testing.assert_array_equal(ours, theirs)

CHANNELS = np.array([[[-1.0, 0.0, INF], [-0.0, 2.0, -INF], [NAN, -3.0, 0.5]],
                     [[4.0, -0.5, -2.0], [1.0, NAN, 0.0], [-INF, 0.25, -1.0]]])
PRELU = {
    "per channel": (lambda T, x, w: F(T).prelu(x, w), [CHANNELS, np.array([0.25, -1.5, 2.0])]),
    "per channel of a 4-d input": (lambda T, x, w: F(T).prelu(x, w),
                                   [CHANNELS.reshape(2, 3, 3, 1), np.array([0.5, INF, 0.0])]),
    "one for all": (lambda T, x, w: T.prelu(x, w), [CHANNELS, np.array([0.75])]),
    "0-d weight": (lambda T, x, w: x.prelu(w), [CHANNELS, np.array(-0.25)]),
    "a 1-d input": (lambda T, x, w: F(T).prelu(x, w), [EDGES.ravel(), np.array([0.3])]),
    "a 0-d input": (lambda T, x, w: F(T).prelu(x, w), [np.array(-2.0), np.array([0.3])]),
    "a 2-d input": (lambda T, x, w: F(T).prelu(x, w), [CHANNELS[0], np.array([0.1, 0.2, 0.3])]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(PRELU))
def test_prelu_gradients_for_input_and_weight(torch, name, dtype):
    fn, arrays = PRELU[name]
    arrays = [a.astype(dtype) for a in arrays]
    cotangent = np.resize(COTANGENT, arrays[0].shape)
    check(torch, fn, arrays, cotangent, exact=False)  # the weight's gradient is a sum: its order may differ


HALVES = np.array([[1.0, -2.0, INF, NAN, 0.0, -0.0, 3.0, 2.0],
                   [-INF, 0.5, 2.0, -1.0, INF, -INF, NAN, 40.0]])
GLU = {
    "last dim": (lambda T, x: F(T).glu(x), [HALVES]),
    "dim 0": (lambda T, x: F(T).glu(x, 0), [HALVES]),
    "dim 1 of 3": (lambda T, x: F(T).glu(x, 1), [HALVES.reshape(2, 4, 2)]),
    "an empty half": (lambda T, x: F(T).glu(x, 0), [np.zeros((0, 3))]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(GLU))
def test_glu(torch, name, dtype):
    fn, arrays = GLU[name]
    arrays = [a.astype(dtype) for a in arrays]
    out_shape = np.asarray(fn(torch, torch.tensor(arrays[0]))).shape
    cotangent = np.resize(np.array([1.0, -2.0, 0.5, INF, NAN]), out_shape)
    check(torch, fn, arrays, cotangent, exact=False)  # exp in XLA and in PyTorch's kernel: a few ulps apart


# --------------------------------------------------------------------------- rrelu in training

def _seeded(T, seed, fn):
    """fn(T) after T.manual_seed(seed), and the next draw of the generator after it."""
    T.manual_seed(seed)
    result = fn(T)
    return result, T.rand(3).numpy()


RRELU_TRAINING = {
    "default bounds": lambda T, x: F(T).rrelu(x, training=True),
    "bounds": lambda T, x: F(T).rrelu(x, 0.1, 0.9, True),
    "equal bounds": lambda T, x: T.rrelu(x, 0.2, 0.2, True),
    "integer bounds": lambda T, x: F(T).rrelu(x, 0, 1, True),
    "in place": lambda T, x: F(T).rrelu(x * 1, 0.05, 0.5, True, True),
    "rrelu_": lambda T, x: F(T).rrelu_(x * 1, training=True),
    "torch.rrelu_": lambda T, x: T.rrelu_(x * 1, 0.3, 0.4, True),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(RRELU_TRAINING))
def test_rrelu_in_training_draws_pytorchs_slopes(torch, name, dtype):
    """A slope for every value at or below 0 (-0.0, 0.0 and -inf too, not NaN), none for the others:
    the values, the gradient (the slopes) and the generator's next numbers are PyTorch's."""
    x = np.concatenate([EDGES.ravel(), np.random.default_rng(4).standard_normal(200)]).astype(dtype)
    cotangent = np.resize(COTANGENT, x.shape)
    ours, ours_next = _seeded(symgrad, 9, lambda T: run(T, RRELU_TRAINING[name], [x], cotangent))
    theirs, theirs_next = _seeded(torch, 9, lambda T: run(T, RRELU_TRAINING[name], [x], cotangent))
    assert ours[0][1:] == theirs[0][1:]
    assert_same(ours[0][0], theirs[0][0])
    assert_same(ours[1][0], theirs[1][0])
    np.testing.assert_array_equal(ours_next, theirs_next)


def test_rrelu_takes_a_generator_and_leaves_the_default_one(torch):
    x = np.random.default_rng(5).standard_normal((4, 5)).astype(np.float32)
    results = []
    for T in (symgrad, torch):
        T.manual_seed(0)
        generator = T.Generator().manual_seed(11)
        out = T.rrelu(T.tensor(x), 0.1, 0.3, True, generator)
        results.append((out.numpy(), T.rand(2).numpy(), T.rand(2, generator=generator).numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)


def test_rrelu_in_training_saves_its_input_as_pytorch_does(torch):
    """Writing the input after the call makes the backward refuse, in both, with PyTorch's words."""
    refused = []
    for T in (symgrad, torch):
        x = T.tensor([-1.0, 2.0, -3.0], requires_grad=True)
        out = F(T).rrelu(x, training=True)
        with T.no_grad():
            x.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as error:
            out.sum().backward()
        refused.append(str(error.value))
    assert refused[0] == refused[1]


def test_rrelu_in_training_needs_values_a_jax_trace_does_not_have():
    def loss(x):
        return F(symgrad).rrelu(x, training=True).sum()
    with pytest.raises(RuntimeError, match="rrelu in training"):
        symgrad.value_and_grad(loss)(symgrad.tensor([-1.0, 2.0]))


# -------------------------------------------------------------------------------- in place

IN_PLACE = {
    "threshold inplace": lambda T, x: F(T).threshold(x, 0.5, -2.0, inplace=True),
    "F.threshold_": lambda T, x: F(T).threshold_(x, 0.5, 3.0),
    "torch.threshold_": lambda T, x: T.threshold_(x, -0.3, 0.0),
    "rrelu evaluation in place": lambda T, x: F(T).rrelu(x, inplace=True),
}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_forms_write_their_input(torch, name):
    """PyTorch's in-place backward nodes (ThresholdBackward1, RreluWithNoiseBackward1)."""
    results = []
    for T in (symgrad, torch):
        x = T.tensor(EDGES.astype(np.float32), requires_grad=True)
        y = x * 1
        out = IN_PLACE[name](T, y)
        out.backward(T.tensor(np.resize(COTANGENT, EDGES.shape).astype(np.float32)))
        results.append((out is y, y._version, type(y.grad_fn).__name__, y.detach().numpy(), x.grad.numpy()))
    assert results[0][:3] == results[1][:3]
    assert results[0][:2] == (True, 1)
    for ours, theirs in zip(results[0][3:], results[1][3:]):
        assert_same(ours, theirs)


@pytest.mark.parametrize("name", ["F.threshold_", "rrelu evaluation in place", "rrelu_ in training"])
def test_what_in_place_forms_keep_is_pytorchs(torch, name):
    """rrelu_ keeps its result (a later write makes backward refuse); threshold_ keeps nothing the
    write changes."""
    call = IN_PLACE.get(name) or (lambda T, x: F(T).rrelu_(x, training=True))
    outcomes = []
    for T in (symgrad, torch):
        x = T.tensor([-1.0, 2.0, -3.0], requires_grad=True)
        y = x * 1
        call(T, y)
        with T.no_grad():
            y.mul_(2)
        try:
            y.sum().backward()
            outcomes.append(x.grad.tolist())
        except RuntimeError as error:
            outcomes.append(str(error))
    assert outcomes[0] == outcomes[1]
    assert isinstance(outcomes[0], str) == ("rrelu" in name)


def test_prelu_keeps_its_weight_as_pytorch_does(torch):
    """Was (fuzzer): prelu reshaped its weight outside the op, and a view only the graph holds does
    not see a write to the weight.  Writing the weight makes the backward refuse; PyTorch's message
    names the reshaped weight's shape ([1, 3]), symgrad's the weight's."""
    refused = []
    for T in (symgrad, torch):
        x = T.tensor([[-1.0, 2.0, -3.0]], requires_grad=True)
        weight = T.tensor([0.1, 0.2, 0.3])
        out = F(T).prelu(x, weight)
        weight.fill_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as error:
            out.sum().backward()
        refused.append(re.sub(r"\[[\d, ]*\]\]", "[shape]]", str(error.value)))
    assert refused[0] == refused[1]


# ---------------------------------------------------------------------------------- modules

MODULES = ["Hardshrink()", "Hardshrink(1)", "Softshrink(0.3)", "Threshold(0.1, 20)", "Threshold(-0.5, 2.5, True)",
           "GLU()", "GLU(2)", "RReLU()", "RReLU(0.1, 0.3, True)", "PReLU()", "PReLU(3, 0.1)", "Softmax2d()"]


@pytest.mark.parametrize("text", MODULES)
def test_modules_print_and_compute_as_pytorchs(torch, text):
    """In training mode (RReLU draws, seeded); PReLU's weight gets its gradient."""
    x = np.linspace(-3, 3, 48, dtype=np.float32).reshape(2, 3, 2, 4)
    results = []
    for T in (symgrad, torch):
        T.manual_seed(3)
        module = eval("T.nn." + text, {"T": T})
        t = T.tensor(x, requires_grad=True)
        y = module(t * 1)
        (y * T.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)).astype(np.float32))).sum().backward()
        parameters = [(name, p.detach().numpy(), p.grad.numpy()) for name, p in module.named_parameters()]
        results.append((repr(module), [name for name, *_ in parameters], y.detach().numpy(), t.grad.numpy(),
                        [array for _, *arrays in parameters for array in arrays]))
    assert results[0][:2] == results[1][:2]
    for ours, theirs in zip(results[0][2:4] + tuple(results[0][4]), results[1][2:4] + tuple(results[1][4])):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


def test_rrelu_module_in_eval_mode_uses_the_mean_slope_and_draws_nothing(torch):
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    results = []
    for T in (symgrad, torch):
        T.manual_seed(1)
        module = T.nn.RReLU(0.2, 0.6).eval()
        results.append((module(T.tensor(x)).numpy(), T.rand(2).numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_allclose(results[0][0][0], -2 * 0.4, rtol=1e-6)


def test_prelu_module_parameter(torch):
    for dtype in ("float32", "float64"):
        ours = symgrad.nn.PReLU(4, init=-0.5, dtype=getattr(symgrad, dtype))
        theirs = torch.nn.PReLU(4, init=-0.5, dtype=getattr(torch, dtype))
        assert (ours.num_parameters, ours.init, list(ours.state_dict())) == (4, -0.5, ["weight"])
        assert isinstance(ours.weight, symgrad.nn.Parameter) and repr(ours.weight.dtype) == repr(theirs.weight.dtype)
        np.testing.assert_array_equal(ours.weight.detach().numpy(), theirs.weight.detach().numpy())


# ----------------------------------------------------------------------------------- names

def test_public_names_are_where_pytorchs_are(torch):
    names = ["hardshrink", "softshrink", "threshold", "threshold_", "glu", "prelu", "rrelu", "rrelu_"]
    for ours, theirs in ((symgrad, torch), (symgrad.Tensor, torch.Tensor), (F(symgrad), F(torch))):
        assert [hasattr(ours, n) for n in names] == [hasattr(theirs, n) for n in names], ours


# ---------------------------------------------------------------------------------- errors

ERRORS = {
    "glu odd dim": lambda T: F(T).glu(T.ones(3, 5), 1),
    "glu odd last dim": lambda T: F(T).glu(T.ones(3, 5)),
    "glu scalar": lambda T: F(T).glu(T.tensor(1.0)),
    "glu integers": lambda T: F(T).glu(T.ones(4, dtype=T.int64)),
    "glu dim": lambda T: F(T).glu(T.ones(4), 1),
    "prelu channels": lambda T: F(T).prelu(T.ones(2, 3), T.ones(2)),
    "prelu 1-d input": lambda T: F(T).prelu(T.ones(3), T.ones(3)),
    "prelu 0-d input": lambda T: F(T).prelu(T.tensor(1.0), T.ones(3)),
    "prelu 2-d weight": lambda T: F(T).prelu(T.ones(2, 3), T.ones(1, 3)),
    "prelu dtypes": lambda T: F(T).prelu(T.ones(2, 3), T.ones(3, dtype=T.float64)),
    "prelu integers": lambda T: F(T).prelu(T.ones(2, 3, dtype=T.int64), T.ones(3, dtype=T.int64)),
    "prelu number weight": lambda T: F(T).prelu(T.ones(2, 3), 0.5),
    "softshrink below 0": lambda T: F(T).softshrink(T.ones(3), -0.5),
    "softshrink nan double": lambda T: F(T).softshrink(T.ones(3, dtype=T.float64), NAN),
    "softshrink beyond float": lambda T: F(T).softshrink(T.ones(3), 1e39),
    "softshrink integers": lambda T: F(T).softshrink(T.ones(3, dtype=T.int64)),
    "hardshrink integers": lambda T: F(T).hardshrink(T.ones(3, dtype=T.int64)),
    "hardshrink beyond float": lambda T: F(T).hardshrink(T.ones(3), 1e39),
    "threshold bool": lambda T: T.threshold(T.tensor([True]), 0, 1),
    "threshold integers at nan": lambda T: T.threshold(T.tensor([1, 2]), NAN, 1),
    "threshold beyond float": lambda T: F(T).threshold(T.ones(2), 1e39, 1),
    "rrelu bounds": lambda T: F(T).rrelu(T.ones(3), 0.5, 0.2),
    "rrelu bounds in training": lambda T: F(T).rrelu(T.ones(3), 0.5, 0.2, True),
    "rrelu infinite bound": lambda T: F(T).rrelu(T.ones(3), 0.1, INF),
    "rrelu nan bounds": lambda T: F(T).rrelu(T.ones(3, dtype=T.int64), NAN, NAN, True),
    "rrelu integers": lambda T: F(T).rrelu(T.ones(3, dtype=T.int64)),
    "rrelu integers in training": lambda T: F(T).rrelu(T.ones(3, dtype=T.int64), training=True),
    "rrelu beyond float": lambda T: F(T).rrelu(-T.ones(3), 0.1, 1e39),
    "rrelu_ of a leaf": lambda T: F(T).rrelu_(T.ones(3, requires_grad=True), training=True),
    "Softmax2d of 2-d": lambda T: T.nn.Softmax2d()(T.ones(2, 3)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    with pytest.raises(Exception) as theirs:
        ERRORS[name](torch)
    with pytest.raises(type(theirs.value)) as ours:
        ERRORS[name](symgrad)
    first_line = str(theirs.value).split("\n")[0].rstrip(".")  # symgrad may name the op and shapes after it
    assert str(ours.value).startswith(first_line), (str(ours.value), str(theirs.value))
