"""Every registered op, generically, to second order: the gradient of a gradient (create_graph)
against PyTorch's double backward on the same float64 inputs, one example per op.

The first-order gradient is weighted by a random direction and differentiated again w.r.t. the
inputs and the output cotangent, so every second-derivative term the op has is exercised.  Outputs
defined up to sign (eigenvectors) enter squared (op_cases.invariant).
Agreement is to 1e-7: float64 ``celu`` uses float64 constants where PyTorch's kernel rounds
1/alpha to float32 (docs/api.md).
"""
import zlib

import numpy as np
import pytest

import symgrad
from op_cases import MATRIX_DOMAINS, cases, invariant, make_inputs
from symgrad.tensor import apply

# One example per op; every example of a factorization, whose output parts (Q or R, U, S or Vh ...) and
# modes each have their own VJP.
FIRST_EXAMPLES = [case for case in cases() if case[0].endswith("-0") or set(case[1].domain) & set(MATRIX_DOMAINS)]
_FORCE = {}  # PyTorch returns ZeroTensors, which numpy() reads only when forced


def _applied(T, op, example, values):
    """The op's output in module ``T`` (symgrad or torch) and its float inputs, which require grad."""
    args = [v if np.isscalar(v) else T.tensor(v, requires_grad=v.dtype.kind == "f") for v in values]
    attrs = [getattr(T, a.name) if isinstance(a, symgrad.dtype) else a for a in example.attrs]
    out = invariant(apply(op, *args, attrs=example.attrs) if T is symgrad else op.torch_fn(T, *args, *attrs), example)
    return out, [a for a in args if not np.isscalar(a) and a.requires_grad]


def _second_order(T, op, example, values, cotangent, directions):
    """(gradient-of-gradient per float input and for the cotangent), None where unused."""
    out, wrt = _applied(T, op, example, values)
    if not out.requires_grad:
        return None
    seed = T.tensor(cotangent, requires_grad=True)
    grads = T.autograd.grad(out, wrt, seed, create_graph=True, allow_unused=True)
    weighted = sum((g * T.tensor(d)).sum() for g, d in zip(grads, directions) if g is not None)
    if not weighted.requires_grad:
        return [None] * (len(wrt) + 1)
    second = T.autograd.grad(weighted, [*wrt, seed], allow_unused=True)
    return [None if s is None else np.asarray(s.detach().numpy(**_FORCE.get(T, {}))) for s in second]


@pytest.mark.parametrize("name,op,example", FIRST_EXAMPLES, ids=[c[0] for c in FIRST_EXAMPLES])
def test_gradient_of_gradient_matches_pytorch(name, op, example, torch):
    _FORCE[torch] = {"force": True}
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 2)
    values = make_inputs(op, example, rng)
    floats = [v for v in values if not np.isscalar(v) and v.dtype.kind == "f"]
    t_out = op.torch_fn(torch, *[v if np.isscalar(v) else torch.tensor(v) for v in values],
                        *[getattr(torch, a.name) if isinstance(a, symgrad.dtype) else a for a in example.attrs])
    cotangent = rng.standard_normal(tuple(t_out.shape))
    directions = [rng.standard_normal(v.shape) for v in floats]
    try:
        theirs = _second_order(torch, op, example, values, cotangent, directions)
    except RuntimeError as error:  # PyTorch has no double backward for this op
        pytest.skip(f"PyTorch: {str(error).splitlines()[0][:100]}")
    ours = _second_order(symgrad, op, example, values, cotangent, directions)
    if theirs is None:
        assert ours is None
        return
    for k, (s, t) in enumerate(zip(ours, theirs)):  # None (unused) on one side is zeros on the other
        np.testing.assert_allclose(0.0 if s is None else s, 0.0 if t is None else t, rtol=1e-7, atol=1e-10,
                                   err_msg=f"{name}: second-order term {k}")


def _has_history(T, op, example, values, cotangent):
    """Per float input: whether its create_graph gradient from a cotangent without history has
    history (None where unused); None if the output does not require grad."""
    out, wrt = _applied(T, op, example, values)
    if not out.requires_grad:
        return None
    grads = T.autograd.grad(out, wrt, T.tensor(cotangent), create_graph=True, allow_unused=True)
    return [g is not None and g.requires_grad for g in grads]


ALL_EXAMPLES = list(cases())


@pytest.mark.parametrize("name,op,example", ALL_EXAMPLES, ids=[c[0] for c in ALL_EXAMPLES])
def test_a_create_graph_gradient_has_history_where_pytorchs_has(name, op, example, torch):
    """PyTorch's gradient has history only where a backward formula reads a kept tensor that
    requires grad (``x * 2``'s and ``x.sum()``'s are constants, a second derivative through them
    raises): symgrad's gradient requires grad exactly there, for every example of every op."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 5)
    values = make_inputs(op, example, rng)
    try:
        t_out = op.torch_fn(torch, *[v if np.isscalar(v) else torch.tensor(v) for v in values],
                            *[getattr(torch, a.name) if isinstance(a, symgrad.dtype) else a for a in example.attrs])
        cotangent = rng.standard_normal(tuple(invariant(t_out, example).shape))
        theirs = _has_history(torch, op, example, values, cotangent)
    except (RuntimeError, NotImplementedError) as error:  # PyTorch refuses these inputs or this backward
        pytest.skip(f"PyTorch: {str(error).splitlines()[0][:100]}")
    assert _has_history(symgrad, op, example, values, cotangent) == theirs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_to_second_order_at_saturated_probabilities(torch, dtype, weighted):
    """BCE's second derivatives are PyTorch's double-backward formulas, which at q = 0 or 1 (a
    saturated sigmoid) are not the derivatives of its clamped first derivative: at q = t = 1
    symgrad's was 1e12 where PyTorch's is 0; toward the target at q = 1, NaN where PyTorch's is -inf;
    at float32 q = 1, inf where PyTorch's (q + 1e-12)(1 - q + 1e-12) keeps the 1e-12 (which SymPy and
    XLA would fold into the 1)."""
    q, t = (a.ravel().astype(dtype) for a in np.meshgrid([0.0, 1e-13, 1e-7, 0.3, 0.9, 1 - 1e-7, 1.0], [0.0, 0.3, 1.0]))
    direction = np.linspace(-1, 1, q.size).astype(dtype)

    def derivatives(T, target_requires_grad):
        x, y = T.tensor(q, requires_grad=True), T.tensor(t, requires_grad=target_requires_grad)
        weight = T.tensor(np.linspace(0.5, 2, q.size).astype(dtype)) if weighted else None
        wrt = (x, y) if target_requires_grad else (x,)
        grads = T.autograd.grad(T.nn.functional.binary_cross_entropy(x, y, weight=weight, reduction="sum"), wrt,
                                create_graph=True)
        second = T.autograd.grad(sum((g * T.tensor(direction)).sum() for g in grads), wrt)
        return [g.detach().numpy() for g in grads + second]

    for target_requires_grad in (False, True):
        ours, theirs = (derivatives(T, target_requires_grad) for T in (symgrad, torch))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=0)


@pytest.mark.parametrize("name, alpha", [("elu", 0.7), ("elu", 1.0), ("celu", 1.3), ("selu", None)])
def test_the_elu_family_has_no_second_derivative_at_zero(torch, name, alpha):
    """PyTorch's elu kernel takes x at 0, its backward the negative side (x <= 0), its double
    backward neither (x < 0): the second derivative at +-0 is 0, where symgrad's was the negative
    side's (alpha; selu's 1.76). Found by the random-programs fuzzer (selu at zeros)."""
    x0 = np.array([-np.inf, -3.0, -1e-3, -0.0, 0.0, 1e-3, 2.0, np.inf, np.nan])

    def derivatives(T):
        x = T.tensor(x0, requires_grad=True)
        fn = getattr(T.nn.functional, name)
        y = fn(x) if alpha is None else fn(x, alpha)
        (g,) = T.autograd.grad((y * T.tensor(np.linspace(-1, 2, x0.size))).sum(), x, create_graph=True)
        (h,) = T.autograd.grad((g * T.tensor(np.linspace(0.5, 1.5, x0.size))).sum(), x)
        return y.detach().numpy(), g.detach().numpy(), h.numpy()

    for ours, theirs in zip(derivatives(symgrad), derivatives(torch)):  # (celu: PyTorch's 1/alpha in float32)
        np.testing.assert_allclose(ours, theirs, rtol=1e-7 if name == "celu" else 1e-12, atol=0)
    assert derivatives(symgrad)[2][3:5].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("cotangent", ["without history", "with history"])
def test_prelu_at_zero_differentiates_as_pytorchs_double_backward(torch, cotangent):
    """PyTorch's prelu backward takes the negative side at +-0 (x > 0), its double backward the
    positive one (x >= 0): the second derivatives toward x and the weight are 0 there, and the
    derivative toward the cotangent is 1 (not the weight), as is forward AD's tangent.  Found by the
    random-programs fuzzer (prelu of zeros, symgrad's cross derivatives were the negative side's)."""
    x0 = np.array([-np.inf, -3.0, -0.0, 0.0, 2.0, np.inf, np.nan])
    weights = np.linspace(-1, 2, x0.size)

    def derivatives(T):
        x, w = T.tensor(x0, requires_grad=True), T.tensor(np.array([0.25]), requires_grad=True)
        y = T.prelu(x, w)
        loss = (y * y).sum() if cotangent == "with history" else (y * T.tensor(weights)).sum()
        gx, gw = T.autograd.grad(loss, (x, w), create_graph=True)
        second = (gx * T.tensor(weights[::-1].copy())).sum() + 3 * gw.sum()
        hx, hw = T.autograd.grad(second, (x, w), allow_unused=True, materialize_grads=True)
        fw = T.autograd.forward_ad
        with fw.dual_level():
            tangent = fw.unpack_dual(T.prelu(fw.make_dual(T.tensor(x0), T.tensor(weights)),
                                             fw.make_dual(T.tensor(np.array([0.25])), T.tensor(np.array([2.0]))))).tangent
        return [t.detach().numpy() for t in (y, gx, gw, hx, hw, tangent)]

    for ours, theirs in zip(derivatives(symgrad), derivatives(torch)):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("inner", ["abs", "relu", "hardtanh", "clamp_min"])
@pytest.mark.parametrize("outer", ["acos", "sqrt", "log"])
def test_a_mask_in_a_gradient_is_not_differentiated(torch, inner, outer):
    """relu's and abs's gradients multiply the cotangent by a mask or a sign that PyTorch's backward
    makes without history: a second backward sends nothing through it, where symgrad's product rule
    sent 0 times the cotangent (NaN where an outer derivative is infinite: acos(abs(1)), sqrt(relu(0))).
    Found by the random-programs fuzzer."""
    x0 = np.array([-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, np.inf, np.nan])

    def derivatives(T):
        x = T.tensor(x0, requires_grad=True)
        inner_fn = {"abs": T.abs, "relu": T.relu, "hardtanh": T.nn.functional.hardtanh,
                    "clamp_min": lambda v: T.clamp(v, min=0.0)}[inner]
        y = getattr(T, outer)(inner_fn(x))
        (g,) = T.autograd.grad((y * T.tensor(np.linspace(-1, 2, x0.size))).sum(), x, create_graph=True)
        (h,) = T.autograd.grad((g * T.tensor(np.linspace(0.5, 1.5, x0.size))).sum(), x, allow_unused=True,
                               materialize_grads=True)
        return [t.detach().numpy() for t in (y, g, h)]

    for ours, theirs in zip(derivatives(symgrad), derivatives(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


LOSSES_AT_THEIR_BOUND = {
    "smooth_l1": lambda T, x, t: T.nn.functional.smooth_l1_loss(x, t, reduction="none", beta=2.0),
    "huber": lambda T, x, t: T.nn.functional.huber_loss(x, t, reduction="none", delta=2.0),
    "softplus": lambda T, x, t: T.nn.functional.softplus(x * t),
    "softplus scaled": lambda T, x, t: T.nn.functional.softplus(x * t, beta=2.0, threshold=5.0),
}


@pytest.mark.parametrize("name", LOSSES_AT_THEIR_BOUND)
def test_a_bound_between_two_forms_has_pytorchs_second_derivative(torch, name):
    """smooth_l1 and huber at |d| = beta and at NaN, softplus at its threshold: PyTorch's backward takes
    one side's slope there, its double backward neither (it keeps |d| < beta, beta x < threshold), so
    the second derivative is 0 where symgrad's was the inside's curvature.  F.softplus with its default
    threshold is x itself above 20 (its gradient exactly 1: symgrad's was sigmoid(x), 1 - 1e-11 at x = 25
    in float64).  Found by a survey of edges after the random-programs fuzzer."""
    x0 = np.array([3.0, -1.0, 1.5, 0.0, 5.0, np.nan, -3.0, np.inf, 2.5, 20.0, 25.0, 19.0])

    def derivatives(T):
        x = T.tensor(x0, requires_grad=True)
        t = T.tensor(np.where(name.startswith("softplus"), 1.0, np.ones_like(x0)), requires_grad=True)
        y = LOSSES_AT_THEIR_BOUND[name](T, x, t)
        gx, gt = T.autograd.grad((y * T.arange(1.0, 13.0, dtype=T.float64)).sum(), (x, t), create_graph=True)
        hx, ht = T.autograd.grad((gx * T.arange(2.0, 14.0, dtype=T.float64)).sum(), (x, t))
        return [v.detach().numpy() for v in (y, gx, gt, hx, ht)]

    for ours, theirs in zip(derivatives(symgrad), derivatives(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


@pytest.mark.parametrize("reduction", ["amax", "max", "amin", "max_dim"])
def test_a_tie_mask_stops_an_infinite_cotangent(torch, reduction):
    """The mask of a max's tied entries (``x == max``) is made without history: at tied maxima of 1
    under acos (an infinite derivative) a second derivative was NaN where PyTorch's is -inf (0 times
    the infinite cotangent reached the max through the mask).  Found by the random-programs fuzzer."""
    def second(T):
        x = T.tensor(np.ones((2, 3)), requires_grad=True)
        top = {"amax": lambda: x.amax(0), "max": lambda: x.max(), "amin": lambda: x.amin(0),
               "max_dim": lambda: x.max(0).values}[reduction]()
        y = T.acos(top)
        (g,) = T.autograd.grad((y * T.tensor(np.resize([-0.75, 0.5, 1.25], y.shape))).sum(), x, create_graph=True)
        (h,) = T.autograd.grad((g * T.tensor(np.resize([-0.75, 0.5, 1.25, -1.5], (2, 3)))).sum(), x)
        return g.detach().numpy(), h.numpy()

    for ours, theirs in zip(second(symgrad), second(torch)):
        np.testing.assert_array_equal(ours, theirs)
