"""Fractional max pooling (F.fractional_max_pool2d/3d, their ``_with_indices`` spellings,
nn.FractionalMaxPool2d/3d) and F.adaptive_max_pool*d_with_indices against PyTorch: seeded windows
(PyTorch's ``rand`` draw and its kernel's float32 starts), values, indices and gradients exactly,
a tie (the first largest) and a NaN (picked), unbatched inputs, and PyTorch's errors."""
import numpy as np
import pytest

import symgrad

X2 = np.random.default_rng(0).standard_normal((2, 3, 9, 8)).astype(np.float32)
X2[0, 0, 1, 1] = X2[0, 0, 1, 2] = 5.0  # a tie inside one window: the first is picked
X2[1, 2, 4, 4] = np.nan
X3 = np.random.default_rng(1).standard_normal((2, 2, 6, 7, 6)).astype(np.float32)

CASES = {
    "2d size": (2, dict(kernel_size=2, output_size=4)),
    "2d ratio": (2, dict(kernel_size=(2, 3), output_ratio=(0.5, 0.6))),
    "3d size": (3, dict(kernel_size=2, output_size=(3, 4, 3))),
    "3d ratio": (3, dict(kernel_size=(2, 3, 2), output_ratio=0.5)),
}


def pooled(T, n, options):
    T.manual_seed(7)
    x = T.tensor(X2 if n == 2 else X3, requires_grad=True)
    pool = getattr(T.nn.functional, f"fractional_max_pool{n}d")
    out, indices = pool(x, return_indices=True, **options)
    (out * T.arange(float(out.numel())).reshape(out.shape)).sum().backward()
    unbatched = pool(x[1].detach(), **options)
    given = getattr(T.nn.functional, f"fractional_max_pool{n}d_with_indices")(
        x.detach(), _random_samples=T.rand(2, x.shape[1], n), **options)
    return [out.detach().numpy(), indices.numpy(), x.grad.numpy(), unbatched.numpy(), *(t.numpy() for t in given),
            out.grad_fn.name(), str(indices.dtype)]


@pytest.mark.parametrize("case", list(CASES))
def test_windows_values_indices_and_gradients_are_pytorchs(torch, case):
    ours, theirs = (pooled(T, *CASES[case]) for T in (symgrad, torch))
    for a, b in zip(ours, theirs, strict=True):
        if isinstance(a, str):
            assert a == b
        else:
            np.testing.assert_array_equal(a, b)


def test_modules_match_pytorchs(torch):
    seen = []
    for T in (symgrad, torch):
        T.manual_seed(3)
        pool2 = T.nn.FractionalMaxPool2d(3, output_ratio=0.5, return_indices=True)
        pool3 = T.nn.FractionalMaxPool3d(2, output_size=2, _random_samples=T.full((2, 2, 3), 0.4))
        out, indices = pool2(T.tensor(X2))
        seen.append((repr(pool2), repr(pool3), list(pool3.state_dict()), list(pool2.state_dict()),
                     out.numpy().tolist(), indices.numpy().tolist(), pool3(T.tensor(X3)).numpy().tolist(),
                     pool2.kernel_size, pool2.output_ratio, pool3.output_size))
    np.testing.assert_equal(seen[0], seen[1])


def test_adaptive_max_pool_with_indices_spellings(torch):
    seen = []
    for T in (symgrad, torch):
        F, x = T.nn.functional, T.tensor(X2[0])
        seen.append([t.numpy().tolist() for t in (*F.adaptive_max_pool1d_with_indices(x[0], 3),
                                                  *F.adaptive_max_pool2d_with_indices(x, (4, 3)),
                                                  *F.adaptive_max_pool3d_with_indices(x[None], (1, 2, 5)))])
    np.testing.assert_equal(seen[0], seen[1])


@pytest.mark.parametrize("call", [
    lambda T, F, x: F.fractional_max_pool2d(x, 3, output_size=7),
    lambda T, F, x: F.fractional_max_pool2d(x, 2),
    lambda T, F, x: F.fractional_max_pool2d(x, 2, output_ratio=0.5),
    lambda T, F, x: F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5, 0.5)),
    lambda T, F, x: F.fractional_max_pool2d(x, (2, 2, 2), output_size=3),
    lambda T, F, x: F.fractional_max_pool2d(x, 2, output_size=3, _random_samples=T.rand(2, 3, 3)),
    lambda T, F, x: F.fractional_max_pool2d(x, 2, output_size=3, _random_samples=T.rand(1, 3, 2)),
    lambda T, F, x: F.fractional_max_pool2d(x, 2, output_size=3, _random_samples=T.rand(2, 4, 2)),
    lambda T, F, x: F.fractional_max_pool2d(x, 2, output_size=3, _random_samples=T.rand(2, 3, 2).double()),
    lambda T, F, x: F.fractional_max_pool2d(x, 2, output_size=3, _random_samples=T.rand(2, 3)),
    lambda T, F, x: F.fractional_max_pool2d(x[:, :, :0], 2, output_size=3),
    lambda T, F, x: F.fractional_max_pool3d(T.zeros(1, 1, 6, 7, 5), 2, output_size=(4, 6, 4)),
    lambda T, F, x: F.fractional_max_pool3d(T.zeros(1, 1, 6, 7, 5), 2, output_size=(5, 4, 3)),
    lambda T, F, x: F.fractional_max_pool3d(x[0], 2, output_size=2, _random_samples=T.rand(1, 3, 3)),
    lambda T, F, x: T.nn.FractionalMaxPool2d(2, output_ratio=1.5),
    lambda T, F, x: T.nn.FractionalMaxPool3d(2),
    lambda T, F, x: T.nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5),
], ids=["pool too large", "no size", "float ratio", "three ratios", "three kernel sizes", "samples size(2)",
        "samples size(0)", "samples size(1)", "samples dtype", "samples dims", "empty", "3d width", "3d time",
        "3d rank", "module ratio", "module no size", "module both"])
def test_pytorchs_errors(torch, call):
    seen = []
    for T in (symgrad, torch):
        with pytest.raises(Exception) as caught:
            call(T, T.nn.functional, T.tensor(X2))
        seen.append((type(caught.value).__name__, str(caught.value)))
    assert seen[0] == seen[1]
