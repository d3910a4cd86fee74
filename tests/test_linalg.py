"""torch.linalg's factorizations against PyTorch on the same inputs: values, gradients (losses
that do not depend on the signs of eigen- and singular vectors), grad_fn names, errors, and
second order where PyTorch has it."""
import numpy as np
import pytest

import symgrad

RNG = np.random.default_rng(14)


def _matrix(*shape):
    return RNG.standard_normal(shape)


def _well_conditioned(*shape):
    return _matrix(*shape) + 3 * np.eye(shape[-1])


def _spd(*shape):
    a = _matrix(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


SPD = _spd(3, 3)  # drawn once, at import: a test's numbers do not depend on which tests run


def _weights(outputs):
    return [np.random.default_rng(k).standard_normal(tuple(o.shape)) for k, o in enumerate(outputs)]


def _weighted(outputs, weights, lib):
    """sum(w * f(out)): squares of vectors (the sign of each is arbitrary), values as they are."""
    total = 0
    for (out, square), w in zip(outputs, weights):
        total = total + ((out * out) if square else out).mul(lib.tensor(w, dtype=out.dtype)).sum()
    return total


# name -> (function of the library and its inputs -> [(output, squared in the loss)], inputs)
CASES = {
    "inv": (lambda t, a: [(t.linalg.inv(a), False), (t.inverse(a[0]), False), (a[1].inverse(), False)],
            [_well_conditioned(2, 3, 3)]),
    "det": (lambda t, a: [(t.linalg.det(a), False), (a.det(), False)], [_well_conditioned(2, 3, 3)]),
    "slogdet": (lambda t, a: [(t.linalg.slogdet(a).logabsdet, False), (t.slogdet(a).sign, False)],
                [_matrix(3, 4, 4)]),
    "logdet": (lambda t, a: [(t.logdet(a), False)], [_spd(2, 3, 3)]),
    "solve_vector": (lambda t, a, b: [(t.linalg.solve(a, b), False)], [_well_conditioned(2, 3, 3), _matrix(3)]),
    "solve_matrix": (lambda t, a, b: [(t.linalg.solve(a, b), False)], [_well_conditioned(3, 3), _matrix(2, 3, 2)]),
    "solve_right": (lambda t, a, b: [(t.linalg.solve(a, b, left=False), False)],
                    [_well_conditioned(2, 3, 3), _matrix(2, 4, 3)]),
    "cholesky": (lambda t, a: [(t.linalg.cholesky(a), False), (t.linalg.cholesky(a, upper=True), False),
                               (t.cholesky(a[0], upper=True), False)], [_spd(2, 3, 3)]),
    "qr_tall": (lambda t, a: list(zip(t.linalg.qr(a), (False, False))), [_matrix(2, 5, 3)]),
    "qr_wide": (lambda t, a: list(zip(t.linalg.qr(a), (False, False))), [_matrix(3, 5)]),
    "qr_complete": (lambda t, a: list(zip(t.linalg.qr(a, mode="complete"), (False, False))), [_matrix(3, 4)]),
    "eigh": (lambda t, a: list(zip(t.linalg.eigh(a), (False, True))), [_matrix(2, 4, 4)]),
    "eigh_upper": (lambda t, a: [*zip(t.linalg.eigh(a, UPLO="U"), (False, True)), (t.linalg.eigvalsh(a), False)],
                   [_matrix(3, 3)]),
    "svd_tall": (lambda t, a: [*zip(t.linalg.svd(a, full_matrices=False), (True, False, True)),
                               *zip(t.svd(a), (True, False, True))], [_matrix(2, 4, 3)]),
    "svd_wide": (lambda t, a: list(zip(t.linalg.svd(a, full_matrices=False), (True, False, True))), [_matrix(3, 5)]),
    "svd_full": (lambda t, a: [(t.linalg.svd(a).U[..., :3], True), (t.linalg.svd(a).Vh, True)], [_matrix(4, 3)]),
    "svd_product": (lambda t, a: [((lambda u, s, vh: u @ (s[..., None] * vh))(*t.linalg.svd(a, False)), False)],
                    [_matrix(3, 3)]),
    "matrix_norm": (lambda t, a: [(t.linalg.matrix_norm(a, 2), False), (t.linalg.matrix_norm(a, -2), False),
                                  (t.linalg.matrix_norm(a, "nuc", dim=(0, 2), keepdim=True), False),
                                  (t.linalg.svdvals(a), False)], [_matrix(3, 4, 3)]),
    "torch.norm nuc": (lambda t, a: [(t.norm(a[0], "nuc"), False), (a.norm("nuc", dim=(0, 2), keepdim=True), False)],
                       [_matrix(2, 3, 4)]),
    "norm": (lambda t, a: [(t.linalg.norm(a, "nuc"), False), (t.linalg.norm(a, 2), False),
                           (t.linalg.norm(a), False), (t.linalg.norm(a, 1, dim=0), False)], [_matrix(3, 4)]),
}


def _run(lib, case, dtype, values):
    fn, _ = CASES[case]
    inputs = [lib.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    outputs = fn(lib, *inputs)
    _weighted(outputs, _weights([o for o, _ in outputs]), lib).backward()
    return outputs, inputs


IN_FLOAT32 = ("inv", "solve_vector", "cholesky", "qr_tall", "eigh", "svd_wide")


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case,precision",
                         [(c, "float64") for c in sorted(CASES)] + [(c, "float32") for c in IN_FLOAT32])
def test_values_and_gradients_match_pytorch(case, precision, torch):
    values = CASES[case][1]
    rtol = 1e-9 if precision == "float64" else 2e-4
    ours, our_inputs = _run(symgrad, case, getattr(symgrad, precision), values)
    theirs, their_inputs = _run(torch, case, getattr(torch, precision), values)
    for (o, square), (t, _) in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape) and repr(o.dtype) == repr(t.dtype)
        o, t = o.detach().numpy(), t.detach().numpy()
        np.testing.assert_allclose(o * o if square else o, t * t if square else t, rtol=rtol, atol=rtol, err_msg=case)
    for o, t in zip(our_inputs, their_inputs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=rtol, err_msg=case)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_named_results_and_grad_fn_names(torch):
    a = SPD
    for lib in (symgrad, torch):
        x = lib.tensor(a, requires_grad=True)
        results = [lib.linalg.slogdet(x), lib.slogdet(x), lib.linalg.qr(x), lib.qr(x), lib.linalg.eigh(x),
                   lib.linalg.svd(x), lib.svd(x)]
        r = dict(zip(("sign", "logabsdet", "Q", "R", "eigenvalues", "eigenvectors", "U", "S", "Vh"),
                     (*results[0], *results[2], *results[4], *results[5])))
        r = type("Fields", (), r)
        names = [(type(r).__name__, [type(v.grad_fn).__name__ for v in r]) for r in results]
        fields = [r.sign, r.logabsdet, r.Q, r.R, r.eigenvalues, r.eigenvectors, r.U, r.S, r.Vh]
        assert [tuple(f.shape) for f in fields] == [(), (), *[(3, 3)] * 2, (3,), *[(3, 3)] * 2, (3,), (3, 3)]
        singles = [lib.linalg.inv(x), lib.inverse(x), lib.linalg.det(x), lib.logdet(x), lib.linalg.cholesky(x),
                   lib.cholesky(x), lib.linalg.solve(x, x), lib.linalg.svdvals(x), lib.linalg.matrix_norm(x, 2),
                   lib.linalg.matrix_norm(x, -2), lib.linalg.matrix_norm(x, "nuc")]
        names += [type(s.grad_fn).__name__ for s in singles]
        if lib is symgrad:
            ours = names
    assert ours == names
    assert repr(symgrad.linalg.qr(symgrad.tensor(a))).startswith("torch.return_types.linalg_qr(\nQ=tensor(")


def _error(lib, fn):
    with pytest.raises(Exception) as info:
        fn(lib)
    return info.value


ERRORS = {
    "cholesky_not_positive_definite": lambda t: t.linalg.cholesky(t.tensor([[1.0, 2.0], [2.0, 1.0]])),
    "cholesky_batch": lambda t: t.linalg.cholesky(t.tensor([[[4.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, -1.0]]])),
    "cholesky_legacy": lambda t: t.cholesky(t.tensor([[-1.0]])),
    "inv_singular": lambda t: t.linalg.inv(t.tensor([[1.0, 2.0], [2.0, 4.0]])),
    "inv_batch_singular": lambda t: t.linalg.inv(t.zeros(2, 3, 3)),
    "solve_singular": lambda t: t.linalg.solve(t.zeros(3, 3), t.ones(3)),
    "inv_not_square": lambda t: t.linalg.inv(t.ones(2, 3)),
    "det_vector": lambda t: t.linalg.det(t.ones(3)),
    "inv_integer": lambda t: t.linalg.inv(t.ones(3, 3, dtype=t.int64)),
    "svd_integer": lambda t: t.linalg.svd(t.ones(3, 3, dtype=t.int32)),
    "inv_half": lambda t: t.linalg.inv(t.ones(3, 3, dtype=t.float16)),
    "eigh_not_square": lambda t: t.linalg.eigh(t.ones(2, 3)),
    "eigh_uplo": lambda t: t.linalg.eigh(t.eye(3), UPLO="X"),
    "qr_vector": lambda t: t.linalg.qr(t.ones(3)),
    "qr_mode": lambda t: t.linalg.qr(t.ones(3, 3), mode="x"),
    "solve_shapes": lambda t: t.linalg.solve(t.eye(3), t.ones(2)),
    "solve_right_shapes": lambda t: t.linalg.solve(t.eye(3), t.ones(3, 2), left=False),
    "solve_dtypes": lambda t: t.linalg.solve(t.eye(3), t.ones(3, dtype=t.float64)),
    "cross_length": lambda t: t.linalg.cross(t.ones(2), t.ones(2)),
    "cross_length_negative_dim": lambda t: t.cross(t.ones(3, 2), t.ones(3, 2), dim=-1),
    "matrix_norm_vector": lambda t: t.linalg.matrix_norm(t.ones(3), 2),
    "norm_3d": lambda t: t.linalg.norm(t.ones(2, 3, 3), 2),
    "solve_triangular_vector": lambda t: t.linalg.solve_triangular(t.eye(3), t.ones(3), upper=True),
    "solve_triangular_shapes": lambda t: t.linalg.solve_triangular(t.eye(3), t.ones(2, 2), upper=True),
    "solve_triangular_integer": lambda t: t.linalg.solve_triangular(t.ones(3, 3, dtype=t.int64),
                                                                     t.ones(3, 2, dtype=t.int64), upper=True),
    "qr_complete_tall_backward": lambda t: _backward_of(t, lambda x: t.linalg.qr(x, mode="complete").Q, (3, 2)),
    "qr_r_backward": lambda t: _backward_of(t, lambda x: t.linalg.qr(x, mode="r").R, (2, 2)),
}


def _backward_of(lib, fn, shape):
    x = lib.ones(*shape, requires_grad=True)  # held: a gradient nobody can read is not computed
    fn(x).sum().backward()
    return x.grad


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_pytorch(case, torch):
    ours, theirs = _error(symgrad, ERRORS[case]), _error(torch, ERRORS[case])
    assert type(ours).__name__ == type(theirs).__name__.lstrip("_")  # torch._C._LinAlgError
    assert str(ours).startswith(str(theirs).split(" [")[0]), (str(ours), str(theirs))
    assert isinstance(ours, symgrad.linalg.LinAlgError) == isinstance(theirs, torch.linalg.LinAlgError)


SECOND_ORDER = {
    "inv": lambda t, a: t.linalg.inv(a).pow(2).sum(), "det": lambda t, a: t.linalg.det(a),
    "logdet": lambda t, a: t.logdet(a), "solve": lambda t, a: t.linalg.solve(a, a[0]).pow(2).sum(),
    "cholesky": lambda t, a: t.linalg.cholesky(a).pow(2).sum(),
    "qr": lambda t, a: t.linalg.qr(a).Q.pow(3).sum() + t.linalg.qr(a).R.pow(2).sum(),
    "eigh": lambda t, a: t.linalg.eigh(a).eigenvalues.pow(3).sum() + t.linalg.eigh(a).eigenvectors.pow(4).sum(),
    "svd": lambda t, a: t.linalg.svd(a, False).S.pow(3).sum() + t.linalg.svd(a, False).U.pow(4).sum(),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_order_matches_pytorch(name, torch):
    """The gradient of a gradient (create_graph): the VJPs are made of heads that have VJPs."""
    a = SPD
    results = []
    for lib in (symgrad, torch):
        x = lib.tensor(a, requires_grad=True)
        (first,) = lib.autograd.grad(SECOND_ORDER[name](lib, x), x, create_graph=True)
        (second,) = lib.autograd.grad((first * first).sum(), x)
        results.append((first.detach().numpy(), second.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)


def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(torch):
    """As PyTorch's double-differentiable rule gives it (its first-order rule gives zeros exactly at
    a singular matrix: docs/api.md lists the difference)."""
    a = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]])
    grads = []
    for lib in (symgrad, torch):
        x = lib.tensor(a, requires_grad=True)
        (g,) = lib.autograd.grad(lib.linalg.det(x).sum(), x, create_graph=True)
        grads.append(g.detach().numpy())
    np.testing.assert_allclose(*grads, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kwargs,a,b", [
    ({"upper": True}, _well_conditioned(2, 3, 3), _matrix(3, 2)),
    ({"upper": False, "unitriangular": True}, _well_conditioned(3, 3), _matrix(3, 2)),
    ({"upper": False, "left": False}, _well_conditioned(3, 3), _matrix(2, 4, 3)),
])
def test_solve_triangular_reads_one_triangle(kwargs, a, b, torch):
    results = []
    for lib in (symgrad, torch):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        out = lib.linalg.solve_triangular(x, y, **kwargs)
        (out * out).sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy(), y.grad.numpy(), type(out.grad_fn).__name__))
    for ours, theirs in zip(*(r[:3] for r in results)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    assert results[0][3] == results[1][3]


# A singular matrix, and one that is not positive-definite: eager calls raise, compiled ones cannot.
NOT_FACTORABLE = {
    "inv": (lambda t, a: t.linalg.inv(a).sum(), [[1.0, 2.0], [2.0, 4.0]]),
    "solve": (lambda t, a: t.linalg.solve(a, t.ones(2, dtype=a.dtype)).sum(), [[1.0, 2.0], [2.0, 4.0]]),
    "cholesky": (lambda t, a: t.linalg.cholesky(a).sum(), [[1.0, 2.0], [2.0, 1.0]]),
}


@pytest.mark.parametrize("case", sorted(NOT_FACTORABLE))
def test_eager_calls_raise_and_compiled_functions_return_non_finite_values(case, torch):
    """As PyTorch, wherever values are at hand (the call, backward, torch.func.jacrev); as jax.jit,
    in a compiled function, which never reads its inputs on the host (docs/api.md)."""
    fn, a = NOT_FACTORABLE[case]
    a = np.array(a)
    for lib in (symgrad, torch):
        for run in (lambda: fn(lib, lib.tensor(a, requires_grad=True)).backward(),
                    lambda: lib.func.jacrev(lambda x: fn(lib, x))(lib.tensor(a))):
            with pytest.raises(lib.linalg.LinAlgError) as raised:
                run()
            assert "singular" in str(raised.value) or "positive-definite" in str(raised.value)
    value, grad = symgrad.value_and_grad(lambda x: fn(symgrad, x))(a)
    assert not np.isfinite(value) and not np.isfinite(np.asarray(grad)).any()
    functional = symgrad.func.grad(lambda x: fn(symgrad, x))(symgrad.tensor(a))
    assert not np.isfinite(functional.numpy()).any()
    with pytest.raises(torch.linalg.LinAlgError):
        torch.func.grad(lambda x: fn(torch, x))(torch.tensor(a))


def test_cross_rounds_as_pytorchs_fused_kernel(torch):
    """PyTorch's CPU cross is ``fma(a[j], b[k], -(a[k] b[j]))``: float32 ``cross(x, x)`` of one tensor
    is the first product's rounding error (its reciprocal 2.8e8, not inf: XLA contracted two
    operands' products into an fma, but one tensor's two equal products it merged, and ``p - p`` is
    0), and near-parallel vectors keep PyTorch's last bits (random-programs fuzzer, session 24)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 3)).astype(np.float32)
    b = (a * np.float32(1.5) + rng.standard_normal((64, 3)).astype(np.float32) * np.float32(1e-3)).astype(np.float32)
    same = np.full((2, 3), 0.3, np.float32)
    results = []
    for T in (symgrad, torch):
        x = T.tensor(same)
        results.append([T.linalg.cross(T.tensor(a), T.tensor(b), dim=1).numpy(), T.linalg.cross(x, x, dim=1).numpy(),
                        T.linalg.cross(T.tensor(same), T.tensor(same), dim=1).numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)
    assert (results[1][1] != 0).all()
