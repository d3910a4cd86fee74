"""symgrad.distributions' Gamma, Chi2, LogNormal, Gumbel, HalfNormal, Cauchy, Geometric, Poisson and
Binomial against torch.distributions on the same parameters: seeded draws (the host kernels for
gamma, Cauchy, Poisson, binomial and Dirichlet draws bit for bit), values and gradients of log_prob,
entropy, rsample, moments, cdf/icdf and same-family KL; the class hierarchy; the errors' classes and
messages."""
import math

import numpy as np
import pytest

import symgrad
from symgrad.distributions import host_kernels

from distribution_parity import CONC, COUNTS, D, LOC, PROBS, SCALE, VALUE, assert_matches, observe

# name: (build(T, params), params, q's params, value for log_prob/cdf, methods observed)
FAMILIES = {
    "Gamma": (lambda T, p: D(T).Gamma(p["c"], p["r"]), {"c": CONC, "r": SCALE}, {"c": SCALE, "r": CONC + 1},
              VALUE, "log_prob entropy rsample mean mode variance kl"),
    "Chi2": (lambda T, p: D(T).Chi2(p["df"]), {"df": CONC * 2}, {"df": SCALE}, VALUE, "mean variance"),
    "LogNormal": (lambda T, p: D(T).LogNormal(p["loc"], p["scale"]), {"loc": LOC, "scale": SCALE},
                  {"loc": VALUE, "scale": SCALE[::-1]}, VALUE,
                  "log_prob entropy rsample mean mode variance cdf icdf kl"),
    "Gumbel": (lambda T, p: D(T).Gumbel(p["loc"], p["scale"]), {"loc": LOC, "scale": SCALE},
               {"loc": VALUE, "scale": SCALE[::-1]}, VALUE, "log_prob entropy rsample mean mode variance stddev kl"),
    "HalfNormal": (lambda T, p: D(T).HalfNormal(p["scale"]), {"scale": SCALE}, {"scale": SCALE[::-1]}, VALUE - 0.15,
                   "log_prob entropy rsample mean mode variance cdf icdf kl"),
    "Cauchy": (lambda T, p: D(T).Cauchy(p["loc"], p["scale"]), {"loc": LOC, "scale": SCALE},
               {"loc": VALUE, "scale": SCALE[::-1]}, VALUE, "log_prob entropy rsample mode cdf icdf kl"),
    "Geometric": (lambda T, p: D(T).Geometric(p["probs"]), {"probs": PROBS}, {"probs": SCALE / 2.5}, COUNTS,
                  "log_prob entropy mean mode variance kl"),
    "Poisson": (lambda T, p: D(T).Poisson(p["rate"]), {"rate": SCALE * 9}, {"rate": CONC}, COUNTS,
                "log_prob mean mode variance kl"),
    "Binomial": (lambda T, p: D(T).Binomial(T.tensor(COUNTS * 0 + 7), p["probs"]), {"probs": PROBS * 0.9},
                 {"probs": SCALE / 2.5}, COUNTS, "log_prob entropy mean mode variance kl"),
}


def test_families_match_pytorch(torch):
    (ours, our_info), (theirs, their_info) = observe(symgrad, FAMILIES), observe(torch, FAMILIES)
    assert our_info == their_info
    assert_matches(ours, theirs, loose=("Gamma", "Chi2"))


def test_host_kernel_draws_are_pytorchs_bit_for_bit(torch):
    """The host kernels (gamma over concentrations from 1e-3 to 4e2 and zeros, Cauchy, Poisson below
    and above rate 10, binomial by inversion and by BTRS, Dirichlet rows of 4) in both dtypes, and
    the generator's state after them; Gamma's sample at rate 1 is the draws themselves, Poisson's and
    Binomial's samples are theirs."""
    rng = np.random.default_rng(1)
    alphas = np.exp(rng.uniform(-7, 6, 300))
    alphas[::37] = 0
    rates, counts, probs = rng.uniform(0, 25, 100), np.floor(rng.uniform(0, 120, 150)), rng.uniform(0, 1, 150)
    probs[::40], probs[1::40], counts[2::40] = 0, 1, 0
    rows = np.exp(rng.uniform(-3, 3, (20, 4)))
    for dtype in (np.float32, np.float64):
        torch_dtype, symgrad_dtype = getattr(torch, dtype.__name__), getattr(symgrad, dtype.__name__)
        a, r, n, p, c = (v.astype(dtype) for v in (alphas, rates, counts, probs, rows))
        torch.manual_seed(11)
        expected = [torch._standard_gamma(torch.tensor(a)).numpy(), torch.empty(5, dtype=torch_dtype).cauchy_().numpy(),
                    torch.poisson(torch.tensor(r)).numpy(), torch.binomial(torch.tensor(n), torch.tensor(p)).numpy(),
                    torch._sample_dirichlet(torch.tensor(c)).numpy(), torch.rand(3).numpy()]
        symgrad.manual_seed(11)
        got = [host_kernels.standard_gamma(a), host_kernels.cauchy((5,), symgrad_dtype), host_kernels.poisson(r),
               host_kernels.binomial(n, p), host_kernels.dirichlet(c), symgrad.rand(3).numpy()]
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
    seen = []
    for T in (symgrad, torch):
        T.manual_seed(2)
        samples = (D(T).Gamma(T.tensor(CONC), 1.0).sample((2,)), D(T).Poisson(T.tensor(CONC) * 9).sample(),
                   D(T).Binomial(10, T.tensor(PROBS)).sample((2,)))
        seen.append([s.numpy() for s in samples])
    for ours, theirs in zip(*seen):
        np.testing.assert_array_equal(ours, theirs)


def test_class_hierarchy_matches_pytorch(torch):
    """Every class symgrad shares with torch.distributions derives from the same ones of them."""
    shared = [n for n in symgrad.distributions.__all__ if isinstance(getattr(torch.distributions, n, None), type)]
    for name in shared:
        ours, theirs = getattr(symgrad.distributions, name), getattr(torch.distributions, name)
        assert [b.__name__ for b in ours.__mro__ if b.__name__ in shared] == \
               [b.__name__ for b in theirs.__mro__ if b.__name__ in shared], name


ERRORS = {
    "negative concentration": lambda T: D(T).Gamma(T.tensor([1.0, -1.0]), 1.0),
    "Gamma value below 0": lambda T: D(T).Gamma(2.0, 1.0).log_prob(T.tensor([-1.0])),
    "Geometric probs 0": lambda T: D(T).Geometric(T.tensor([0.0, 0.5])),
    "Geometric non-integer": lambda T: D(T).Geometric(0.5).log_prob(T.tensor([1.5])),
    "LogNormal scale": lambda T: D(T).LogNormal(0.0, T.tensor([-1.0])),
    "HalfNormal value": lambda T: D(T).HalfNormal(1.0).log_prob(T.tensor([-1.0])),
    "transforms not a list": lambda T: D(T).TransformedDistribution(D(T).Normal(0.0, 1.0), (1, 2)),
    "not transforms": lambda T: D(T).TransformedDistribution(D(T).Normal(0.0, 1.0), [1]),
    "base too small": lambda T: D(T).TransformedDistribution(D(T).Normal(0.0, 1.0), D(T).StickBreakingTransform()),
    "no bijection": lambda T: D(T).biject_to(D(T).constraints.boolean),
    "cache size": lambda T: D(T).ExpTransform(cache_size=2),
    "KL across exponential families": lambda T: D(T).kl._kl_expfamily_expfamily(D(T).Normal(0.0, 1.0),
                                                                                 D(T).Exponential(1.0)),
    "KL of differently transformed": lambda T: D(T).kl_divergence(D(T).LogNormal(0.0, 1.0), D(T).HalfNormal(1.0)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_pytorch(torch, name):
    raised = []
    for T in (symgrad, torch):
        with pytest.raises(Exception) as error:
            ERRORS[name](T)
        raised.append((type(error.value).__name__, str(error.value)))
    assert raised[0] == raised[1]


def test_cached_transform_returns_its_input(torch):
    """With ``cache_size=1`` the inverse of the last output is the very input tensor, as in PyTorch."""
    for T in (symgrad, torch):
        transform = D(T).SigmoidTransform().with_cache()
        x = T.tensor([40.0, -3.0])
        assert transform.inv(transform(x)) is x and transform.with_cache(1) is transform
        assert D(T).ExpTransform() == D(T).ExpTransform() and D(T).ExpTransform() != D(T).TanhTransform()
        assert math.isclose(D(T).AffineTransform(0.0, -2.0).sign, -1)
