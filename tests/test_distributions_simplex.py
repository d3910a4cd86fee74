"""symgrad.distributions' Beta, Dirichlet, Multinomial, StudentT, LogisticNormal, RelaxedBernoulli and
RelaxedOneHotCategorical against torch.distributions on the same parameters: seeded draws, values
and gradients of log_prob, entropy, rsample (through the reparameterized Dirichlet and gamma
gradients), moments and same-family KL."""
import numpy as np

import symgrad

from distribution_parity import CONC, D, F32, LOC, PROBS, SCALE, SIMPLEX, VALUE, assert_matches, observe

# name: (build(T, params), params, q's params, value for log_prob, methods observed)
FAMILIES = {
    "Beta": (lambda T, p: D(T).Beta(p["c1"], p["c0"]), {"c1": CONC, "c0": SCALE}, {"c1": SCALE, "c0": CONC + 1},
             PROBS * 0.9, "log_prob rsample mean variance kl"),
    "Dirichlet": (lambda T, p: D(T).Dirichlet(p["c"]), {"c": CONC}, {"c": SCALE}, SIMPLEX,
                  "log_prob entropy rsample mean mode variance kl"),
    "Multinomial": (lambda T, p: D(T).Multinomial(5, logits=p["logits"]), {"logits": LOC}, {"logits": VALUE},
                    np.array([[1.0, 2.0, 2.0], [0.0, 5.0, 0.0]], F32), "log_prob entropy mean variance"),
    "StudentT": (lambda T, p: D(T).StudentT(p["df"], p["loc"], p["scale"]),
                 {"df": CONC * 3, "loc": LOC, "scale": SCALE}, {"df": SCALE, "loc": VALUE, "scale": SCALE}, VALUE,
                 "log_prob entropy rsample mean variance"),
    "RelaxedBernoulli": (lambda T, p: D(T).RelaxedBernoulli(p["t"], probs=p["probs"]),
                         {"t": np.array(0.7, F32), "probs": PROBS * 0.9}, {"t": np.array(0.5, F32), "probs": SCALE / 3},
                         PROBS * 0.9, "log_prob rsample"),
    "RelaxedOneHotCategorical": (lambda T, p: D(T).RelaxedOneHotCategorical(p["t"], logits=p["logits"]),
                                 {"t": np.array(0.7, F32), "logits": LOC}, {"t": np.array(0.5, F32), "logits": VALUE},
                                 SIMPLEX, "log_prob rsample"),
    "LogisticNormal": (lambda T, p: D(T).LogisticNormal(p["loc"], p["scale"]),
                       {"loc": LOC[:, :2], "scale": SCALE[:, :2]}, {"loc": VALUE[:, :2], "scale": SCALE[:, 1:]},
                       SIMPLEX, "log_prob rsample kl"),
}


def test_families_match_pytorch(torch):
    (ours, our_info), (theirs, their_info) = observe(symgrad, FAMILIES), observe(torch, FAMILIES)
    assert our_info == their_info
    assert_matches(ours, theirs, loose=("Beta", "Dirichlet", "StudentT", "Multinomial"))
