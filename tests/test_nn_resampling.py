"""F.interpolate (every mode but antialiasing), F.upsample*, nn.Upsample and its subclasses, and
pixel_shuffle / pixel_unshuffle / channel_shuffle against the installed PyTorch on the same arrays:
values, grad_fn names, input gradients, NaN and Inf where PyTorch has them, reprs and errors.

Which entries an interpolation reads and with what weights is PyTorch's kernels' float arithmetic;
``test_*_are_pytorchs_bit_for_bit`` sweep sizes and scales against PyTorch on one-hot inputs, whose
outputs are those weights exactly.  Many cases below share one compiled program: the weights are
program inputs, so calls with equal shapes differ only in data."""
import math
import warnings

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch
from symgrad.nn.resampling import _taps
from test_nn_functional import check, normal


def F(T):
    return T.nn.functional


# ------------------------------------------------------- the entries and weights, bit for bit


def _weights_matrix(mode, n_in, n_out, align_corners, scale, dtype, planar):
    """symgrad's weights of one axis as an (out, in) matrix, the taps added in PyTorch's order."""
    indices, weights = _taps(mode, n_in, n_out, align_corners, scale, dtype, planar)
    matrix = np.zeros((n_out, n_in), dtype)
    for index, weight in zip(indices, weights or [np.ones(n_out, dtype)]):
        np.add.at(matrix, (np.arange(n_out), np.asarray(index)), np.asarray(weight))
    return matrix


def _pytorchs_matrix(torch, mode, n_in, out, align_corners, scale, dtype, rank):
    """PyTorch's interpolation of the one-hot rows of an identity: its weights, exactly."""
    lead = (1,) * (rank - 3)
    eye = torch.eye(n_in, dtype=getattr(torch, dtype)).reshape(n_in, 1, *lead, n_in)
    options = {"size": (*lead, out)} if scale is None else {"scale_factor": (*(1.0,) * len(lead), scale)}
    if "nearest" not in mode:
        options["align_corners"] = align_corners
    return F(torch).interpolate(eye, mode=mode, **options).reshape(n_in, -1).T.numpy()


SWEEP = [(mode, rank) for mode, rank in (("nearest", 3), ("nearest", 4), ("nearest", 5), ("nearest-exact", 3),
                                         ("nearest-exact", 4), ("linear", 3), ("bilinear", 4), ("bicubic", 4),
                                         ("trilinear", 5))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode,rank", SWEEP)
def test_entries_and_weights_are_pytorchs_bit_for_bit(torch, mode, rank, dtype):
    for n_in in (1, 2, 3, 5, 7, 10):
        for n_out in (1, 2, 3, 4, 6, 7, 9, 10, 14, 15, 20, 21, 31):
            for scale in (None, n_out / n_in * 1.0137, n_out / n_in * 0.9951):
                out = n_out if scale is None else int(n_in * scale)
                for align_corners in ((False,) if "nearest" in mode else (False, True)):
                    if out < 1:
                        continue
                    theirs = _pytorchs_matrix(torch, mode, n_in, out, align_corners, scale, dtype, rank)
                    ours = _weights_matrix(mode, n_in, out, align_corners, scale, dtype, rank == 4)
                    assert np.array_equal(ours, theirs), (n_in, out, scale, align_corners)


# ----------------------------------------------------------------- values and gradients

X1, X2, X3 = normal(2, 3, 5), normal(1, 2, 3, 4), normal(1, 2, 2, 3, 2)
DOWN = normal(2, 2, 6, 5)
WITH_INF = np.array([[[1.0, math.inf, 2.0, 3.0]]], np.float32)
WITH_NAN = np.array([[[[1.0, 2.0, math.nan], [0.5, -1.0, math.inf]]]], np.float32)


def _interpolate(**options):
    return lambda T, x: F(T).interpolate(x, **options)


CASES = {  # equal input shapes and output sizes share a program
    "nearest 1d": (_interpolate(scale_factor=2.3), [X1]),
    "nearest 1d size": (_interpolate(size=11), [X1]),
    "nearest 2d x2": (_interpolate(scale_factor=2), [X2]),
    "nearest 2d size": (_interpolate(size=(5, 7)), [X2]),
    "nearest 2d down": (_interpolate(size=(2, 3)), [X2]),
    "nearest 3d": (_interpolate(scale_factor=(1.5, 2.0, 1.0)), [X3]),
    "nearest-exact 1d": (_interpolate(size=11, mode="nearest-exact"), [X1]),
    "nearest-exact 2d": (_interpolate(size=(5, 7), mode="nearest-exact"), [X2]),
    "nearest-exact 3d": (_interpolate(scale_factor=(1.5, 2.0, 1.0), mode="nearest-exact"), [X3]),
    "linear": (_interpolate(size=11, mode="linear"), [X1]),
    "linear aligned": (_interpolate(size=11, mode="linear", align_corners=True), [X1]),
    "linear scale": (_interpolate(scale_factor=2.3, mode="linear"), [X1]),
    "linear recomputed scale": (_interpolate(scale_factor=2.3, mode="linear", recompute_scale_factor=True), [X1]),
    "linear down": (_interpolate(size=3, mode="linear"), [X1]),
    "bilinear": (_interpolate(size=(5, 7), mode="bilinear"), [X2]),
    "bilinear aligned": (_interpolate(size=(5, 7), mode="bilinear", align_corners=True), [X2]),
    "bilinear scale": (_interpolate(scale_factor=(1.7, 1.8), mode="bilinear"), [X2]),
    "bilinear down": (_interpolate(size=(4, 3), mode="bilinear"), [DOWN]),
    "bilinear down aligned": (_interpolate(size=(4, 3), mode="bilinear", align_corners=True), [DOWN]),
    "bilinear x2 (U-Net)": (_interpolate(scale_factor=2, mode="bilinear", align_corners=True), [X2]),
    "bicubic": (_interpolate(size=(5, 7), mode="bicubic"), [X2]),
    "bicubic aligned": (_interpolate(size=(5, 7), mode="bicubic", align_corners=True), [X2]),
    "bicubic down": (_interpolate(size=(4, 3), mode="bicubic"), [DOWN]),
    "trilinear": (_interpolate(scale_factor=(1.5, 2.0, 1.0), mode="trilinear"), [X3]),
    "trilinear aligned": (_interpolate(scale_factor=(1.5, 2.0, 1.0), mode="trilinear", align_corners=True), [X3]),
    "area 1d": (_interpolate(size=3, mode="area"), [X1]),
    "area 2d": (_interpolate(size=(4, 3), mode="area"), [DOWN]),
    "area 3d": (_interpolate(size=(1, 2, 2), mode="area"), [X3]),
    "linear same size meets inf": (_interpolate(size=4, mode="linear"), [WITH_INF]),
    "linear up meets inf": (_interpolate(size=8, mode="linear"), [WITH_INF]),
    "nearest meets inf": (_interpolate(size=8), [WITH_INF]),
    "bilinear meets nan and inf": (_interpolate(size=(3, 4), mode="bilinear"), [WITH_NAN]),
    "bicubic meets nan and inf": (_interpolate(size=(3, 4), mode="bicubic"), [WITH_NAN]),
    "empty batch": (_interpolate(scale_factor=2, mode="bilinear"), [normal(0, 2, 3, 4)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_interpolate(torch, name):
    fn, arrays = CASES[name]
    check(torch, fn, arrays, rtol=1e-5, atol=1e-6)


def test_float64_interpolation_is_pytorchs_to_rounding(torch):
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 4))
    for options in ({"mode": "bicubic"}, {"mode": "bilinear", "align_corners": True}, {"mode": "nearest-exact"}):
        ours = F(symgrad).interpolate(symgrad.tensor(x), size=(5, 7), **options).numpy()
        theirs = F(torch).interpolate(torch.tensor(x), size=(5, 7), **options).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-15)


def test_gradient_of_gradient():
    """The gradient is gathers and scatter-adds, so it differentiates again."""
    x = symgrad.tensor(np.random.default_rng(2).standard_normal((1, 1, 3, 2)), requires_grad=True)
    assert symgrad.gradgradcheck(lambda x: F(symgrad).interpolate(x, size=(4, 5), mode="bicubic") ** 2, (x,))


# ------------------------------------------------------------------------------- modules

UPSAMPLERS = {
    "Upsample": lambda T: T.nn.Upsample(scale_factor=2),
    "Upsample bilinear size": lambda T: T.nn.Upsample(size=(5, 7), mode="bilinear", align_corners=True),
    "Upsample bicubic": lambda T: T.nn.Upsample(scale_factor=(1.7, 1.8), mode="bicubic"),
    "UpsamplingNearest2d": lambda T: T.nn.UpsamplingNearest2d(size=(5, 7)),
    "UpsamplingBilinear2d": lambda T: T.nn.UpsamplingBilinear2d(scale_factor=2),
}


@pytest.mark.parametrize("name", list(UPSAMPLERS))
def test_upsampling_modules(torch, name):
    assert repr(UPSAMPLERS[name](symgrad)) == repr(UPSAMPLERS[name](torch))
    check(torch, lambda T, x: UPSAMPLERS[name](T)(x), [X2], rtol=1e-5, atol=1e-6)


def test_upsample_without_a_scale_shows_its_size(torch):
    assert repr(symgrad.nn.Upsample(size=4, mode="linear")) == repr(torch.nn.Upsample(size=4, mode="linear"))
    assert repr(symgrad.nn.Upsample(scale_factor=0)) == repr(torch.nn.Upsample(scale_factor=0))


@pytest.mark.parametrize("name,call", [
    ("upsample", lambda T, x: F(T).upsample(x, scale_factor=2, mode="bilinear")),
    ("upsample_nearest", lambda T, x: F(T).upsample_nearest(x, size=(5, 7))),
    ("upsample_bilinear", lambda T, x: F(T).upsample_bilinear(x, scale_factor=2)),
])
def test_deprecated_upsample_functions_warn_and_interpolate(torch, name, call):
    with pytest.warns(UserWarning, match=f"`nn.functional.{name}` is deprecated"):
        check(torch, call, [X2], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------- sub-pixel rearranging

SHUFFLES = {
    "pixel_shuffle": (lambda T, x: F(T).pixel_shuffle(x, 2), [normal(2, 8, 2, 3)]),
    "pixel_shuffle batch dims": (lambda T, x: F(T).pixel_shuffle(x, 3), [normal(2, 1, 9, 2, 1)]),
    "pixel_shuffle unbatched": (lambda T, x: T.pixel_shuffle(x, 2), [normal(4, 1, 2)]),
    "pixel_shuffle integers": (lambda T, x: F(T).pixel_shuffle(x, 2), [np.arange(32).reshape(1, 8, 2, 2)]),
    "pixel_unshuffle": (lambda T, x: F(T).pixel_unshuffle(x, 2), [normal(2, 2, 4, 6)]),
    "pixel_unshuffle batch dims": (lambda T, x: T.pixel_unshuffle(x, 3), [normal(2, 1, 1, 3, 6)]),
    "channel_shuffle": (lambda T, x: F(T).channel_shuffle(x, 3), [normal(2, 6, 2, 1)]),
    "channel_shuffle 1d": (lambda T, x: T.channel_shuffle(x, 2), [normal(1, 4, 3)]),
    "channel_shuffle 3d": (lambda T, x: F(T).channel_shuffle(x, 2), [normal(1, 4, 1, 2, 2)]),
    "modules": (lambda T, x: T.nn.ChannelShuffle(2)(T.nn.PixelUnshuffle(2)(T.nn.PixelShuffle(2)(x))),
                [normal(1, 8, 2, 3)]),
    "sub-pixel convolution (super-resolution)": (
        lambda T, x, w: F(T).pixel_shuffle(F(T).conv2d(x, w, padding=1), 2), [normal(1, 2, 3, 3), normal(8, 2, 3, 3)]),
}


@pytest.mark.parametrize("name", list(SHUFFLES))
def test_shuffles(torch, name):
    fn, arrays = SHUFFLES[name]
    check(torch, fn, arrays, rtol=1e-5, atol=1e-6)


def test_shuffle_module_reprs(torch):
    for make in (lambda T: T.nn.PixelShuffle(2), lambda T: T.nn.PixelUnshuffle(3), lambda T: T.nn.ChannelShuffle(4)):
        assert repr(make(symgrad)) == repr(make(torch))


# -------------------------------------------------------------------------------- errors

ERRORS = {
    "align_corners with nearest": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), scale_factor=2, align_corners=True),
    "size and scale": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), size=3, scale_factor=2),
    "neither size nor scale": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3)),
    "size length": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), size=(2, 3, 4)),
    "size of floats": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), size=(2.0, 3)),
    "scale length": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), scale_factor=(2, 3, 4)),
    "recompute with a size": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), size=4, recompute_scale_factor=True),
    "mode for the rank": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), scale_factor=2, mode="linear"),
    "bicubic on 3d": lambda T: F(T).interpolate(T.ones(1, 2, 3), scale_factor=2, mode="bicubic"),
    "unknown mode": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), size=4, mode="bogus"),
    "rank": lambda T: F(T).interpolate(T.ones(2, 3), size=4),
    "antialias on linear": lambda T: F(T).interpolate(T.ones(1, 2, 3), size=4, mode="linear", antialias=True),
    "output of size 0": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), scale_factor=0.2),
    "1d output of size 0": lambda T: F(T).interpolate(T.ones(1, 2, 3), size=0),
    "3d output of size 0": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3, 3), size=(1, 0, 2), mode="trilinear"),
    "negative scale": lambda T: F(T).interpolate(T.ones(1, 2, 3, 3), scale_factor=-1.0),
    "no channels": lambda T: F(T).interpolate(T.ones(1, 0, 3, 3), size=4),
    "integers nearest 2d": lambda T: F(T).interpolate(T.ones(1, 1, 2, 2, dtype=T.int64), scale_factor=2),
    "integers linear": lambda T: F(T).interpolate(T.ones(1, 1, 2, dtype=T.int64), scale_factor=2, mode="linear"),
    "integers bicubic": lambda T: F(T).interpolate(T.ones(1, 1, 2, 2, dtype=T.int64), scale_factor=2,
                                                   mode="bicubic"),
    "pixel_shuffle channels": lambda T: F(T).pixel_shuffle(T.ones(1, 7, 2, 2), 2),
    "pixel_shuffle rank": lambda T: F(T).pixel_shuffle(T.ones(8, 2), 2),
    "pixel_shuffle factor": lambda T: F(T).pixel_shuffle(T.ones(1, 8, 2, 2), 0),
    "pixel_unshuffle width": lambda T: F(T).pixel_unshuffle(T.ones(1, 2, 4, 5), 2),
    "pixel_unshuffle height": lambda T: F(T).pixel_unshuffle(T.ones(1, 2, 3, 4), 2),
    "pixel_unshuffle factor": lambda T: F(T).pixel_unshuffle(T.ones(1, 2, 4, 6), -1),
    "channel_shuffle groups": lambda T: F(T).channel_shuffle(T.ones(1, 6, 2, 2), 4),
    "channel_shuffle zero groups": lambda T: F(T).channel_shuffle(T.ones(1, 6, 2, 2), 0),
    "channel_shuffle rank": lambda T: F(T).channel_shuffle(T.ones(6, 2), 3),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


def test_antialias_is_refused_clearly():
    with pytest.raises(NotImplementedError, match="antialias"):
        F(symgrad).interpolate(symgrad.ones(1, 2, 4, 4), size=2, mode="bilinear", antialias=True)


def test_no_warning_from_interpolate(torch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F(symgrad).interpolate(symgrad.ones(1, 2, 3), scale_factor=2.5, mode="linear")


def test_interpolation_inside_a_compiled_gradient(torch):
    """value_and_grad traces the function with JAX: the weights stay constants, call after call."""
    def loss(T, x):
        return (F(T).interpolate(x, scale_factor=1.5, mode="bicubic") ** 2).sum()
    compiled = symgrad.value_and_grad(lambda x: loss(symgrad, x))
    for seed in (0, 1):
        x = np.random.default_rng(seed).standard_normal((1, 2, 3, 4))
        value, grad = compiled(symgrad.tensor(x, requires_grad=True))
        theirs = torch.tensor(x, requires_grad=True)
        loss(torch, theirs).backward()
        np.testing.assert_allclose(grad.detach().numpy(), theirs.grad.numpy(), rtol=1e-12)
