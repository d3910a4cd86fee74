"""Random graphs of registered ops, cross-checked: broadcasting shapes, reused intermediates,
detach and no_grad placed at random.  ``pytest --slow`` runs thousands of graphs."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import symgrad as torch
import symgrad.nn.functional as F

SHAPES = [(2, 3), (3,), (1, 3), (2, 1), ()]
UNARY = {
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "sin": torch.sin, "softplus": F.softplus, "neg": torch.neg,
    "exp_tanh": lambda x: torch.exp(torch.tanh(x)), "log1p_square": lambda x: torch.log(x * x + 1),
    "sqrt1p_square": lambda x: torch.sqrt(x * x + 1), "square": lambda x: x ** 2, "relu": F.relu,
    "sum_last": lambda x: x.sum(-1, keepdim=True) if x.ndim else x, "mean_all": lambda x: x.mean(),
    "log_softmax": lambda x: F.log_softmax(x, -1) if x.ndim else x,
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1), "maximum": torch.maximum, "scalar_mix": lambda a, b: 2.5 * a - b / 3,
}

step = st.tuples(
    st.sampled_from(sorted(UNARY) + sorted(BINARY)),  # op
    st.integers(0, 100), st.integers(0, 100),          # operand picks (modulo the pool)
    st.sampled_from(["", "", "", "detach", "no_grad"]),  # how the step is recorded
)
recipe = st.tuples(
    st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),  # leaf shapes
    st.lists(step, min_size=1, max_size=6),
    st.integers(0, 2**31 - 1),                                  # values
)


def build(shapes, steps):
    """The recipe as a torch-style function of its leaves."""

    def fn(*leaves):
        pool = list(leaves)
        for op, i, j, how in steps:
            a, b = pool[i % len(pool)], pool[j % len(pool)]
            if how == "detach":
                a = a.detach()
            if how == "no_grad":
                with torch.no_grad():
                    value = UNARY[op](a) if op in UNARY else BINARY[op](a, b)
            else:
                value = UNARY[op](a) if op in UNARY else BINARY[op](a, b)
            pool.append(value)
        return pool[-1].sum() + 0.5 * pool[len(pool) // 2].mean()

    return fn


@given(recipe)
def test_random_graphs_agree_with_finite_differences_and_jax(case):
    shapes, steps, seed = case
    rng = np.random.default_rng(seed)
    leaves = [rng.standard_normal(shape) * 0.8 for shape in shapes]
    blocked = any(how for *_, how in steps)
    against = ("jax",) if blocked else ("finite_differences", "jax")  # differences see through detach
    report = torch.crosscheck(build(shapes, steps), leaves, against=against, atol=1e-6, rtol=1e-5)
    assert report.ok, f"{shapes} {steps}\n{report}"
