"""The 1-D and 3-D pools, adaptive max pooling and max_pool*_with_indices, with their modules,
against the installed PyTorch on the same arrays: values, indices, grad_fn names, input gradients
(ties go to the first entry, NaN to the last, as PyTorch's), reprs and errors.  The 2-D and 3-D
window pools are also in the registry's generic tests (test_ops.py)."""
import math

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch
from test_nn_functional import check, normal


def F(T):
    return T.nn.functional


def _ties(*shape):
    """Small integers: many equal entries in a window."""
    return np.random.default_rng(8).integers(-2, 3, size=shape).astype(np.float32)


def _nans(*shape):
    x = normal(*shape)
    flat = x.reshape(-1)
    flat[[1, 4, 5]] = math.nan
    flat[[2, 7]] = math.inf
    flat[[3, 9]] = -math.inf
    return x


CASES = {
    "max_pool1d": (lambda T, x: F(T).max_pool1d(x, 3, 2, 1), [normal(2, 3, 8)]),
    "max_pool1d indices ceil dilation": (lambda T, x: F(T).max_pool1d(x, 2, 2, 1, 2, True, return_indices=True),
                                         [normal(2, 3, 8)]),
    "max_pool1d unbatched ties": (lambda T, x: T.max_pool1d(x, 3, 1), [_ties(2, 9)]),
    "max_pool1d nan": (lambda T, x: F(T).max_pool1d(x, 3, 2, return_indices=True), [_nans(1, 2, 9)]),
    "max_pool1d_with_indices": (lambda T, x: F(T).max_pool1d_with_indices(x, [3], [2], [1]), [normal(1, 2, 6)]),
    "avg_pool1d": (lambda T, x: F(T).avg_pool1d(x, 3), [normal(2, 3, 8)]),
    "avg_pool1d padding not counted ceil": (lambda T, x: T.avg_pool1d(x, 3, 2, 1, True, False), [normal(2, 3, 8)]),
    "adaptive_avg_pool1d": (lambda T, x: F(T).adaptive_avg_pool1d(x, 3), [normal(2, 3, 7)]),
    "adaptive_avg_pool1d to one": (lambda T, x: T.adaptive_avg_pool1d(x, [1]), [normal(3, 5)]),
    "adaptive_max_pool1d": (lambda T, x: F(T).adaptive_max_pool1d(x, 3, return_indices=True), [normal(2, 3, 7)]),
    "adaptive_max_pool1d larger": (lambda T, x: F(T).adaptive_max_pool1d(x, 5), [normal(1, 2, 3)]),
    "adaptive_max_pool2d": (lambda T, x: F(T).adaptive_max_pool2d(x, (3, 2), return_indices=True),
                            [normal(2, 3, 7, 5)]),
    "adaptive_max_pool2d keeps a size": (lambda T, x: F(T).adaptive_max_pool2d(x, (2, None)), [normal(1, 2, 5, 4)]),
    "adaptive_max_pool2d unbatched": (lambda T, x: F(T).adaptive_max_pool2d(x, 4, True), [normal(2, 6, 5)]),
    "adaptive_max_pool2d ties": (lambda T, x: F(T).adaptive_max_pool2d(x, (3, 2), return_indices=True),
                                 [_ties(2, 3, 7, 5)]),
    "adaptive_max_pool2d nan and inf": (lambda T, x: F(T).adaptive_max_pool2d(x, (2, 3), return_indices=True),
                                        [_nans(1, 2, 5, 4)]),
    "adaptive_max_pool3d": (lambda T, x: F(T).adaptive_max_pool3d(x, (2, 3, 2), return_indices=True),
                            [normal(1, 2, 3, 5, 4)]),
    "adaptive_avg_pool3d": (lambda T, x: F(T).adaptive_avg_pool3d(x, (2, None, 3)), [normal(1, 2, 3, 5, 4)]),
    "adaptive_avg_pool3d to one": (lambda T, x: F(T).adaptive_avg_pool3d(x, 1), [normal(2, 3, 2, 4)]),
    "max_pool3d": (lambda T, x: F(T).max_pool3d(x, 2), [normal(1, 2, 4, 5, 6)]),
    "max_pool3d indices padding ceil": (lambda T, x: T.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), (1, 1, 2), True),
                                        [normal(1, 2, 4, 5, 6)]),
    "max_pool3d unbatched ties": (lambda T, x: F(T).max_pool3d(x, 2, 1, return_indices=True), [_ties(2, 3, 3, 4)]),
    "avg_pool3d": (lambda T, x: F(T).avg_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), True, False),
                   [normal(1, 2, 4, 5, 6)]),
    "avg_pool3d divisor": (lambda T, x: F(T).avg_pool3d(x, 2, divisor_override=3), [normal(2, 4, 5, 6)]),
    "max_pool2d_with_indices": (lambda T, x: F(T).max_pool2d_with_indices(x, 3, 2, 1), [normal(1, 2, 5, 6)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pool(torch, name):
    fn, arrays = CASES[name]
    check(torch, fn, arrays)


# ------------------------------------------------------------------------------- modules

MODULES = {
    "MaxPool1d": (lambda T: T.nn.MaxPool1d(3), (2, 3, 8)),
    "MaxPool1d all arguments": (lambda T: T.nn.MaxPool1d(3, 2, 1, 2, True, True), (2, 3, 8)),
    "AvgPool1d": (lambda T: T.nn.AvgPool1d(3, 2, 1, True, False), (2, 3, 8)),
    "AdaptiveAvgPool1d": (lambda T: T.nn.AdaptiveAvgPool1d(3), (2, 3, 8)),
    "AdaptiveMaxPool1d": (lambda T: T.nn.AdaptiveMaxPool1d(3, return_indices=True), (2, 3, 8)),
    "AdaptiveMaxPool2d": (lambda T: T.nn.AdaptiveMaxPool2d((2, None)), (1, 2, 5, 4)),
    "AdaptiveMaxPool3d": (lambda T: T.nn.AdaptiveMaxPool3d(2, True), (1, 2, 3, 5, 4)),
    "AdaptiveAvgPool3d": (lambda T: T.nn.AdaptiveAvgPool3d((1, 2, 2)), (1, 2, 3, 5, 4)),
    "MaxPool3d": (lambda T: T.nn.MaxPool3d(2, return_indices=True), (1, 2, 4, 5, 6)),
    "AvgPool3d": (lambda T: T.nn.AvgPool3d(2, ceil_mode=True), (1, 2, 4, 5, 6)),
    "MaxPool2d": (lambda T: T.nn.MaxPool2d(2, return_indices=True), (1, 2, 4, 5)),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_pool_module(torch, name):
    make, shape = MODULES[name]
    assert repr(make(symgrad)) == repr(make(torch))
    check(torch, lambda T, x: make(T)(x), [normal(*shape)])


# -------------------------------------------------------------------------------- errors

ERRORS = {
    "max_pool1d rank": lambda T: F(T).max_pool1d(T.ones(2, 2, 2, 7), 2),
    "max_pool1d kernel of two": lambda T: F(T).max_pool1d(T.ones(1, 2, 7), (2, 3)),
    "max_pool1d kernel zero": lambda T: F(T).max_pool1d(T.ones(1, 2, 7), 0),
    "max_pool1d stride zero": lambda T: F(T).max_pool1d(T.ones(1, 2, 7), 3, stride=0),
    "max_pool1d padding": lambda T: F(T).max_pool1d(T.ones(1, 2, 7), 3, padding=2),
    "max_pool1d dilation": lambda T: F(T).max_pool1d(T.ones(1, 2, 7), 2, dilation=0),
    "max_pool1d too small": lambda T: F(T).max_pool1d(T.ones(1, 2, 7), 9),
    "max_pool1d integers": lambda T: F(T).max_pool1d(T.ones(1, 2, 7, dtype=T.int64), 2),
    "avg_pool1d rank": lambda T: F(T).avg_pool1d(T.ones(2, 2, 2, 7), 2),
    "avg_pool1d kernel of two": lambda T: F(T).avg_pool1d(T.ones(1, 2, 7), (2, 3)),
    "avg_pool1d too small": lambda T: F(T).avg_pool1d(T.ones(1, 2, 7), 9),
    "avg_pool1d padding": lambda T: F(T).avg_pool1d(T.ones(1, 2, 7), 3, padding=2),
    "avg_pool1d stride zero": lambda T: F(T).avg_pool1d(T.ones(1, 2, 7), 3, stride=0),
    "adaptive_avg_pool1d rank": lambda T: F(T).adaptive_avg_pool1d(T.ones(2, 3, 4, 5), 2),
    "adaptive_avg_pool1d sizes": lambda T: F(T).adaptive_avg_pool1d(T.ones(1, 2, 7), (2, 3)),
    "adaptive_max_pool1d rank": lambda T: F(T).adaptive_max_pool1d(T.ones(2, 3, 4, 5), 2),
    "adaptive_max_pool1d sizes": lambda T: F(T).adaptive_max_pool1d(T.ones(1, 2, 7), (2, 3)),
    "adaptive_max_pool2d rank": lambda T: F(T).adaptive_max_pool2d(T.ones(2, 3), 2),
    "adaptive_max_pool2d empty": lambda T: F(T).adaptive_max_pool2d(T.ones(1, 2, 0, 3), 2),
    "adaptive_max_pool2d sizes": lambda T: F(T).adaptive_max_pool2d(T.ones(1, 2, 5, 6), (1, 2, 3)),
    "adaptive_max_pool2d integers": lambda T: F(T).adaptive_max_pool2d(T.ones(1, 2, 5, 6, dtype=T.int64), 2),
    "adaptive_max_pool3d rank": lambda T: F(T).adaptive_max_pool3d(T.ones(2, 3, 4), 2),
    "adaptive_avg_pool3d rank": lambda T: F(T).adaptive_avg_pool3d(T.ones(2, 3), 2),
    "max_pool3d rank": lambda T: F(T).max_pool3d(T.ones(2, 3, 3), 2),
    "max_pool3d too small": lambda T: F(T).max_pool3d(T.ones(1, 2, 4, 5, 6), 5),
    "max_pool3d padding": lambda T: F(T).max_pool3d(T.ones(1, 2, 4, 5, 6), 3, padding=2),
    "max_pool3d kernel of two": lambda T: F(T).max_pool3d(T.ones(1, 1, 3, 3, 3), (1, 2)),
    "max_pool3d kernel zero": lambda T: F(T).max_pool3d(T.ones(1, 1, 3, 3, 3), 0, stride=1),
    "max_pool3d negative stride": lambda T: F(T).max_pool3d(T.ones(1, 1, 3, 3, 3), 2, stride=-1),
    "max_pool3d dilation": lambda T: F(T).max_pool3d(T.ones(1, 2, 2, 2, 2), 2, dilation=0),
    "avg_pool3d smaller than the kernel": lambda T: F(T).avg_pool3d(T.ones(1, 2, 4, 5, 6), 5),
    "avg_pool3d divisor": lambda T: F(T).avg_pool3d(T.ones(1, 1, 3, 3, 3), 2, divisor_override=0),
    "max_pool2d kernel of three": lambda T: F(T).max_pool2d(T.ones(1, 2, 5, 5), (1, 2, 3)),
    "max_pool2d dilation": lambda T: F(T).max_pool2d(T.ones(1, 2, 5, 5), 2, dilation=0),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


def test_adaptive_max_pool_inside_a_compiled_gradient(torch):
    """value_and_grad traces the function with JAX: the window tables stay constants."""
    def loss(T, x):
        return (F(T).adaptive_max_pool2d(x, (2, 3)) ** 2).sum()
    compiled = symgrad.value_and_grad(lambda x: loss(symgrad, x))
    for seed in (0, 1):
        x = np.random.default_rng(seed).standard_normal((1, 2, 5, 4))
        value, grad = compiled(symgrad.tensor(x, requires_grad=True))
        theirs = torch.tensor(x, requires_grad=True)
        loss(torch, theirs).backward()
        np.testing.assert_array_equal(grad.detach().numpy(), theirs.grad.numpy())


INTEGER_POOLS = {  # PyTorch's CPU kernels: max pools of every integer type, average pools of int64 (truncating)
    "max_pool2d int64": (lambda T, x: F(T).max_pool2d(x, 2, 1, 1), "int64"),
    "max_pool2d int32 with indices": (lambda T, x: F(T).max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
                                      "int32"),
    "max_pool3d int64": (lambda T, x: F(T).max_pool3d(x.unsqueeze(2), 2, 1, 1), "int64"),
    "avg_pool2d int64": (lambda T, x: F(T).avg_pool2d(-x, 3, 1, 1), "int64"),
    "avg_pool2d int64 not counting padding": (lambda T, x: F(T).avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                                                           count_include_pad=False), "int64"),
    "avg_pool2d int64 divisor": (lambda T, x: F(T).avg_pool2d(-x, 2, divisor_override=3), "int64"),
    "avg_pool1d int64": (lambda T, x: F(T).avg_pool1d(x.flatten(2), 3, 2, 1), "int64"),
    "avg_pool3d int64": (lambda T, x: F(T).avg_pool3d(x.unsqueeze(0), 2), "int64"),
    "local_response_norm int64": (lambda T, x: F(T).local_response_norm(x, 2), "int64"),
}


@pytest.mark.parametrize("name", list(INTEGER_POOLS))
def test_pools_of_integers_are_pytorchs(torch, name):
    """Were refused (the float-only check of every pool)."""
    fn, dtype = INTEGER_POOLS[name]
    values = (np.arange(50).reshape(1, 2, 5, 5) * 7 % 11 - 5)
    ours, theirs = (fn(T, T.tensor(values, dtype=getattr(T, dtype))) for T in (symgrad, torch))
    for a, b in zip(*((r,) if not isinstance(r, tuple) else r for r in (ours, theirs))):
        assert str(a.dtype) == str(b.dtype)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-7)


INTEGER_POOL_ERRORS = {
    "avg_pool2d int32": lambda T: F(T).avg_pool2d(T.ones(1, 1, 4, 4, dtype=T.int32), 2),
    "avg_pool3d int32": lambda T: F(T).avg_pool3d(T.ones(1, 1, 2, 2, 2, dtype=T.int32), 2),
    "max_pool2d bool": lambda T: F(T).max_pool2d(T.ones(1, 1, 4, 4, dtype=T.bool), 2),
    "max_pool1d int64": lambda T: F(T).max_pool1d(T.ones(1, 1, 4, dtype=T.int64), 2),
}


@pytest.mark.parametrize("name", list(INTEGER_POOL_ERRORS))
def test_pools_refuse_the_integers_pytorch_refuses(torch, name):
    assert_raises_as_pytorch(INTEGER_POOL_ERRORS[name], torch, symgrad)
