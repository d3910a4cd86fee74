"""torch.optim.SGD: PyTorch's numbers, one compiled program per step, no growing state."""
import numpy as np
import pytest

import codegen
import symgrad

SETTINGS = [{}, {"momentum": 0.9}, {"momentum": 0.9, "weight_decay": 0.01}, {"momentum": 0.9, "nesterov": True},
            {"momentum": 0.5, "dampening": 0.1}, {"maximize": True}]


def _train(T, steps=40, **settings):
    rng = np.random.default_rng(0)
    w0, b0 = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    x, y = T.ones(5), T.zeros(3)
    w, b = T.tensor(w0, requires_grad=True), T.tensor(b0, requires_grad=True)
    optimizer = T.optim.SGD([w, b], lr=0.1, **settings)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = T.nn.functional.binary_cross_entropy_with_logits(T.matmul(x, w) + b, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses), w.detach().numpy(), b.detach().numpy()


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(s) or "plain")
def test_sgd_matches_pytorch(settings, torch):
    ours, theirs = _train(symgrad, **settings), _train(torch, **settings)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_momentum_state_does_not_grow_and_steps_hit_the_cache():
    _train(symgrad, steps=5, momentum=0.9)
    compiles = codegen.stats.compiles
    _train(symgrad, steps=60, momentum=0.9)
    assert codegen.stats.compiles == compiles


def test_zero_grad_sets_to_none_and_step_skips_parameters_without_grad():
    w = symgrad.ones(3, requires_grad=True)
    unused = symgrad.ones(2, requires_grad=True)
    optimizer = symgrad.optim.SGD([w, unused], lr=0.5)
    (w * 2).sum().backward()
    optimizer.step()
    assert w.tolist() == [0.0, 0.0, 0.0] and unused.tolist() == [1.0, 1.0]
    optimizer.zero_grad()
    assert w.grad is None


def test_closure_and_bad_arguments():
    w = symgrad.tensor([3.0], requires_grad=True)
    optimizer = symgrad.optim.SGD([w], lr=0.25)

    def closure():
        optimizer.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    assert optimizer.step(closure).item() == 9.0 and w.tolist() == [1.5]
    with pytest.raises(ValueError, match="can.t optimize a non-leaf Tensor"):  # PyTorch's words
        symgrad.optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="Nesterov"):
        symgrad.optim.SGD([w], lr=0.1, nesterov=True)
