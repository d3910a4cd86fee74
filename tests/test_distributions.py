"""symgrad.distributions against torch.distributions on the same parameters: seeded draws bit for
bit (``sample`` and ``rsample``, with sample shapes and batched parameters), log_prob, entropy,
moments, cdf/icdf, their gradients through the parameters, kl_divergence's values and gradients,
shapes under ``expand``, reprs, and the validation errors' classes and messages."""
import math

import numpy as np
import pytest

import symgrad
from symgrad.distributions import Categorical


def D(T):
    return T.distributions


F32 = np.float32
LOC = np.array([[0.3, -1.2, 2.0], [0.5, 0.0, -0.7]], F32)
SCALE = np.array([[0.5, 1.5, 2.0], [0.8, 1.0, 0.3]], F32)
VALUE = np.array([[0.1, 0.4, 1.7], [-2.0, 0.2, 0.3]], F32)
PROBS = np.array([[0.2, 0.5, 0.9], [0.05, 0.7, 0.35]], F32)  # one 0.5: Bernoulli's mode is NaN there
COIN = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]], F32)
WEIGHTS = np.array([[0.2, 1.0, 0.3, 0.5], [2.0, 0.1, 0.7, 1.2]], F32)
COV = np.array([[[2.0, 0.5], [0.5, 1.0]], [[1.0, -0.3], [-0.3, 0.5]]], F32)
TRIL = np.linalg.cholesky(COV).astype(F32)
MV_VALUE = np.array([[[0.3, -0.2], [1.0, 2.0]], [[0.0, 0.5], [-1.0, 0.7]], [[2.0, 0.1], [0.4, -0.4]]], F32)
QUANTILES = np.array([[0.1, 0.5, 0.97], [0.3, 0.75, 0.02]], F32)

# whose sample() is PyTorch's random draws with no arithmetic after, so equal bit for bit.  The others
# transform the draws with a multiply-add, which XLA's CPU backend fuses, or divide them by a broadcast
# rate, which XLA turns into a product with its reciprocal: equal to the last rounding.
DRAWN_AS_PYTORCH = {"Normal", "Bernoulli", "Categorical", "OneHotCategorical", "Independent"}

SHIFTED_COV = (COV[::-1] + np.eye(2)).astype(F32)
WIDER = (SCALE * [[1.2, 2.0, 2.0], [1.0, 1.5, 1.1]]).astype(F32)

# name: (build(T, params), params, the params of q for kl_divergence(p, q) and q's build if not p's,
#        value for log_prob, outputs whose sum is differentiated).  q takes the other parameter where
#        there is a choice, so its lazily derived one is differentiated too.
FAMILIES = {
    "Normal": (lambda T, p: D(T).Normal(p["loc"], p["scale"]), {"loc": LOC, "scale": SCALE},
               ({"loc": VALUE, "scale": SCALE[::-1]}, None), VALUE,
               "log_prob entropy rsample mean variance stddev cdf icdf kl"),
    "Bernoulli": (lambda T, p: D(T).Bernoulli(probs=p["probs"]), {"probs": PROBS},
                  ({"logits": VALUE}, lambda T, p: D(T).Bernoulli(logits=p["logits"])), COIN,
                  "log_prob entropy mean variance stddev kl"),
    "Categorical": (lambda T, p: D(T).Categorical(probs=p["probs"]), {"probs": WEIGHTS},
                    ({"logits": LOC[:, :1] * WEIGHTS}, lambda T, p: D(T).Categorical(logits=p["logits"])),
                    np.array([[3, 0], [1, 2], [0, 0]]), "log_prob entropy kl"),
    "OneHotCategorical": (lambda T, p: D(T).OneHotCategorical(logits=p["logits"]), {"logits": WEIGHTS},
                          ({"probs": WEIGHTS[::-1]}, lambda T, p: D(T).OneHotCategorical(p["probs"])),
                          np.eye(4, dtype=F32)[[1, 3]], "log_prob entropy mean variance kl"),
    "Uniform": (lambda T, p: D(T).Uniform(p["low"], p["low"] + p["width"]), {"low": LOC, "width": SCALE},
                ({"low": LOC - 0.1, "width": WIDER}, None), LOC + 0.3 * SCALE,
                "log_prob entropy rsample mean variance stddev cdf icdf kl"),
    "Exponential": (lambda T, p: D(T).Exponential(p["rate"]), {"rate": SCALE}, ({"rate": PROBS}, None), np.abs(VALUE),
                    "log_prob entropy rsample mean variance stddev cdf icdf kl"),
    "Laplace": (lambda T, p: D(T).Laplace(p["loc"], p["scale"]), {"loc": LOC, "scale": SCALE},
                ({"loc": VALUE, "scale": SCALE[::-1]}, None), VALUE,
                "log_prob entropy rsample mean variance stddev cdf icdf kl"),
    "MultivariateNormal(covariance)": (
        lambda T, p: D(T).MultivariateNormal(p["loc"], covariance_matrix=p["cov"]), {"loc": LOC[0, :2], "cov": COV},
        ({"loc": VALUE[:, :2], "precision": SHIFTED_COV},
         lambda T, p: D(T).MultivariateNormal(p["loc"], precision_matrix=p["precision"])),
        MV_VALUE, "log_prob entropy rsample variance kl"),
    "MultivariateNormal(scale_tril)": (
        lambda T, p: D(T).MultivariateNormal(p["loc"], scale_tril=p["tril"]), {"loc": LOC[:, :2], "tril": TRIL},
        ({"loc": VALUE[0, :2], "tril": np.linalg.cholesky(SHIFTED_COV).astype(F32)}, None),
        MV_VALUE[0], "log_prob entropy rsample kl"),
    "Independent(Normal)": (lambda T, p: D(T).Independent(D(T).Normal(p["loc"], p["scale"]), 1),
                            {"loc": LOC, "scale": SCALE}, ({"loc": VALUE, "scale": PROBS}, None), VALUE,
                            "log_prob entropy rsample kl"),
}


def _leaves(T, arrays: dict) -> dict:
    return {k: T.tensor(np.ascontiguousarray(v), requires_grad=v.dtype.kind == "f") for k, v in arrays.items()}


def _numpy(x):
    return x.detach().numpy()


def _observe(T, name: str):
    """Every method of the family, in one order (so draws line up), and the gradients of the sum of
    the differentiable outputs.  Validation is off (the error tests below check it) and the outputs
    are read as one concatenation: one compiled program instead of one per check and output."""
    build, arrays, (q_arrays, build_q), value, differentiated = FAMILIES[name]
    T.manual_seed(7)
    params, q_params = _leaves(T, arrays), _leaves(T, q_arrays)
    D(T).Distribution.set_default_validate_args(False)
    try:
        p, q = build(T, params), (build_q or build)(T, q_params)
        return _observed(T, p, q, T.tensor(value), differentiated, params, q_params)
    finally:
        D(T).Distribution.set_default_validate_args(True)


def _observed(T, dist, q, value, differentiated, params, q_params):
    seen = {"sample": dist.sample((3,)), "sample()": dist.sample(), "log_prob": dist.log_prob(value),
            "entropy": dist.entropy(), "mean": dist.mean, "mode": dist.mode, "variance": dist.variance,
            "stddev": dist.stddev, "kl": D(T).kl_divergence(dist, q)}
    if dist.has_rsample:
        seen["rsample"] = dist.rsample((2,))
    if "cdf" in differentiated:
        seen["cdf"], seen["icdf"] = dist.cdf(value), dist.icdf(T.tensor(QUANTILES))
    seen["sample: the generator after"] = T.rand(4)
    loss = sum(seen[k].sum() for k in differentiated.split())
    flat = T.cat([v.detach().reshape(-1).double() for v in seen.values()]).numpy()
    offsets = np.cumsum([0] + [v.numel() for v in seen.values()])
    out = {k: (flat[a:b].reshape(tuple(v.shape)), str(v.dtype), v.requires_grad)
           for (k, v), a, b in zip(seen.items(), offsets, offsets[1:])}
    del seen  # (nothing left pending for backward to compute as well)
    loss.backward()
    for prefix, leaves in (("grad ", params), ("grad q ", q_params)):
        out.update({prefix + k: (_numpy(p.grad), str(p.grad.dtype), False) for k, p in leaves.items()
                    if p.grad is not None})
    return out, (tuple(dist.batch_shape), tuple(dist.event_shape), repr(dist))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_matches_pytorch(torch, name):
    ours, our_shapes = _observe(symgrad, name)
    theirs, their_shapes = _observe(torch, name)
    assert our_shapes == their_shapes and sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key][1:] == theirs[key][1:] and ours[key][0].shape == theirs[key][0].shape, key
        if key.startswith("sample") and (name.split("(")[0] in DRAWN_AS_PYTORCH or "after" in key):
            np.testing.assert_array_equal(ours[key][0], theirs[key][0], err_msg=key)  # PyTorch's draws, bit for bit
        elif key.startswith("sample"):  # PyTorch's draws, then arithmetic XLA rounds once less or more
            np.testing.assert_allclose(ours[key][0], theirs[key][0], rtol=3e-7, atol=1e-7, err_msg=key)
        else:
            np.testing.assert_allclose(ours[key][0], theirs[key][0], rtol=2e-6, atol=2e-6, equal_nan=True,
                                       err_msg=key)


def _kl_edges(T):
    """Outcomes one side cannot produce: infinite terms, zero terms, and the gradients around them."""
    d = D(T)
    arrays = [np.array(a, F32) for a in ([0.0, 1.0, 0.3, 0.0, 0.5], [0.5, 0.0, 1.0, 0.0, 0.5],
                                        [[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]], [[1.0, 0.0, 1.0], [1.0, 2.0, 3.0]],
                                        [0.0, 1.0, 0.5], [2.0, 1.0, 1.0], [-0.5, 1.0, 0.2], [1.0, 0.5, 3.0])]
    leaves = [T.tensor(a, requires_grad=True) for a in arrays]
    p_coin, q_coin, p_die, q_die, low, width, q_low, q_width = leaves
    kls = [d.kl_divergence(d.Bernoulli(p_coin), d.Bernoulli(q_coin)),
           d.kl_divergence(d.Categorical(p_die), d.Categorical(q_die)),
           d.kl_divergence(d.Uniform(low, low + width), d.Uniform(q_low, q_low + q_width))]
    sum(kl.sum() for kl in kls).backward()
    return [_numpy(kl) for kl in kls] + [_numpy(leaf.grad) for leaf in leaves]


def test_kl_divergence_edges_match_pytorch(torch):
    for k, (ours, theirs) in enumerate(zip(_kl_edges(symgrad), _kl_edges(torch))):
        np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=2e-6, err_msg=f"output {k}")


def test_reinforce_step_matches_pytorch(torch):
    """A policy's Categorical over a softmax of a Linear layer: seeded weights and actions equal,
    the policy gradient equal."""
    states = np.random.default_rng(0).standard_normal((5, 4)).astype(F32)
    rewards = np.array([1.0, -0.5, 2.0, 0.0, 1.5], F32)
    seen = {}
    for T in (symgrad, torch):
        T.manual_seed(0)
        policy = T.nn.Linear(4, 3)
        dist = D(T).Categorical(T.softmax(policy(T.tensor(states)), dim=-1))
        action = dist.sample()
        loss = -(dist.log_prob(action) * T.tensor(rewards)).sum()
        loss.backward()
        seen[T] = action.numpy(), loss.item(), policy.weight.grad.numpy(), policy.bias.grad.numpy()
    np.testing.assert_array_equal(seen[symgrad][0], seen[torch][0])
    for ours, theirs in zip(seen[symgrad][1:], seen[torch][1:]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def _shapes(T):
    """Shapes, expand, reprs, enumerate_support and the seeded draws of expanded distributions."""
    d = D(T)
    T.manual_seed(3)
    normal = d.Normal(T.tensor([0.0, 1.0]), 2.0)
    wide = normal.expand((3, 2))
    mvn = d.MultivariateNormal(T.zeros(2), T.eye(2)).expand((4,))
    onehot = d.OneHotCategorical(logits=T.zeros(2, 3)).expand((5, 2))
    independent = d.Independent(d.Normal(T.zeros(2, 3), 1.0), 1).expand((4, 2))
    lazy = d.Categorical(logits=T.tensor([0.0, 1.0, 2.0]))
    before = sorted(k for k in ("probs", "logits") if k in lazy.__dict__)
    return [repr(x) for x in (d.Normal(0.0, 1.0), d.Bernoulli(0.3), normal, wide, mvn, onehot, independent, lazy,
                              d.Uniform(T.zeros(()), 1.0), d.Exponential(T.ones(1)))] + [
        (tuple(x.batch_shape), tuple(x.event_shape)) for x in (normal, wide, mvn, onehot, independent)] + [
        before, lazy.probs.tolist(), sorted(k for k in ("probs", "logits") if k in lazy.__dict__),
        wide.sample((2,)).tolist(), mvn.rsample().tolist(), onehot.sample().tolist(), independent.sample().tolist(),
        d.Bernoulli(T.tensor([0.2, 0.9])).enumerate_support().tolist(), onehot.enumerate_support(False).shape,
        lazy.enumerate_support().tolist(), wide.log_prob(T.zeros(3, 2)).shape, normal.perplexity().tolist(),
        str(d.Uniform(0.0, 2.0).support), str(lazy.support), str(mvn.support), str(independent.support),
        d.Independent(normal, 1).has_rsample, onehot.has_rsample, lazy.has_enumerate_support]


def test_shapes_expand_and_reprs_match_pytorch(torch):
    ours, theirs = _shapes(symgrad), _shapes(torch)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(b, list) and b and isinstance(b[0], float):
            np.testing.assert_allclose(a, b, rtol=1e-6)
        else:
            assert a == b or (hasattr(b, "__len__") and tuple(a) == tuple(b)), (a, b)


ERRORS = {
    "negative scale": lambda T: D(T).Normal(T.zeros(2), T.tensor([1.0, -1.0])),
    "NaN loc": lambda T: D(T).Laplace(T.tensor([math.nan]), 1.0),
    "value outside the support": lambda T: D(T).Bernoulli(T.tensor([0.2, 0.5])).log_prob(T.tensor([0.5, 1.0])),
    "category out of range": lambda T: D(T).Categorical(T.tensor([0.2, 0.5])).log_prob(T.tensor([3])),
    "negative exponential value": lambda T: D(T).Exponential(2.0).log_prob(T.tensor([-1.0])),
    "value outside a Uniform": lambda T: D(T).Uniform(T.zeros(2), 1.0).log_prob(T.tensor([0.5, 1.5])),
    "not a one-hot": lambda T: D(T).OneHotCategorical(T.ones(3)).log_prob(T.tensor([1.0, 1.0, 0.0])),
    "shapes not broadcastable": lambda T: D(T).Normal(T.zeros(2), T.ones(2)).log_prob(T.zeros(3)),
    "event shape": lambda T: D(T).MultivariateNormal(T.zeros(2), T.eye(2)).log_prob(T.zeros(3)),
    "not a tensor": lambda T: D(T).Normal(0.0, 1.0).log_prob(0.5),
    "low above high": lambda T: D(T).Uniform(T.tensor([0.0, 2.0]), T.tensor([1.0, 1.0])),
    "probs and logits": lambda T: D(T).Bernoulli(T.tensor(0.5), T.tensor(0.0)),
    "neither": lambda T: D(T).Categorical(),
    "0-d probs": lambda T: D(T).Categorical(T.tensor(0.5)),
    "negative probs": lambda T: D(T).Categorical(T.tensor([0.5, -0.1, 0.6])),
    "probs above 1": lambda T: D(T).Bernoulli(T.tensor([1.5])),
    "two matrices": lambda T: D(T).MultivariateNormal(T.zeros(2), T.eye(2), scale_tril=T.eye(2)),
    "no matrix": lambda T: D(T).MultivariateNormal(T.zeros(2)),
    "not positive definite": lambda T: D(T).MultivariateNormal(T.zeros(2), T.tensor([[1.0, 2.0], [2.0, 1.0]])),
    "not symmetric": lambda T: D(T).MultivariateNormal(T.zeros(2), T.tensor([[1.0, 0.5], [0.0, 1.0]])),
    "not lower triangular": lambda T: D(T).MultivariateNormal(T.zeros(2),
                                                              scale_tril=T.tensor([[1.0, 0.5], [0.0, 1.0]])),
    "1-d covariance": lambda T: D(T).MultivariateNormal(T.zeros(2), T.ones(2)),
    "0-d loc": lambda T: D(T).MultivariateNormal(T.zeros(()), T.eye(2)),
    "too many reinterpreted dims": lambda T: D(T).Independent(D(T).Normal(T.zeros(2), 1.0), 2),
    "no KL for the pair": lambda T: D(T).kl_divergence(D(T).Categorical(T.ones(2)), D(T).Normal(0.0, 1.0)),
    "KL across event shapes": lambda T: D(T).kl_divergence(D(T).MultivariateNormal(T.zeros(2), T.eye(2)),
                                                           D(T).MultivariateNormal(T.zeros(3), T.eye(3))),
    "a string parameter": lambda T: D(T).Normal("0", 1.0),
    "default validation not a bool": lambda T: D(T).Distribution.set_default_validate_args(2),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_pytorch(torch, name):
    raised = []
    for T in (symgrad, torch):
        with pytest.raises(Exception) as error:
            ERRORS[name](T)
        raised.append((type(error.value).__name__, str(error.value)))
    assert raised[0] == raised[1]


def test_validation_switches(torch):
    """``validate_args=False`` and the default switch let bad parameters and values through, as in PyTorch."""
    seen = {}
    for T in (symgrad, torch):
        d = D(T)
        off = d.Uniform(T.zeros(2), 1.0, validate_args=False).log_prob(T.tensor([0.5, 1.5])).tolist()
        d.Distribution.set_default_validate_args(False)
        try:
            lax = d.Bernoulli(T.tensor([1.5])).log_prob(T.tensor([1.0])).tolist()
        finally:
            d.Distribution.set_default_validate_args(True)
        seen[T] = off, lax, d.Normal(0.0, 1.0)._validate_args
    assert seen[symgrad] == seen[torch]


def test_register_kl_and_imports():
    """A registered pair is found for subclasses, the most specific one first; both import forms work."""
    class Policy(Categorical):
        pass

    @symgrad.distributions.register_kl(Policy, Categorical)
    def _constant(p, q):
        return symgrad.zeros(())

    p, q = Policy(symgrad.tensor([0.5, 0.5])), Categorical(symgrad.tensor([0.5, 0.5]))
    assert symgrad.distributions.kl_divergence(p, q).item() == 0.0
    assert symgrad.distributions.kl_divergence(q, p).item() == 0.0  # Categorical's closed form, KL of equals
    assert symgrad.distributions.Categorical is Categorical
