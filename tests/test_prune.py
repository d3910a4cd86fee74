"""``nn.utils.prune`` against PyTorch: the Pruning tutorial's flow on a small LeNet (seeded alike),
comparing which entries every method prunes, the parameters, buffers and state_dict keys it
leaves, forward values and gradients through the pruned weights, iterative pruning, global and
custom pruning, ``remove``; ``topk``'s choice among equal values; PyTorch's errors."""
import numpy as np
import pytest

import symgrad
from symgrad.cpu_topk import kernel_topk


def _lenet(T):
    nn, F = T.nn, T.nn.functional

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 3)
            self.conv2 = nn.Conv2d(6, 16, 3)
            self.fc1 = nn.Linear(16 * 2 * 2, 20)
            self.fc2 = nn.Linear(20, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = x.view(-1, int(x.nelement() / x.shape[0]))
            return self.fc2(F.relu(self.fc1(x)))
    T.manual_seed(0)
    return LeNet()


def _names(pairs):
    return [name for name, _ in pairs]


def _tutorial(T):
    """The tutorial's steps; what each one shows, as plain values."""
    import torch.nn.utils.prune  # noqa: F401  (torch's is a submodule to import; symgrad's is imported)
    prune = T.nn.utils.prune
    seen = []
    model = _lenet(T)
    module = model.conv1
    x = T.arange(392.0).reshape(2, 1, 14, 14).sin()
    prune.random_unstructured(module, name="weight", amount=0.3)
    seen += [_names(module.named_parameters()), _names(module.named_buffers()), module.weight_mask.numpy()]
    prune.l1_unstructured(module, name="bias", amount=3)
    seen += [module.bias_mask.numpy(), [type(h).__name__ for h in module._forward_pre_hooks.values()]]
    prune.ln_structured(module, name="weight", amount=0.5, n=2, dim=0)
    hook = next(h for h in module._forward_pre_hooks.values() if h._tensor_name == "weight")
    seen += [module.weight_mask.numpy(), [type(m).__name__ for m in hook], list(model.state_dict().keys())]
    out = model(x)
    (out * T.arange(20.0).reshape(2, 10).cos()).sum().backward()
    seen += [out.detach().numpy(), module.weight_orig.grad.numpy(), module.bias_orig.grad.numpy(),
             model.fc1.weight.grad.numpy()]
    prune.remove(module, "weight")
    seen += [_names(module.named_parameters()), _names(module.named_buffers()), module.weight.detach().numpy(),
             prune.is_pruned(model), type(module.weight).__name__, module.weight.requires_grad]
    for _, sub in model.named_modules():  # pruning every layer by its kind
        if isinstance(sub, T.nn.Conv2d):
            prune.l1_unstructured(sub, name="weight", amount=0.2)
        elif isinstance(sub, T.nn.Linear):
            prune.l1_unstructured(sub, name="weight", amount=0.4)
    seen += [list(dict(model.named_buffers()).keys())]
    model = _lenet(T)  # global pruning
    parameters = ((model.conv1, "weight"), (model.conv2, "weight"), (model.fc1, "weight"), (model.fc2, "weight"))
    prune.global_unstructured(parameters, pruning_method=prune.L1Unstructured, amount=0.2)
    seen += [float((m.weight_mask.numpy() == 0).sum()) for m, _ in parameters]
    prune.random_structured(model.fc1, "weight", amount=3, dim=1)
    prune.ln_structured(model.conv2, "weight", amount=2, n=float("inf"), dim=1)
    prune.l1_unstructured(model.fc2, "bias", amount=0.25, importance_scores=T.arange(10.0).cos())
    prune.custom_from_mask(model.conv1, "bias", mask=T.tensor([0, 1, 0, 1, 1, 1]))
    seen += [model.fc1.weight_mask.numpy(), model.conv2.weight_mask.numpy(), model.fc2.bias_mask.numpy(),
             model.conv1.bias_mask.numpy()]

    class FooBarPruningMethod(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask
    FooBarPruningMethod.apply(model.fc2, "weight")
    FooBarPruningMethod.apply(model.fc2, "bias")
    seen += [model.fc2.weight_mask.numpy(), model.fc2.bias_mask.numpy(), sorted(model.state_dict().keys()),
             T.rand(3).numpy()]  # (the generator where PyTorch's is)
    return seen


def _same(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(a, np.ndarray):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        else:
            assert a == b or str(a).replace("symgrad", "torch") == str(b)


def test_the_tutorials_flow_prunes_what_pytorch_prunes(torch):
    _same(_tutorial(symgrad), _tutorial(torch))


def test_equal_values_are_chosen_as_pytorchs_kernel_chooses(torch):
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(1, 400))
        values = rng.integers(0, int(rng.integers(1, 5)), n).astype(np.float32)
        if trial % 4 == 0:
            values[rng.integers(0, n, size=2)] = np.nan
        k, largest = int(rng.integers(0, n + 1)), bool(trial % 2)
        expected = torch.topk(torch.from_numpy(values), k, largest=largest).indices.numpy()
        assert sorted(kernel_topk(values, k, largest)) == sorted(expected)
    values = np.zeros(5000, np.float32)  # a long run of ties: nth_element's heap fallback
    assert sorted(kernel_topk(values, 2500, False)) == sorted(torch.topk(torch.from_numpy(values), 2500,
                                                                          largest=False).indices.numpy())


def test_ties_in_a_layer_are_pruned_as_in_pytorch(torch):
    def masks(T):
        import torch.nn.utils.prune  # noqa: F401
        layer = T.nn.Linear(6, 4)
        with T.no_grad():
            layer.weight.copy_(T.tensor(np.round(np.sin(np.arange(24.0)).reshape(4, 6)).astype(np.float32)))
        T.nn.utils.prune.l1_unstructured(layer, "weight", amount=9)
        T.nn.utils.prune.l1_unstructured(layer, "weight", amount=5)
        T.nn.utils.prune.ln_structured(layer, "weight", amount=2, n=1, dim=0)
        return [layer.weight_mask.numpy()]
    _same(masks(symgrad), masks(torch))


def _error(call):
    with pytest.raises(Exception) as caught:
        call()
    return type(caught.value), str(caught.value)


def _errors(T):
    import torch.nn.utils.prune  # noqa: F401
    prune, nn = T.nn.utils.prune, T.nn
    layer = nn.Linear(3, 2)
    found = [_error(lambda: prune.l1_unstructured(layer, "weight", amount="0.3")),
             _error(lambda: prune.l1_unstructured(layer, "weight", amount=-1)),
             _error(lambda: prune.random_unstructured(layer, "weight", amount=1.5)),
             _error(lambda: prune.l1_unstructured(layer, "weight", amount=7)),
             _error(lambda: prune.ln_structured(layer, "bias", amount=1, n=2, dim=0)),
             _error(lambda: prune.random_structured(layer, "weight", amount=1, dim=2)),
             _error(lambda: prune.global_unstructured([(layer, "weight")], pruning_method=prune.LnStructured,
                                                      amount=1, n=2)),
             _error(lambda: prune.global_unstructured(3, pruning_method=prune.L1Unstructured, amount=1))]
    found.append([name for name, _ in layer.named_parameters()])  # a refused pruning leaves the layer as it was
    found.append(_error(lambda: prune.remove(nn.Linear(3, 2), "weight"))[0])
    found.append(_error(lambda: prune.PruningContainer(prune.Identity(), 3))[0])
    found.append(_error(lambda: prune.BasePruningMethod())[0])
    return found


def test_errors_are_pytorchs(torch):
    ours, theirs = _errors(symgrad), _errors(torch)
    assert [str(x).replace("symgrad", "torch") for x in ours] == [str(x) for x in theirs]
