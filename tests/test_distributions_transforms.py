"""symgrad.distributions' transforms (forward, inverse, log-Jacobian, regions, reprs), biject_to and
transform_to, TransformedDistribution, the generic exponential-family entropy and KL (Bregman
divergences of the log normalizer), and the KL divergences PyTorch registers across families,
against torch.distributions on the same inputs: values and gradients."""
import numpy as np

import symgrad

from distribution_parity import CONC, D, F32, LOC, PROBS, QUANTILES, SCALE, VALUE, assert_matches, leaves, run


def _exponential_family(T):
    """The generic entropy (Bregman) of four members and the generic KL of seven with another member
    of their family, with the gradients through both sides."""
    d = D(T)
    inputs = leaves(T, {"loc": LOC, "scale": SCALE, "probs": PROBS * 0.9, "c": CONC, "rate": SCALE[::-1]})
    loc, scale, probs, c, rate = inputs.values()
    pairs = [(d.Normal(loc, scale), d.Normal(scale, rate)), (d.Bernoulli(probs), d.Bernoulli(logits=loc)),
             (d.Exponential(rate), d.Exponential(scale)), (d.Gamma(c, rate), d.Gamma(scale, c)),
             (d.Beta(c, rate), d.Beta(scale, c)), (d.Dirichlet(c), d.Dirichlet(scale)), (d.Poisson(rate), d.Poisson(c))]
    outputs = {}
    for i, (p, q) in enumerate(pairs):
        if i < 4:  # (Beta, Dirichlet and Poisson define no mean carrier measure, in PyTorch either)
            outputs[f"entropy {i}"] = d.ExponentialFamily.entropy(p)
        outputs[f"kl {i}"] = d.kl._kl_expfamily_expfamily(p, q)
    return run(T, outputs, list(outputs), inputs)


def test_exponential_family_generic_entropy_and_kl_match_pytorch(torch):
    assert_matches(_exponential_family(symgrad), _exponential_family(torch), rtol=2e-5, atol=2e-5)


def _transforms(T):
    """Each transform forward, inverse and log-Jacobian, with reprs and regions; biject_to and
    transform_to of the constraints symgrad has; distributions pushed through transforms."""
    d, t, c = D(T), D(T).transforms, D(T).constraints
    inputs = leaves(T, {"x": VALUE - 1, "loc": LOC, "scale": SCALE, "exponent": np.array(2.5, F32)})
    x, loc, scale, exponent = inputs.values()
    cases = {"exp": (t.ExpTransform(), x), "power": (t.PowerTransform(exponent), x.exp()),
             "sigmoid": (t.SigmoidTransform(), x), "tanh": (t.TanhTransform(), x),
             "affine": (t.AffineTransform(loc, scale), x), "affine numbers": (t.AffineTransform(1.0, -2.0), x),
             "affine event": (t.AffineTransform(loc[0], scale[0], event_dim=1), x),
             "compose": (t.ComposeTransform([t.AffineTransform(loc, scale), t.ExpTransform()]), x),
             "inverse": (t.ExpTransform().inv, x.exp()), "stick breaking": (t.StickBreakingTransform(), x),
             "independent": (t.IndependentTransform(t.SigmoidTransform(), 1), x)}
    for constraint in (c.less_than(2.0), c.interval(-1.0, 3.0), c.simplex):
        cases[f"biject_to({constraint})"] = (d.biject_to(constraint), x)
    outputs, info = {}, []
    for constraint in (c.real, c.positive, c.greater_than(-1.5), c.unit_interval, c.half_open_interval(0.0, 2.0),
                       c.independent(c.positive, 1), c.real_vector):
        info.append((str(constraint), repr(d.biject_to(constraint)), repr(d.transform_to(constraint))))
    for name, (transform, value) in cases.items():
        y = transform(value)
        outputs[name] = y
        outputs[name + " inverse"] = transform.inv(y)
        outputs[name + " log-Jacobian"] = transform.log_abs_det_jacobian(value, y)
        info.append((name, repr(transform), str(transform.domain), str(transform.codomain), transform.bijective,
                     transform.inv.inv is transform))
    for name, transform in (("softmax", t.SoftmaxTransform()), ("abs", t.AbsTransform()),
                            ("transform_to(simplex)", d.transform_to(c.simplex))):
        outputs[name] = transform(x)
        outputs[name + " inverse"] = transform.inv(outputs[name])
        info.append((name, repr(transform), str(transform.domain), str(transform.codomain), transform.bijective))
    T.manual_seed(5)
    pushed = d.TransformedDistribution(d.Normal(loc, scale), [t.AffineTransform(1.0, -2.0), t.ExpTransform()])
    simplex = d.TransformedDistribution(d.Normal(loc, scale), t.StickBreakingTransform())
    outputs.update({"pushed rsample": pushed.rsample((2,)), "pushed log_prob": pushed.log_prob(x.exp()),
                    "pushed cdf": pushed.cdf(x.exp()), "pushed icdf": pushed.icdf(T.tensor(QUANTILES)),
                    "simplex rsample": simplex.rsample(), "simplex log_prob": simplex.log_prob(simplex.sample((2,))),
                    "expanded sample": d.LogNormal(loc[0], scale[0]).expand((2, 3)).sample()})
    info += [(repr(x), tuple(x.batch_shape), tuple(x.event_shape), str(x.support)) for x in (pushed, simplex)]
    return run(T, outputs, [k for k in outputs if "sample" not in k or "rsample" in k], inputs), info


def test_transforms_match_pytorch(torch):
    (ours, our_info), (theirs, their_info) = _transforms(symgrad), _transforms(torch)
    assert our_info == their_info
    assert_matches(ours, theirs)


KL_PAIRS = [("Normal", "Laplace"), ("Laplace", "Normal"), ("Normal", "Gumbel"), ("Gumbel", "Normal"),
            ("Exponential", "Gamma"), ("Exponential", "Gumbel"), ("Exponential", "Normal"), ("Gamma", "Exponential"),
            ("Gamma", "Gumbel"), ("Gamma", "Normal"), ("Uniform", "Exponential"), ("Uniform", "Gamma"),
            ("Uniform", "Gumbel"), ("Uniform", "Normal"), ("Normal", "Exponential"), ("Gumbel", "Uniform"),
            ("Laplace", "Gamma"), ("Exponential", "Uniform"), ("Gamma", "Uniform"), ("LogNormal", "LogNormal"),
            ("Beta", "Exponential"), ("Beta", "Gamma"), ("Beta", "Normal"), ("Beta", "Uniform"), ("Uniform", "Beta"),
            ("Bernoulli", "Poisson"), ("Poisson", "Bernoulli"), ("Normal", "Beta")]
INFINITE = {("Normal", "Exponential"), ("Gumbel", "Uniform"), ("Laplace", "Gamma"), ("Exponential", "Uniform"),
            ("Gamma", "Uniform"), ("Poisson", "Bernoulli"), ("Normal", "Beta")}  # (constant: no gradient)


def _cross_kl(T):
    d = D(T)
    inputs = leaves(T, {"a": LOC, "b": SCALE, "c": CONC, "e": VALUE})
    a, b, c, e = inputs.values()
    build = {"Normal": lambda: d.Normal(a, b), "Laplace": lambda: d.Laplace(e, c), "Gumbel": lambda: d.Gumbel(e, b),
             "Exponential": lambda: d.Exponential(b), "Gamma": lambda: d.Gamma(c, b),
             "Uniform": lambda: d.Uniform(a + 0.25, a + 0.25 + b),  # (no bound at 0: see the report on xlogy)
             "LogNormal": lambda: d.LogNormal(e, c),
             "Beta": lambda: d.Beta(c, b), "Bernoulli": lambda: d.Bernoulli(b / 2.5), "Poisson": lambda: d.Poisson(c)}
    outputs = {f"{p} {q}": d.kl_divergence(build[p](), build[q]()) for p, q in KL_PAIRS}
    return run(T, outputs, [f"{p} {q}" for p, q in KL_PAIRS if (p, q) not in INFINITE], inputs)


def test_kl_across_families_matches_pytorch(torch):
    assert_matches(_cross_kl(symgrad), _cross_kl(torch), rtol=1e-5, atol=1e-5)


