"""torch.multinomial and Tensor.multinomial draw PyTorch's numbers after the same seed: the
exponential trick without replacement (or for one sample), the running-sum search with it, for
1-d and 2-d weights, float32 and float64, and leave the generator where PyTorch leaves it."""
import numpy as np
import pytest

import symgrad


def _weights(seed: int, shape: tuple, dtype) -> np.ndarray:
    weights = np.random.default_rng(seed).random(shape).astype(dtype)
    if seed % 3 == 0:
        weights[..., 0] = 0  # a category never drawn
    return weights


@pytest.mark.parametrize("shape", [(5,), (3, 7), (1, 4), (4, 300)])
@pytest.mark.parametrize("replacement, n", [(True, 1), (False, 1), (True, 2), (True, 700), (False, 3), (False, 4)])
def test_multinomial_draws_pytorchs_numbers(torch, shape, replacement, n):
    for seed in range(6):
        for dtype in (np.float32, np.float64):
            weights = _weights(seed, shape, dtype)
            if not replacement and n > shape[-1]:
                continue
            torch.manual_seed(seed)
            symgrad.manual_seed(seed)
            theirs = torch.multinomial(torch.from_numpy(weights), n, replacement)
            ours = symgrad.multinomial(symgrad.tensor(weights), n, replacement)
            assert str(ours.dtype) == str(theirs.dtype) and tuple(ours.shape) == tuple(theirs.shape)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=f"{seed} {dtype}")
            np.testing.assert_array_equal(symgrad.rand(3).numpy(), torch.rand(3).numpy())  # the generator after


def test_method_generator_and_unnormalised_weights(torch):
    weights = [[1.0, 3.0, 0.0, 6.0], [10.0, 10.0, 10.0, 10.0]]
    seen = {}
    for T in (symgrad, torch):
        T.manual_seed(3)
        seen[T] = (T.tensor(weights).multinomial(2).tolist(),
                   T.tensor(weights[0]).multinomial(5, replacement=True).tolist(),
                   T.multinomial(T.tensor(weights, dtype=T.float64), num_samples=3, replacement=True,
                                 generator=T.Generator().manual_seed(11)).tolist(),
                   T.multinomial(T.tensor([1.0, 0.0]), 2).tolist(),  # the one zero weight comes last
                   T.multinomial(T.ones(3, requires_grad=True), 2).requires_grad,
                   tuple(T.multinomial(T.ones(0, 3), 2).shape), tuple(T.multinomial(T.ones(0, 0), 1, True).shape),
                   T.rand(2).tolist())
    assert seen[symgrad] == seen[torch]


ERRORS = {
    "integer weights": lambda T: T.multinomial(T.tensor([1, 2]), 1),
    "3-d": lambda T: T.multinomial(T.ones(2, 2, 2), 1),
    "0-d": lambda T: T.multinomial(T.ones(()), 1),
    "no samples": lambda T: T.multinomial(T.ones(3), 0),
    "negative samples": lambda T: T.multinomial(T.ones(3), -1),
    "float samples": lambda T: T.multinomial(T.ones(3), 2.0),
    "bool samples": lambda T: T.multinomial(T.ones(3), True),
    "too many": lambda T: T.multinomial(T.ones(3), 4),
    "no categories": lambda T: T.multinomial(T.ones(3, 0), 2),
    "no categories, replacement": lambda T: T.multinomial(T.ones(3, 0), 2, True),
    "empty 1-d, replacement": lambda T: T.multinomial(T.ones(0), 2, True),
    "negative weight": lambda T: T.multinomial(T.tensor([1.0, -1.0]), 1),
    "inf weight": lambda T: T.multinomial(T.tensor([1.0, float("inf")]), 1),
    "nan weight": lambda T: T.multinomial(T.tensor([1.0, float("nan")]), 2),
    "zero row": lambda T: T.multinomial(T.zeros(2, 3), 1),
    "negative weight, replacement": lambda T: T.multinomial(T.tensor([1.0, -1.0]), 2, True),
    "inf weight, replacement": lambda T: T.multinomial(T.tensor([1.0, float("inf")]), 2, True),
    "nan weight, replacement": lambda T: T.multinomial(T.tensor([1.0, float("nan")]), 2, True),
    "zero weights, replacement": lambda T: T.multinomial(T.zeros(3), 2, True),
    "second row bad, replacement": lambda T: T.multinomial(T.tensor([[1.0, 1.0], [1.0, -1.0]]), 2, True),
}


def test_multinomial_errors_and_the_generator_after_them(torch):
    """PyTorch's errors; with replacement a bad row raises after the rows before it drew, so the
    generator has moved as PyTorch's has."""
    seen = {}
    for T in (symgrad, torch):
        T.manual_seed(0)
        outcomes = []
        for name, call in ERRORS.items():
            with pytest.raises((RuntimeError, TypeError)) as error:
                call(T)
            outcomes.append((name, error.type.__name__, str(error.value).split("\n")[0].split(" (position")[0]))
        seen[T] = outcomes, T.rand(4).tolist()
    assert seen[symgrad] == seen[torch]


def test_zero_weights_drawn_without_replacement_are_refused():
    """Drawing more categories than have weight orders the rest as PyTorch's std::nth_element leaves
    ties, which symgrad does not reproduce: an error, not other numbers."""
    with pytest.raises(NotImplementedError, match="positive probability"):
        symgrad.multinomial(symgrad.tensor([0.0, 1.0, 0.0, 0.0]), 3)
