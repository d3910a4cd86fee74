"""torch.nn's Module machinery, containers, activation and loss modules and nn.utils against
PyTorch: the same model built both ways (PyTorch's weights copied in), values, gradients, names,
state_dicts, reprs and errors."""
import copy
import pickle

import numpy as np
import pytest

import symgrad

ACTIVATIONS = ["ReLU()", "ReLU6()", "LeakyReLU(0.2)", "ELU(0.5)", "CELU(0.7)", "SELU()", "GELU()",
               "GELU(approximate='tanh')", "SiLU()", "Mish()", "Softplus()", "Softplus(2.0, 1.0)", "Softsign()",
               "Hardtanh(-0.5, 0.5)", "Hardsigmoid()", "Hardswish()", "LogSigmoid()", "Tanh()", "Sigmoid()",
               "Tanhshrink()", "Softmax(dim=1)", "LogSoftmax(dim=1)", "Softmin(dim=0)"]
LOSSES = ["MSELoss()", "L1Loss(reduction='sum')", "SmoothL1Loss(beta=0.5)", "HuberLoss(delta=0.5)",
          "BCEWithLogitsLoss()", "MSELoss(size_average=False)"]


def build(T, text):
    return eval("T.nn." + text, {"T": T})


def mlp(T):
    return T.nn.Sequential(T.nn.Linear(3, 4), T.nn.ReLU(), T.nn.Sequential(T.nn.Linear(4, 2, bias=False), T.nn.Tanh()),
                           T.nn.Flatten())


def copied(torch, reference):
    """The symgrad twin of a PyTorch module: same structure, PyTorch's values."""
    ours = mlp(symgrad)
    ours.load_state_dict({k: symgrad.tensor(v.detach().numpy()) for k, v in reference.state_dict().items()})
    return ours


def test_a_model_built_both_ways_has_pytorchs_names_values_and_gradients(torch):
    reference = mlp(torch)
    ours = copied(torch, reference)
    assert repr(ours) == repr(reference)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in reference.named_parameters()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in reference.named_modules()]
    assert list(ours.state_dict()) == list(reference.state_dict())
    assert all(isinstance(p, symgrad.nn.Parameter) and p.requires_grad for p in ours.parameters())
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    outputs = []
    for model, T in ((ours, symgrad), (reference, torch)):
        out = model(T.tensor(x))
        out.pow(2).sum().backward()
        outputs.append((out.detach().numpy(), [p.grad.numpy() for p in model.parameters()]))
    np.testing.assert_allclose(outputs[0][0], outputs[1][0], rtol=1e-6, atol=1e-6)
    for a, b in zip(outputs[0][1], outputs[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("text", ACTIVATIONS)
def test_activation_modules(torch, text):
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    results = []
    for T in (symgrad, torch):
        module, t = build(T, text), T.tensor(x, requires_grad=True)
        y = module(t)
        (y * T.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))).sum().backward()
        results.append((repr(module), y.detach().numpy(), t.grad.numpy()))
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("text", LOSSES)
def test_loss_modules(torch, text):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 3)).astype(np.float32), rng.uniform(0, 1, (4, 3)).astype(np.float32)
    results = []
    for T in (symgrad, torch):
        with pytest.warns(UserWarning) if "size_average" in text else _nothing():
            module = build(T, text)
        a = T.tensor(x, requires_grad=True)
        loss = module(a, T.tensor(y))
        loss.backward()
        results.append((repr(module), module.reduction, loss.item(), a.grad.numpy()))
    assert results[0][:2] == results[1][:2]
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-5)
    np.testing.assert_allclose(results[0][3], results[1][3], rtol=1e-5, atol=1e-7)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_cross_entropy_and_nll_modules(torch):
    logits = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    target = np.array([1, 0, 4, 2])
    results = []
    for T in (symgrad, torch):
        z = T.tensor(logits, requires_grad=True)
        loss = T.nn.CrossEntropyLoss()(z, T.tensor(target)) + T.nn.NLLLoss(ignore_index=4)(z.log_softmax(1), T.tensor(target))
        loss.backward()
        results.append((loss.item(), z.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-7)


def test_a_module_list_prints_runs_of_equal_modules_once(torch):
    def lists(T):
        nn = T.nn
        yield nn.ModuleList()
        yield nn.ModuleList([nn.ReLU()])
        yield nn.ModuleList([nn.ReLU(), nn.Tanh(), nn.ReLU(), nn.ReLU()])
        yield nn.ModuleList([nn.Sequential(nn.Linear(1, 1), nn.ReLU()) for _ in range(3)] + [nn.Linear(1, 2)])
        yield nn.Sequential(nn.ModuleList([nn.Linear(2, 2) for _ in range(2)]), nn.Linear(2, 2))

    ours, theirs = [repr(m) for m in lists(symgrad)], [repr(m) for m in lists(torch)]
    assert ours == theirs
    assert "(0-2): 3 x Sequential(" in ours[3]


def test_load_state_dict_errors_list_everything_and_change_nothing(torch):
    reference = mlp(torch)
    ours = copied(torch, reference)
    before = {k: v.numpy().copy() for k, v in ours.state_dict().items()}
    bad = {"0.weight": np.ones((4, 2), np.float32), "zz": np.ones(1, np.float32)}
    messages = []
    for model, T in ((ours, symgrad), (reference, torch)):
        state = {**{k: T.tensor(v.detach().numpy()) for k, v in model.state_dict().items()},
                 **{k: T.tensor(v) for k, v in bad.items()}}
        del state["0.bias"]
        with pytest.raises(RuntimeError) as error:
            model.load_state_dict(state)
        messages.append(str(error.value))
        result = model.load_state_dict({k: T.tensor(v.detach().numpy()) for k, v in model.state_dict().items()
                                        if k != "0.bias"}, strict=False)
        messages.append((repr(result), list(result.missing_keys), list(result.unexpected_keys)))
    assert messages[0] == messages[2]
    assert messages[1] == messages[3]
    for key, value in ours.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key])


def test_a_batch_norm_count_missing_from_an_older_layout_keeps_the_modules_own(torch):
    """PyTorch's layout 1 of batch norm had no ``num_batches_tracked``: a dict without layout
    versions (built by hand) or of version 1 loads without it, keeping the module's count;
    a dict of layout 2 that lacks it is refused."""
    outcomes = []
    for T in (symgrad, torch):
        model = T.nn.Sequential(T.nn.Linear(2, 2), T.nn.BatchNorm1d(2))
        model[1].num_batches_tracked.fill_(5)
        plain = {k: v.clone() for k, v in model.state_dict().items() if "num_batches" not in k}
        plain["1.running_mean"] = T.tensor([1.0, 2.0])
        result = model.load_state_dict(plain)
        versioned = model.state_dict()
        del versioned["1.num_batches_tracked"]
        with pytest.raises(RuntimeError) as error:
            model.load_state_dict(versioned)
        versioned._metadata["1"]["version"] = 1
        older = model.load_state_dict(versioned, strict=False)
        outcomes.append((repr(result), str(error.value), list(older.missing_keys), model[1].num_batches_tracked.item(),
                         model[1].running_mean.tolist()))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][3] == 5 and outcomes[0][4] == [1.0, 2.0]


def test_registration_modes_hooks_and_buffers(torch):
    for T in (symgrad, torch):
        class Scaled(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = T.nn.Linear(2, 2)
                self.register_buffer("scale", T.tensor([2.0, 3.0]))
                self.register_buffer("scratch", T.zeros(1), persistent=False)

            def forward(self, x):
                return self.linear(x) * self.scale

        model = Scaled()
        assert list(model.state_dict()) == ["scale", "linear.weight", "linear.bias"]  # its own, then children's
        assert [n for n, _ in model.named_buffers()] == ["scale", "scratch"]
        assert model.training and all(m.training for m in model.modules())
        model.eval()
        assert not any(m.training for m in model.modules())
        calls = []
        handle = model.register_forward_hook(lambda m, args, out: calls.append(tuple(out.shape)))
        pre = model.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
        out = model(T.ones(3, 2))
        np.testing.assert_allclose(out.detach().numpy(), (model.linear.bias.detach() * model.scale).expand(3, 2).numpy())
        handle.remove()
        pre.remove()
        model(T.ones(1, 2))
        assert calls == [(3, 2)]
        with pytest.raises(TypeError):
            model.linear = T.ones(2)
        with pytest.raises(KeyError):
            model.register_buffer("a.b", T.ones(1))


def test_a_multi_line_extra_repr_prints_as_pytorchs(torch):
    """Was: a module without children joined its extra_repr's lines unindented, empty lines dropped."""
    def modules(T):
        class Lines(T.nn.Module):
            def extra_repr(self):
                return "a=1\n\nb=2"

        class LinesAndChild(Lines):
            def __init__(self):
                super().__init__()
                self.inner = Lines()

        return [Lines(), LinesAndChild(), T.nn.Sequential(Lines(), T.nn.Identity())]

    assert [repr(m) for m in modules(symgrad)] == [repr(m) for m in modules(torch)]


def test_a_parameter_prints_copies_and_pickles(torch):
    ours, theirs = symgrad.nn.Parameter(symgrad.ones(2)), torch.nn.Parameter(torch.ones(2))
    assert repr(ours) == repr(theirs)
    for copied_parameter in (copy.deepcopy(ours), pickle.loads(pickle.dumps(ours))):
        assert isinstance(copied_parameter, symgrad.nn.Parameter) and copied_parameter.is_leaf
        assert copied_parameter.requires_grad and copied_parameter.tolist() == [1.0, 1.0]
    frozen = symgrad.nn.Parameter(symgrad.ones(1), requires_grad=False)
    assert not frozen.requires_grad


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_and_value(torch, norm_type):
    grads = [np.array([3.0, -4.0], np.float32), np.array([[1.0, 12.0]], np.float32)]
    results = []
    for T in (symgrad, torch):
        params = [T.nn.Parameter(T.zeros(*g.shape)) for g in grads]
        for p, g in zip(params, grads):
            p.grad = T.tensor(g)
        total = T.nn.utils.clip_grad_norm_(params, 5.0, norm_type)
        clipped = [p.grad.numpy().copy() for p in params]
        T.nn.utils.clip_grad_value_(params, 0.5)
        results.append((total.item(), clipped, [p.grad.numpy() for p in params]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    for a, b in zip(results[0][1] + results[0][2], results[1][1] + results[1][2]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_seeded_linear_holds_pytorchs_weights(torch):
    for seed in (0, 7):
        symgrad.manual_seed(seed)
        torch.manual_seed(seed)
        ours, theirs = symgrad.nn.Linear(20, 5), torch.nn.Linear(20, 5)
        np.testing.assert_array_equal(ours.weight.detach().numpy(), theirs.weight.detach().numpy())
        np.testing.assert_array_equal(ours.bias.detach().numpy(), theirs.bias.detach().numpy())


def test_a_module_called_on_the_wrong_shape_names_itself_and_the_shapes():
    layer = symgrad.nn.Linear(3, 4)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x5 and 3x4\).*Linear"):
        layer(symgrad.ones(2, 5))


def test_flatten_and_unflatten(torch):
    shapes = []
    for T in (symgrad, torch):
        x = T.ones(3, 4, 5)
        shapes.append((tuple(T.nn.Unflatten(1, (2, -1))(x).shape), tuple(T.nn.Unflatten(-1, (5, 1))(x).shape),
                       tuple(T.nn.Flatten()(x).shape), tuple(T.nn.Flatten(0, 1)(x).shape),
                       repr(T.nn.Unflatten(1, (2, 2))), repr(T.nn.Flatten())))
    assert shapes[0] == shapes[1]


def test_a_seeded_convolutional_network_is_pytorchs(torch):
    """Conv, batch norm, pooling, layer norm, dropout and an embedding, seeded: PyTorch's reprs,
    state_dict keys, weights, outputs (train and eval), gradients and running statistics."""
    def build(T):
        T.manual_seed(0)
        return T.nn.Sequential(T.nn.Conv2d(3, 8, 3, stride=2, padding=1), T.nn.BatchNorm2d(8), T.nn.ReLU(),
                               T.nn.MaxPool2d(2), T.nn.Conv2d(8, 4, 1, bias=False), T.nn.AdaptiveAvgPool2d((1, 1)),
                               T.nn.Flatten(), T.nn.LayerNorm(4), T.nn.Dropout(0.1), T.nn.Linear(4, 2))

    results = []
    for T in (symgrad, torch):
        model = build(T)
        T.manual_seed(1)
        x = T.randn(2, 3, 16, 16)
        y = model(x)
        y.sum().backward()
        model.eval()
        embedding = T.nn.Embedding(10, 3, padding_idx=0)
        results.append((repr(model), list(model.state_dict()), repr(embedding), model[1].num_batches_tracked.item(),
                        y.detach().numpy(), model[0].weight.grad.numpy(), model[1].running_mean.numpy(),
                        model(x).detach().numpy(), embedding.weight.detach().numpy()))
    assert results[0][:4] == results[1][:4]
    for ours, theirs in zip(results[0][4:], results[1][4:]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_a_model_cast_mid_training_keeps_its_parameters(torch):
    """``model.double()`` between steps, ``model.float()`` later: each parameter (and its ``.grad``)
    is the same object with the new dtype, so the optimizer made before keeps training it; buffers
    are cast too; the optimizer's momentum buffers keep their dtype, as in-place writes keep it (was:
    new Parameter objects, and training silently stopped; then buffers turned float64, and the
    weights stayed float64 after ``float()``)."""
    def run(T):
        T.manual_seed(0)
        model = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.BatchNorm1d(4), T.nn.Linear(4, 1))
        optimizer = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        weight = model[0].weight
        x = T.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3))
        seen = []
        for step in range(16):
            if step == 6:
                model.double()
                x = x.double()
                seen.append((model[0].weight is weight, str(weight.dtype), str(weight.grad.dtype),
                             str(model[1].running_mean.dtype)))
            if step == 11:
                model.float()
                x = x.float()
            optimizer.zero_grad(set_to_none=False)
            loss = (model(x) ** 2).mean()
            loss.backward()
            optimizer.step()
            seen.append((loss.item(), str(weight.dtype), str(optimizer.state[weight]["momentum_buffer"].dtype)))
        return seen + [model[1].running_var.numpy()]

    ours, theirs = run(symgrad), run(torch)
    assert ours[6] == theirs[6] == (True, "torch.float64", "torch.float64", "torch.float64")
    # the momentum buffers stay float32 (written in place), the weights follow the casts
    assert [s[1:] for s in ours[:6] + ours[7:-1]] == [s[1:] for s in theirs[:6] + theirs[7:-1]]
    np.testing.assert_allclose([s[0] for s in ours[:6] + ours[7:-1]], [s[0] for s in theirs[:6] + theirs[7:-1]],
                               rtol=1e-5)
    np.testing.assert_allclose(ours[-1], theirs[-1], rtol=1e-5)
