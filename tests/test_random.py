"""Seeded randomness is PyTorch's, bit for bit: the same seed gives the same arrays, call after
call, for every size (PyTorch's normal draws differ below and above 16 elements), dtype,
generator and distribution; the generator's state bytes are PyTorch's own."""
import time

import numpy as np
import pytest

import symgrad
from symgrad import random


SEEDS = [0, 1, 42, 2**40 + 7]
SIZES = [0, 1, 5, 15, 16, 17, 100, 10_000]
FLOATS = ["float32", "float64"]


def same(ours, theirs) -> None:
    """Equal arrays, bit for bit, of the same dtype."""
    theirs = theirs.numpy()
    ours = np.asarray(ours)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert np.array_equal(ours.reshape(-1).view(np.uint8), theirs.reshape(-1).view(np.uint8)), \
        f"{np.count_nonzero(ours != theirs)} of {ours.size} differ; first at {np.flatnonzero(ours != theirs)[:5]}"


def seeded(torch, seed, call):
    """``call(T)`` after ``T.manual_seed(seed)`` on both libraries."""
    symgrad.manual_seed(seed)
    torch.manual_seed(seed)
    return call(symgrad), call(torch)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["rand", "randn"])
def test_rand_and_randn(torch, seed, n, dtype, name):
    ours, theirs = seeded(torch, seed, lambda T: getattr(T, name)(n, dtype=getattr(T, dtype)))
    same(ours, theirs)


@pytest.mark.parametrize("shape", [(1,), (3, 7), (2, 3, 4), (4, 16)])
def test_shapes_fill_in_pytorchs_order(torch, shape):
    for name in ("rand", "randn"):
        ours, theirs = seeded(torch, 3, lambda T: getattr(T, name)(*shape))
        same(ours, theirs)
        ours, theirs = seeded(torch, 3, lambda T: getattr(T, name)(size=shape))
        same(ours, theirs)
    ours, theirs = seeded(torch, 3, lambda T: T.randn(()))  # a 0-d tensor
    same(ours, theirs)


def _filled(fill):
    """A (5, 7) tensor whose transpose ``fill`` wrote (in memory order, as PyTorch's kernels write)."""
    def call(T):
        y = T.zeros(5, 7, dtype=T.float64)
        fill(y.t())
        return y
    return call


NOT_IN_ORDER = {  # a tensor laid out otherwise: PyTorch draws in memory order (was: element order)
    "rand_like of a transpose": lambda T: T.rand_like(T.zeros(3, 4).t()),
    "randn_like of a permute (24 values: the one-at-a-time normal)": lambda T: T.randn_like(
        T.zeros(2, 3, 4).permute(1, 2, 0)),
    "randint_like of a transpose": lambda T: T.randint_like(T.zeros(5, 7).t(), 0, 9),
    "dropout of a transpose": lambda T: T.nn.functional.dropout(T.ones(5, 7).t(), 0.3),
    "randn_like of a permuted slice (not dense: its layout still kept)": lambda T: T.randn_like(
        T.zeros(2, 5, 7).permute(2, 0, 1)[:, 1]),
    "alpha_dropout of a transpose": lambda T: T.nn.functional.alpha_dropout(T.ones(5, 7).t(), 0.3, True),
    "dropout of an expand (a zero stride: in order)": lambda T: T.nn.functional.dropout(T.ones(1, 7).expand(5, 7), 0.3),
    "uniform_": _filled(lambda v: v.uniform_()),
    "normal_ (35 values: the one-at-a-time normal)": _filled(lambda v: v.normal_()),
    "exponential_": _filled(lambda v: v.exponential_()),
    "bernoulli_": _filled(lambda v: v.bernoulli_(0.3)),
    "random_": _filled(lambda v: v.random_(0, 10)),
    "uniform_ of a permuted slice (not dense)": lambda T: _uniform_into_a_permuted_slice(T),
}


def _uniform_into_a_permuted_slice(T):
    y = T.zeros(2, 5, 7)
    y.permute(2, 0, 1)[:, 1].uniform_()
    return y


@pytest.mark.parametrize("name", list(NOT_IN_ORDER))
def test_a_tensor_not_laid_out_in_order_is_filled_in_memory_order(torch, name):
    ours, theirs = seeded(torch, 1, NOT_IN_ORDER[name])
    same(ours, theirs)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mean, std", [(0.7, 0.3), (-2.5, 3.1), (1e3, 1e-3)])
def test_normal_with_mean_and_std(torch, n, dtype, mean, std):
    ours, theirs = seeded(torch, 5, lambda T: T.normal(mean, std, (n,), dtype=getattr(T, dtype)))
    same(ours, theirs)
    ours, theirs = seeded(torch, 6, lambda T: T.zeros(n, dtype=getattr(T, dtype)).normal_(mean, std))
    same(ours, theirs)


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_with_tensor_mean_and_std(torch, dtype):
    def call(T):
        mean = T.tensor([[0.5], [-1.0], [2.0]], dtype=getattr(T, dtype))
        std = T.tensor([0.1, 1.0, 3.0, 0.25] * 5, dtype=getattr(T, dtype))
        return T.normal(mean, std), T.normal(mean, 0.5), T.normal(1.5, std)

    for ours, theirs in zip(*seeded(torch, 8, call)):
        same(ours, theirs)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("low, high", [(0.0, 1.0), (-0.37, 1.91), (-1e-3, 1e-3)])
def test_uniform_(torch, n, dtype, low, high):
    ours, theirs = seeded(torch, 9, lambda T: T.zeros(n, dtype=getattr(T, dtype)).uniform_(low, high))
    same(ours, theirs)


@pytest.mark.parametrize("low, high", [(-0.37, 1.91), (-0.04, 0.04), (1e-30, 1e5), (-7e-20, 3.0), (-1e6, 1e-6),
                                       (123456.7, 123456.9), (-0.03571428571428571, 0.03571428571428571),
                                       (0.0, 5.0), (-0.25, 0.75), (-3e-30, 3e-30), (-1e-33, 1e-33), (-1e38, 1e38),
                                       (2.0, 3.0)])
def test_float32_uniform_without_the_fused_multiply_add_emulation_rounds_as_it_does(low, high):
    """Bounds on a lattice (nn.init's symmetric ones) are drawn in float32, others whose
    multiply-add is exact in float64 take one rounding, the rest the emulated FMA: all give what
    the emulation gives (PyTorch's, tested above)."""
    draws = [random.uniform(random.Generator().manual_seed(4), 50_000, symgrad.float32, low, high)]
    low, high = np.float32(low), np.float32(high)
    unit = random._unit(random.Generator().manual_seed(4), 50_000, symgrad.float32)
    draws.append(random.fma32(unit, high - low, low))
    assert np.array_equal(draws[0].view(np.int32), draws[1].view(np.int32))


def test_nn_init_bounds_are_drawn_on_a_lattice():
    for fan_in in (1, 3, 10, 784, 512, 4096):
        bound = np.float32(1 / np.sqrt(fan_in))
        assert random._lattice(bound - -bound, -bound) is not None


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("low, high", [(0, 10), (-5, 3), (0, 2**31), (7, 2**40), (-2**50, 2**50)])
def test_randint(torch, seed, n, low, high):
    ours, theirs = seeded(torch, seed, lambda T: T.randint(low, high, (n,)))
    same(ours, theirs)


def test_randint_spellings_and_dtypes(torch):
    for call in (lambda T: T.randint(6, (3, 4)), lambda T: T.randint(2, 9, size=(5,)),
                 lambda T: T.randint(low=-3, high=3, size=(2, 2)), lambda T: T.randint(10, (20,), dtype=T.float32),
                 lambda T: T.randint(10, (20,), dtype=T.float64), lambda T: T.randint(10, (20,), dtype=T.int32),
                 lambda T: T.randint(-2**23, 2**23, (20,), dtype=T.float32),
                 lambda T: T.randint_like(T.zeros(3, 5), 4), lambda T: T.randint_like(T.zeros(7), 2, 8)):
        ours, theirs = seeded(torch, 11, call)
        same(ours, theirs)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 16, 17, 1000])
def test_randperm(torch, n):
    ours, theirs = seeded(torch, 12, lambda T: (T.randperm(n), T.randperm(n, dtype=T.float32), T.rand(3)))
    for a, b in zip(ours, theirs):
        same(a, b)


@pytest.mark.parametrize("n", SIZES)
def test_bernoulli(torch, n):
    def call(T):
        p32 = T.linspace(0, 1, n)
        return (T.bernoulli(p32), T.bernoulli(p32.double()), T.bernoulli(T.zeros(n), 0.3),
                T.bernoulli(T.zeros(n, dtype=T.float64), 0.8))

    for ours, theirs in zip(*seeded(torch, 13, call)):
        same(ours, theirs)


def test_in_place_bernoulli_random_and_exponential(torch):
    def call(T):
        def fill(t, name, *args):
            return getattr(t, name)(*args)
        return (fill(T.zeros(6, 5), "bernoulli_", 0.25), fill(T.zeros(20, dtype=T.int64), "bernoulli_", 0.5),
                fill(T.zeros(4, 8), "bernoulli_", T.rand(4, 8)), fill(T.zeros(3, dtype=T.bool), "bernoulli_", 0.5),
                fill(T.zeros(20, dtype=T.int64), "random_"), fill(T.zeros(20, dtype=T.int32), "random_"),
                fill(T.zeros(20), "random_"), fill(T.zeros(20, dtype=T.float64), "random_"),
                fill(T.zeros(20, dtype=T.int64), "random_", 7), fill(T.zeros(20, dtype=T.int64), "random_", -4, 9),
                fill(T.zeros(30), "exponential_"), fill(T.zeros(30, dtype=T.float64), "exponential_", 2.5))

    for ours, theirs in zip(*seeded(torch, 14, call)):
        same(ours, theirs)


def test_like_functions_follow_the_input(torch):
    def call(T):
        x, y, scalar = T.zeros(4, 5, dtype=T.float64), T.zeros(20), T.tensor(2.0)
        return (T.rand_like(x), T.randn_like(x), T.randn_like(y), T.rand_like(y, dtype=T.float64),
                T.randn_like(scalar), T.rand_like(scalar), T.randint_like(scalar, 9))

    for ours, theirs in zip(*seeded(torch, 15, call)):
        same(ours, theirs)


def test_interleaved_calls_stay_in_step(torch):
    """Draws are consumed in PyTorch's order: the cached second normal of a small randn is the
    first value of the next small one, large draws in between do not touch it."""
    def call(T):
        return [T.randn(3), T.rand(2), T.randn(1), T.randn(20), T.randn(2, dtype=T.float64),
                T.randint(0, 5, (7,)), T.randn(5), T.rand(33, dtype=T.float64), T.randperm(9),
                T.randn(17, dtype=T.float64), T.randn(1), T.normal(2.0, 0.5, (3,)), T.rand(1)]

    for seed in SEEDS:
        for ours, theirs in zip(*seeded(torch, seed, call)):
            same(ours, theirs)


def test_explicit_generators_are_independent(torch):
    def call(T):
        g, h = T.Generator().manual_seed(1), T.Generator().manual_seed(2)
        return [T.randn(5, generator=g), T.randn(5), T.rand(17, generator=h), T.randn(3, generator=g),
                T.randint(0, 9, (4,), generator=h), T.randperm(6, generator=g), T.rand(2)]

    for ours, theirs in zip(*seeded(torch, 16, call)):
        same(ours, theirs)


def test_a_new_generator_has_pytorchs_default_seed(torch):
    ours, theirs = symgrad.Generator(), torch.Generator()
    assert ours.initial_seed() == theirs.initial_seed() == random.DEFAULT_SEED
    same(symgrad.rand(5, generator=ours), torch.rand(5, generator=theirs))
    assert ours.manual_seed(3) is ours and str(ours.device) == "cpu"


def test_rng_state_is_pytorchs_bytes(torch):
    for draws in (lambda T: None, lambda T: T.randn(3), lambda T: T.rand(700), lambda T: T.randn(2, dtype=T.float64)):
        symgrad.manual_seed(21), torch.manual_seed(21)
        draws(symgrad), draws(torch)
        same(np.asarray(random.get_rng_state()).astype(np.uint8), torch.get_rng_state())


def test_set_rng_state_replays(torch):
    symgrad.manual_seed(22)
    symgrad.randn(3)  # leaves a cached normal
    state = random.get_rng_state()
    first = symgrad.randn(5).numpy()
    random.set_rng_state(state)
    assert np.array_equal(symgrad.randn(5).numpy(), first)

    torch.manual_seed(23)
    torch.rand(5)
    random.set_rng_state(torch.get_rng_state().numpy())  # PyTorch's own state
    same(symgrad.randn(40), torch.randn(40))
    with pytest.raises(RuntimeError, match="size"):
        random.set_rng_state(np.zeros(10, dtype=np.uint8))


def test_seeds(torch):
    assert symgrad.manual_seed(-1).initial_seed() == torch.manual_seed(-1).initial_seed() == 2**64 - 1
    for T, error in ((symgrad, ValueError), (torch, ValueError)):
        with pytest.raises(error):
            T.manual_seed(2**64)
    s = random.seed()
    assert random.initial_seed() == s and 0 <= s < 2**64
    values = symgrad.rand(4).numpy()
    symgrad.manual_seed(s)
    assert np.array_equal(symgrad.rand(4).numpy(), values)


def test_arguments_as_pytorch_has_them(torch):
    symgrad.manual_seed(0)
    x = symgrad.randn(2, 3, dtype=symgrad.float64, requires_grad=True, device="cpu")
    assert x.requires_grad and x.is_leaf and x.dtype is symgrad.float64 and tuple(x.shape) == (2, 3)
    assert symgrad.randint(3, (2,)).dtype is symgrad.int64 and symgrad.randperm(3).dtype is symgrad.int64
    assert symgrad.rand(2, device=symgrad.device("cpu")).dtype is symgrad.float32


@pytest.mark.parametrize("call", [
    lambda T: T.rand(3, dtype=T.int64), lambda T: T.randn(3, dtype=T.int64),
    lambda T: T.randint(3, 3, (2,)), lambda T: T.normal(0.0, -1.0, (3,)), lambda T: T.randperm(-1),
    lambda T: T.bernoulli(T.zeros(2), 1.5), lambda T: T.bernoulli(T.tensor([1.5])),
    lambda T: T.randint(0, 3, (2,), requires_grad=True),
], ids=["rand int", "randn int", "randint empty range", "negative std", "randperm -1", "bernoulli p",
        "bernoulli tensor p", "randint requires_grad"])
def test_errors_are_pytorchs(torch, call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)):
        call(symgrad)


def test_in_place_fill_refuses_a_leaf_that_requires_grad():
    w = symgrad.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.normal_()
    with symgrad.no_grad():
        w.uniform_(-1.0, 1.0)
    assert w.requires_grad and np.all(np.abs(w.detach().numpy()) <= 1) and np.any(w.detach().numpy() != 0)


def test_a_million_draws_take_well_under_a_second():
    """Generous bounds for a loaded 2-core machine: the draws are NumPy-vectorised."""
    for name, dtype, bound in (("rand", symgrad.float32, 1.0), ("randn", symgrad.float32, 2.0),
                               ("randn", symgrad.float64, 2.0)):
        start = time.perf_counter()
        getattr(symgrad, name)(1_000_000, dtype=dtype).numpy()
        assert time.perf_counter() - start < bound, name
