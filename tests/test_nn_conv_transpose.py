"""Transposed convolutions against the installed PyTorch on the same arrays: F.conv_transpose1d/2d/3d
(values, grad_fn, the gradients of input, weight and bias, NaN and Inf where PyTorch has them),
nn.ConvTranspose1d/2d/3d (seeded weights bit for bit, reprs, ``output_size=``) and PyTorch's errors.
The registry's generic tests (test_ops.py) check the same op in float64 against finite differences."""
import math

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch
from test_nn_functional import check, normal


def F(T):
    return T.nn.functional


def _with_inf(array, index, value=math.inf):
    array = array.copy()
    array[index] = value
    return array


X = normal(1, 2, 3, 3)
W = normal(2, 3, 3, 3)

CASES = {
    "2d": (lambda T, x, w: F(T).conv_transpose2d(x, w), [normal(2, 3, 4, 3), normal(3, 2, 2, 3)]),
    "2d bias stride padding": (lambda T, x, w, b: F(T).conv_transpose2d(x, w, b, stride=2, padding=1),
                               [normal(1, 3, 4, 4), normal(3, 2, 4, 4), normal(2)]),
    "2d output padding (DCGAN's layer)": (lambda T, x, w, b: F(T).conv_transpose2d(x, w, b, 2, 1, 1),
                                          [normal(2, 4, 3, 3), normal(4, 3, 3, 3), normal(3)]),
    "2d output padding beyond the padding": (lambda T, x, w: F(T).conv_transpose2d(x, w, stride=(3, 2),
                                                                                   output_padding=(2, 1)),
                                             [normal(1, 2, 2, 3), normal(2, 2, 2, 2)]),
    "2d groups": (lambda T, x, w, b: F(T).conv_transpose2d(x, w, b, stride=(1, 2), padding=(0, 1), groups=2),
                  [normal(2, 4, 3, 4), normal(4, 3, 2, 3), normal(6)]),
    "2d depthwise": (lambda T, x, w: F(T).conv_transpose2d(x, w, groups=3, stride=2), [normal(1, 3, 3, 3),
                                                                                    normal(3, 1, 3, 3)]),
    "2d dilation": (lambda T, x, w: F(T).conv_transpose2d(x, w, stride=2, padding=(2, 1), dilation=(2, 3)),
                    [normal(1, 2, 4, 3), normal(2, 2, 3, 2)]),
    "2d output padding from dilation": (lambda T, x, w: F(T).conv_transpose2d(x, w, output_padding=(1, 0),
                                                                             dilation=(2, 1)),
                                        [normal(1, 2, 3, 3), normal(2, 1, 2, 2)]),
    "2d padding larger than the kernel": (lambda T, x, w: F(T).conv_transpose2d(x, w, stride=3, padding=3),
                                          [normal(1, 2, 4, 4), normal(2, 2, 3, 3)]),
    "2d unbatched": (lambda T, x, w, b: F(T).conv_transpose2d(x, w, b, stride=2), [normal(2, 3, 3),
                                                                                 normal(2, 3, 2, 2), normal(3)]),
    "2d lists of one": (lambda T, x, w: F(T).conv_transpose2d(x, w, stride=[2], padding=[1], output_padding=[1]),
                        [normal(1, 2, 3, 3), normal(2, 2, 3, 3)]),
    "1d": (lambda T, x, w, b: F(T).conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2, dilation=2),
           [normal(2, 2, 5), normal(2, 3, 3), normal(3)]),
    "1d groups unbatched": (lambda T, x, w: F(T).conv_transpose1d(x, w, groups=2, stride=2), [normal(4, 3),
                                                                                           normal(4, 2, 3)]),
    "3d": (lambda T, x, w, b: F(T).conv_transpose3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 0),
                                                    output_padding=(1, 0, 1)),
           [normal(1, 2, 2, 3, 2), normal(2, 2, 3, 2, 2), normal(2)]),
    "torch.conv_transpose2d": (lambda T, x, w: T.conv_transpose2d(x, w, stride=2), [normal(1, 2, 2, 2),
                                                                                   normal(2, 1, 2, 2)]),
    "inf in the input": (lambda T, x, w: F(T).conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
                         [_with_inf(X, (0, 0, 1, 1)), W]),
    "inf in the input meets the padding": (lambda T, x, w: F(T).conv_transpose2d(x, w, padding=2),
                                           [_with_inf(X, (0, 0, 1, 1)), W]),
    "inf in the weight": (lambda T, x, w: F(T).conv_transpose2d(x, w, stride=3, dilation=2),
                          [X, _with_inf(W, (0, 0, 1, 1))]),
    "nan in the weight": (lambda T, x, w: F(T).conv_transpose2d(x, w, stride=2, padding=1),
                          [X, _with_inf(W, (1, 2, 0, 2), math.nan)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_conv_transpose(torch, name):
    fn, arrays = CASES[name]
    check(torch, fn, arrays, rtol=1e-5, atol=1e-5)


def test_gradient_of_gradient():
    """The VJP is einsums and windows, so differentiating it again stays in the IR."""
    rng = np.random.default_rng(5)
    x = symgrad.tensor(rng.standard_normal((1, 4, 3, 3)), requires_grad=True)
    w = symgrad.tensor(rng.standard_normal((4, 1, 3, 2)), requires_grad=True)
    assert symgrad.gradgradcheck(
        lambda x, w: F(symgrad).conv_transpose2d(x, w, stride=2, padding=1, output_padding=(1, 0), groups=2), (x, w))


# ------------------------------------------------------------------------------- modules

MODULES = {
    "ConvTranspose2d": lambda T: T.nn.ConvTranspose2d(4, 6, 3),
    "ConvTranspose2d all arguments": lambda T: T.nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=(1, 0),
                                                                   output_padding=(1, 0), groups=2, bias=False,
                                                                   dilation=(1, 2)),
    "ConvTranspose1d": lambda T: T.nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1),
    "ConvTranspose3d": lambda T: T.nn.ConvTranspose3d(2, 4, (1, 2, 3), stride=(1, 2, 1), groups=2),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_seeded_module_holds_pytorchs_weights_and_repr(torch, name):
    ours, theirs = [], []
    for T, made in ((symgrad, ours), (torch, theirs)):
        T.manual_seed(3)
        made.append(MODULES[name](T))
    (ours,), (theirs,) = ours, theirs
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    for (_, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert tuple(a.shape) == tuple(b.shape)
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())  # bit for bit


def test_seeded_dcgan_generator_trains_as_pytorchs(torch):
    """PyTorch's DCGAN generator (shrunk): its forward, loss and every parameter's gradient."""
    def generator(T):
        T.manual_seed(0)
        nn = T.nn
        return nn.Sequential(nn.ConvTranspose2d(8, 6, 4, 1, 0, bias=False), nn.BatchNorm2d(6), nn.ReLU(True),
                             nn.ConvTranspose2d(6, 3, 4, 2, 1, bias=False), nn.Tanh())
    z = normal(2, 8, 1, 1)
    results = []
    for T in (symgrad, torch):
        net = generator(T)
        image = net(T.tensor(z))
        (image ** 2).mean().backward()
        results.append((image.detach().numpy(), [p.grad.numpy() for p in net.parameters()]))
    (image, grads), (t_image, t_grads) = results
    assert image.shape == (2, 3, 8, 8)
    np.testing.assert_allclose(image, t_image, rtol=1e-5, atol=1e-6)
    for g, t_g in zip(grads, t_grads):
        np.testing.assert_allclose(g, t_g, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("output_size", [[6, 8], [1, 2, 5, 7], (6, 7)])
def test_output_size_picks_the_output_padding(torch, output_size):
    def module_call(T, x):
        T.manual_seed(1)
        return T.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)(x, output_size=output_size)
    check(torch, module_call, [normal(1, 3, 3, 4)], rtol=1e-5, atol=1e-6)


def test_module_unbatched_output_size(torch):
    def module_call(T, x):
        T.manual_seed(2)
        return T.nn.ConvTranspose1d(2, 3, 2, stride=3)(x, output_size=[1, 8])
    check(torch, module_call, [normal(2, 3)], rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------------------------- errors

ERRORS = {
    "output padding not below stride or dilation": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5),
                                                                                   T.ones(4, 3, 3, 3), stride=2,
                                                                                   output_padding=2),
    "1d output padding": lambda T: F(T).conv_transpose1d(T.ones(1, 4, 5), T.ones(4, 3, 3), output_padding=1),
    "3d output padding": lambda T: F(T).conv_transpose3d(T.ones(1, 4, 2, 2, 2), T.ones(4, 3, 1, 1, 1),
                                                         output_padding=1),
    "channels": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(3, 3, 3, 3)),
    "groups divide the weight": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3), groups=3),
    "more groups than weights": lambda T: F(T).conv_transpose1d(T.ones(1, 4, 5), T.ones(4, 3, 3), groups=8),
    "bias size": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3), T.ones(4)),
    "output too small": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3), padding=5),
    "1d output too small": lambda T: F(T).conv_transpose1d(T.ones(1, 4, 5), T.ones(4, 3, 3), padding=5),
    "negative padding": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3), padding=-1),
    "negative output padding": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3),
                                                               output_padding=-1),
    "zero stride": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3), stride=0),
    "zero dilation": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3), dilation=0),
    "zero groups": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3), groups=0),
    "input rank": lambda T: F(T).conv_transpose2d(T.ones(5, 5), T.ones(4, 3, 3, 3)),
    "3d input rank": lambda T: F(T).conv_transpose3d(T.ones(1, 3, 5, 5, 5, 2), T.ones(4, 3, 3, 3, 3)),
    "dtypes": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3, dtype=T.float64)),
    "stride of three values": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5), T.ones(4, 3, 3, 3),
                                                              stride=(1, 2, 3)),
    "integers": lambda T: F(T).conv_transpose2d(T.ones(1, 4, 5, 5, dtype=T.int32), T.ones(4, 3, 3, 3,
                                                                                          dtype=T.int32)),
    "3d bias of another dtype": lambda T: F(T).conv_transpose3d(T.ones(1, 2, 2, 2, 2, dtype=T.float64),
                                                                T.ones(2, 2, 1, 1, 1, dtype=T.float64), T.ones(2)),
    "float32 in groups, float64 bias": lambda T: F(T).conv_transpose1d(T.ones(1, 2, 3), T.ones(2, 1, 1),
                                                                       T.ones(2, dtype=T.float64), groups=2),
    "module groups": lambda T: T.nn.ConvTranspose2d(4, 6, 3, groups=4),
    "module zero groups": lambda T: T.nn.ConvTranspose2d(4, 6, 3, groups=0),
    "module padding mode": lambda T: T.nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect"),
    "module output size out of range": lambda T: T.nn.ConvTranspose2d(4, 6, 3, stride=2)(T.ones(1, 4, 5, 5),
                                                                                         output_size=[13, 12]),
    "module output size length": lambda T: T.nn.ConvTranspose2d(4, 6, 3, stride=2)(T.ones(1, 4, 5, 5),
                                                                                   output_size=[13]),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


def test_a_float64_bias_is_read_as_the_input_type(torch):
    check(torch, lambda T, x, w, b: F(T).conv_transpose2d(x, w, b.double()),
          [normal(1, 2, 3, 3), normal(2, 3, 2, 2), normal(3)])
