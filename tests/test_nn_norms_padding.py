"""instance_norm, rms_norm, local_response_norm, their modules, BatchNorm3d and the padding modules
against the installed PyTorch on the same arrays: values, grad_fn names, input gradients, running
statistics, parameters, state_dict keys, reprs, warnings and errors.  F.pad's modes (negative
padding included) are checked here too, since every padding module is one of them."""
import warnings

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch
from test_nn_functional import _weights, check, normal


def F(T):
    return T.nn.functional


X3, X4, X5 = normal(2, 3, 5), normal(2, 3, 4, 3), normal(2, 2, 3, 2, 3)
W3, B3, POSITIVE3 = normal(3), normal(3), np.float32([0.5, 2.0, 1.5])

FUNCTIONS = {
    "instance_norm": (lambda T, x: F(T).instance_norm(x), [X3], None),
    "instance_norm affine, running statistics": (
        lambda T, x, w, b, m, v: F(T).instance_norm(x, m, v, w, b, momentum=0.3),
        [X4, W3, B3, W3, POSITIVE3], [True, True, True, False, False]),
    "instance_norm with the running statistics": (
        lambda T, x, w, m, v: F(T).instance_norm(x, m, v, w, use_input_stats=False, eps=0.1),
        [X3, W3, B3, POSITIVE3], [True, True, False, False]),
    "rms_norm weight, two axes, eps": (lambda T, x, w: F(T).rms_norm(x, [4, 3], w, eps=1e-3), [X4, normal(4, 3)], None),
    "rms_norm float64": (lambda T, x, w: F(T).rms_norm(x.double(), [5], w.double()), [X3, normal(5)], None),
    "rms_norm float16 in float32": (lambda T, x: F(T).rms_norm(x.to(T.float16), [5]), [X3], None),
    "rms_norm at zero and inf": (lambda T, x: F(T).rms_norm(x, [3]),
                                 [np.float32([[0.0, 0.0, 0.0], [1.0, np.inf, 2.0], [np.nan, 1.0, 1.0]])], None),
    "local_response_norm 3d": (lambda T, x: F(T).local_response_norm(x, 2), [X3], None),
    "local_response_norm 5d, window wider than the channels": (
        lambda T, x: F(T).local_response_norm(x, 5, alpha=0.3), [X5], None),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_functional_norms(torch, name):
    fn, arrays, grads = FUNCTIONS[name]
    check(torch, fn, arrays, grads, rtol=1e-5, atol=1e-6)


def _walk(grad_fn):
    """Every node of a backward graph, depth first."""
    names, stack = [], [grad_fn]
    while stack:
        node = stack.pop()
        if node is not None:
            names.append(type(node).__name__)
            stack.extend(next_fn for next_fn, _ in node.next_functions)
    return names


def test_the_compositions_are_pytorchs(torch):
    def graphs(T):
        x, w, b = (T.tensor(a, requires_grad=True) for a in (X4, W3, B3))
        return [_walk(F(T).instance_norm(x, T.zeros(3), T.ones(3), w, b).grad_fn),
                _walk(F(T).rms_norm(x, [3], w).grad_fn),
                _walk(F(T).local_response_norm(x, 3).grad_fn)]
    assert graphs(symgrad) == graphs(torch)


def test_instance_norm_moves_the_running_statistics_by_the_samples_mean(torch):
    def run(T):
        mean, var = T.zeros(3), T.ones(3)
        for scale in (1.0, 3.0):
            F(T).instance_norm(T.tensor(X4 * scale), mean, var, momentum=0.2)
        frozen = F(T).instance_norm(T.tensor(X4), mean, var, use_input_stats=False)
        return [mean.numpy(), var.numpy(), frozen.numpy()]
    for ours, theirs in zip(run(symgrad), run(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_instance_norm_of_empty_inputs_moves_the_statistics_as_pytorchs(torch):
    """No positions: the statistics stay; no samples: their mean over no copies is NaN."""
    def run(T, shape):
        mean, var = T.zeros(shape[1]), T.ones(shape[1])
        out = F(T).instance_norm(T.zeros(*shape), mean, var)
        return tuple(out.shape), type(out.grad_fn).__name__, mean.numpy(), var.numpy()
    for shape in ((2, 3, 0), (0, 3, 4)):
        ours, theirs = run(symgrad, shape), run(torch, shape)
        assert ours[:2] == theirs[:2]
        np.testing.assert_array_equal(np.stack(ours[2:]), np.stack(theirs[2:]))


def _module_steps(T, make, x):
    """A module trained one step on x (its gradients taken), then run in eval mode: the outputs,
    the gradients and every state_dict entry."""
    T.manual_seed(0)
    module = make(T)
    inputs = T.tensor(x, requires_grad=True)
    out = module(inputs)
    (out * T.tensor(_weights(tuple(out.shape)))).sum().backward()
    module.eval()
    evaluated = module(T.tensor(x * 2))
    grads = [inputs.grad] + [p.grad for p in module.parameters()]
    state = module.state_dict()
    return ([out.detach().numpy(), evaluated.detach().numpy()] + [g.numpy() for g in grads],
            {k: v.numpy() for k, v in state.items()}, repr(module))


MODULES = {
    "InstanceNorm1d unbatched, tracking": (lambda T: T.nn.InstanceNorm1d(2, track_running_stats=True), X3[0, :2]),
    "InstanceNorm2d affine, tracking": (lambda T: T.nn.InstanceNorm2d(3, momentum=0.4, affine=True,
                                                                      track_running_stats=True), X4),
    "InstanceNorm3d without bias, momentum None": (
        lambda T: T.nn.InstanceNorm3d(2, affine=True, bias=False, momentum=None, track_running_stats=True), X5),
    "BatchNorm3d": (lambda T: T.nn.BatchNorm3d(2, momentum=0.3), X5),
    "RMSNorm without weight": (lambda T: T.nn.RMSNorm(5, eps=1e-2, elementwise_affine=False), X3),
    "LocalResponseNorm": (lambda T: T.nn.LocalResponseNorm(2, alpha=0.1, beta=0.5, k=1.5), X4),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_modules(torch, name):
    make, x = MODULES[name]
    (ours, state, text), (theirs, t_state, t_text) = _module_steps(symgrad, make, x), _module_steps(torch, make, x)
    assert text == t_text
    assert list(state) == list(t_state)
    for key in state:
        np.testing.assert_allclose(state[key], t_state[key], rtol=1e-5, atol=1e-6, err_msg=key)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


LAYOUTS = [lambda T: T.nn.InstanceNorm1d(3), lambda T: T.nn.InstanceNorm2d(4, affine=True, bias=False),
           lambda T: T.nn.BatchNorm3d(2, eps=1e-3, bias=False, track_running_stats=False),
           lambda T: T.nn.RMSNorm(T.Size([4, 3]), dtype=T.float64), lambda T: T.nn.LocalResponseNorm(3)]


@pytest.mark.parametrize("make", LAYOUTS, ids=["InstanceNorm1d", "InstanceNorm2d without bias", "BatchNorm3d",
                                                 "RMSNorm float64", "LocalResponseNorm"])
def test_module_layouts_are_pytorchs(torch, make):
    """Reprs, parameters and state_dict entries (names, shapes, dtypes) of the configurations
    test_modules does not run."""
    def layout(T):
        module = make(T)
        return repr(module), [(k, tuple(v.shape), str(v.dtype)) for k, v in module.state_dict().items()], \
            [k for k, _ in module.named_parameters()]
    assert layout(symgrad) == layout(torch)


def test_norm_modules_reset_as_pytorchs(torch):
    def run(T):
        norm, rms = T.nn.InstanceNorm1d(3, affine=True, track_running_stats=True), T.nn.RMSNorm(3)
        with T.no_grad():
            for t in (norm.weight, norm.bias, norm.running_mean, norm.running_var, rms.weight):
                t.add_(0.5)
            norm.num_batches_tracked.add_(4)
        norm.reset_parameters(), rms.reset_parameters()
        return [t.numpy() for t in (*norm.state_dict().values(), rms.weight.detach())]
    for ours, theirs in zip(run(symgrad), run(torch), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_instance_norm_warns_of_a_channel_count_it_does_not_use(torch):
    for T in (symgrad, torch):
        with pytest.warns(UserWarning, match=r"input's size at dim=0 does not match num_features"):
            T.nn.InstanceNorm1d(4)(T.ones(3, 5))


def test_rms_norm_warns_of_a_weight_of_another_dtype(torch):
    with pytest.warns(UserWarning, match="Mismatch dtype between input and weight: input dtype = float, weight "
                                         "dtype = double, Cannot dispatch to fused implementation"):
        out = F(symgrad).rms_norm(symgrad.tensor(X3), [5], symgrad.tensor(W3[:1].repeat(5)).double())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = F(torch).rms_norm(torch.tensor(X3), [5], torch.tensor(W3[:1].repeat(5)).double())
    assert out.dtype == symgrad.float32
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)


ERRORS = {
    "instance_norm one position": lambda T: F(T).instance_norm(T.ones(2, 3, 1)),
    "instance_norm 2d input": lambda T: F(T).instance_norm(T.ones(3, 4)),
    "instance_norm eval without statistics": lambda T: F(T).instance_norm(T.ones(2, 3, 4), use_input_stats=False),
    "instance_norm one statistic": lambda T: F(T).instance_norm(T.ones(2, 3, 4), T.zeros(3)),
    "instance_norm 1d eval": lambda T: F(T).instance_norm(T.ones(3), T.zeros(1), T.ones(1), use_input_stats=False),
    "instance_norm weight of 2 dims": lambda T: F(T).instance_norm(T.ones(2, 3, 4), weight=T.ones(3, 1)),
    "InstanceNorm1d 4d": lambda T: T.nn.InstanceNorm1d(3)(T.ones(2, 3, 4, 5)),
    "InstanceNorm2d 2d": lambda T: T.nn.InstanceNorm2d(3)(T.ones(3, 4)),
    "InstanceNorm3d 3d": lambda T: T.nn.InstanceNorm3d(3)(T.ones(3, 4, 5)),
    "InstanceNorm affine, wrong channels": lambda T: T.nn.InstanceNorm1d(3, affine=True)(T.ones(2, 4, 5)),
    "BatchNorm3d 4d": lambda T: T.nn.BatchNorm3d(3)(T.ones(2, 3, 4, 5)),
    "rms_norm int shape": lambda T: F(T).rms_norm(T.ones(2, 3), 3),
    "rms_norm shape longer than the input": lambda T: F(T).rms_norm(T.ones(2, 3), [1, 2, 3]),
    "rms_norm empty shape": lambda T: F(T).rms_norm(T.ones(2, 3), []),
    "rms_norm weight shape": lambda T: F(T).rms_norm(T.ones(2, 3), [3], T.ones(2)),
    "rms_norm input shape": lambda T: F(T).rms_norm(T.ones(2, 3), [2]),
    "rms_norm integers": lambda T: F(T).rms_norm(T.ones(2, 3, dtype=T.int64), [3]),
    "local_response_norm 2d": lambda T: F(T).local_response_norm(T.ones(2, 3), 2),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


def test_local_response_norm_of_an_empty_input_is_the_input(torch):
    empty = symgrad.ones(0, 3, 4)
    assert F(symgrad).local_response_norm(empty, 3) is empty


# ------------------------------------------------------------------------------------ padding

PAD_INPUT = normal(2, 3, 4, 5)

PADDINGS = {  # module class, padding argument, input rank
    "ZeroPad1d": (1, 3), "ZeroPad2d": ((1, 0, 2, 1), 4), "ZeroPad3d": ((1, 0, 0, 1, 1, 2), 4),
    "ConstantPad1d": ((2, -1), 2), "ConstantPad2d": (1, 3), "ConstantPad3d": (2, 4),
    "ReflectionPad1d": ((3, 1), 3), "ReflectionPad2d": (2, 4), "ReflectionPad3d": ((1, 2, 0, 3, 1, 1), 4),
    "ReplicationPad1d": (2, 2), "ReplicationPad2d": ((1, -1, 3, 0), 3), "ReplicationPad3d": (1, 4),
    "CircularPad1d": (4, 3), "CircularPad2d": ((2, 1, 0, 3), 4), "CircularPad3d": ((1, -2, 1, 2, 0, 1), 4),
}


def _padded(T, x0):
    """Every padding module of PADDINGS on (a slice of) one input, in one graph: reprs, outputs,
    grad_fn names, and the input's gradient of a weighted sum of all outputs."""
    x, reprs, outs = T.tensor(x0, requires_grad=True), [], []
    for name, (padding, rank) in PADDINGS.items():
        module = getattr(T.nn, name)(*((padding, 2.5) if name.startswith("Constant") else (padding,)))
        reprs.append(repr(module))
        outs.append(module(x[(0,) * (4 - rank)]))
    sum((out * T.tensor(_weights(tuple(out.shape)))).sum() for out in outs).backward()
    return reprs, [type(out.grad_fn).__name__ for out in outs], [out.detach().numpy() for out in outs], x.grad.numpy()


def test_padding_modules(torch):
    (reprs, names, outs, grad), (t_reprs, t_names, t_outs, t_grad) = _padded(symgrad, PAD_INPUT), _padded(torch,
                                                                                                          PAD_INPUT)
    assert reprs == t_reprs and names == t_names
    for name, out, t_out in zip(PADDINGS, outs, t_outs, strict=True):
        np.testing.assert_array_equal(out, t_out, err_msg=name)
    np.testing.assert_allclose(grad, t_grad, rtol=1e-6, atol=1e-6)


def test_a_zero_pad_is_a_constant_pad_that_keeps_its_padding_as_given(torch):
    for T in (symgrad, torch):
        pad = T.nn.ZeroPad2d([1, 2])
        assert isinstance(pad, T.nn.ConstantPad2d) and pad.padding == (1, 2) and pad.value == 0.0
        assert T.nn.ReflectionPad3d(2).padding == (2,) * 6 and T.nn.ConstantPad1d(3, 1).value == 1


PAD_ERRORS = {
    "ReflectionPad1d 4d": lambda T: T.nn.ReflectionPad1d(1)(T.ones(2, 2, 3, 3)),
    "ReflectionPad2d 2d": lambda T: T.nn.ReflectionPad2d(1)(T.ones(3, 3)),
    "ReplicationPad3d 2d": lambda T: T.nn.ReplicationPad3d(1)(T.ones(3, 3)),
    "ReflectionPad1d wider than the input": lambda T: T.nn.ReflectionPad1d(3)(T.ones(1, 3)),
    "CircularPad1d 1d": lambda T: T.nn.CircularPad1d(1)(T.ones(3)),
    "CircularPad2d 5d": lambda T: T.nn.CircularPad2d(1)(T.ones(1, 1, 1, 3, 3)),
    "CircularPad3d 3d": lambda T: T.nn.CircularPad3d(1)(T.ones(3, 3, 3)),
    "CircularPad1d around twice": lambda T: T.nn.CircularPad1d(4)(T.ones(1, 3)),
    "ConstantPad3d 2d": lambda T: T.nn.ConstantPad3d(1, 0.5)(T.ones(3, 3)),
    "ZeroPad2d odd length": lambda T: T.nn.ZeroPad2d((1, 2, 3))(T.ones(3, 3)),
    "replicate crops to nothing": lambda T: F(T).pad(T.ones(1, 3), (-1, -2), mode="replicate"),
    "constant crops below nothing": lambda T: F(T).pad(T.ones(1, 3), (-2, -2)),
    "circular crops below nothing": lambda T: F(T).pad(T.ones(1, 3, 3), (0, 0, -2, -2), mode="circular"),
    "replicate 2d crops below nothing": lambda T: F(T).pad(T.ones(1, 3, 3), (-2, -2, 1, 1), mode="replicate"),
}


@pytest.mark.parametrize("name", list(PAD_ERRORS))
def test_padding_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(PAD_ERRORS[name], torch, symgrad)


NEGATIVE_PADS = {  # PyTorch reflects or repeats the whole input's border, then crops
    "reflect crops the left": ("reflect", (2, 4, 5), (-1, 3, 2, -2)),
    "reflect past the crop": ("reflect", (1, 2, 4), (-2, 3)),
    "replicate crops both axes": ("replicate", (2, 3, 4), (1, -2, -1, 2)),
    "replicate crops all but the edge": ("replicate", (1, 2, 4), (-3, 2)),
}


@pytest.mark.parametrize("name", list(NEGATIVE_PADS))
def test_negative_padding(torch, name):
    mode, shape, pad = NEGATIVE_PADS[name]
    check(torch, lambda T, x: F(T).pad(x, pad, mode=mode), [PAD_INPUT.reshape(-1)[:np.prod(shape)].reshape(shape)],
          rtol=1e-6, atol=1e-7)
