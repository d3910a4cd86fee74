"""Tensor hooks against PyTorch: register_hook on leaves and intermediates (replacing the gradient
or only looking), handles, retain_grad interplay, post-accumulate hooks, and PyTorch's errors."""
import numpy as np
import pytest

import symgrad

X = [1.0, 2.0, 3.0]


def run_both(torch, scenario):
    results = [scenario(T) for T in (symgrad, torch)]
    assert len(results[0]) == len(results[1])
    for a, b in zip(*results):
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=1e-6)
    return results[0]


def test_hooks_on_a_leaf_and_an_intermediate_with_retain_grad(torch):
    def scenario(T):
        x = T.tensor(X, requires_grad=True)
        x.register_hook(lambda g: g * 10)
        z = x * 3
        z.retain_grad()
        z.register_hook(lambda g: g + 1)  # retain_grad's .grad sees what the hook returned
        (z * z).sum().backward()
        return x.grad.numpy(), z.grad.numpy()
    run_both(torch, scenario)


def test_hooks_run_nearest_the_root_first_and_see_total_gradients(torch):
    def scenario(T):
        seen = []
        x = T.tensor(X, requires_grad=True)
        h = x * 3
        w = h.exp() * h  # h reaches the loss two ways: its hook sees the sum
        w.register_hook(lambda g: seen.append(("w", g.numpy().copy())))
        h.register_hook(lambda g: (seen.append(("h", g.numpy().copy())), g * 0.5)[1])
        (w.sum() + (x ** 2).sum()).backward()
        return [x.grad.numpy()] + [s[1] for s in seen] + [np.array([s[0] == n for s, n in zip(seen, "wh")])]
    run_both(torch, scenario)


def test_handles_remove_hooks_and_work_as_context_managers(torch):
    def scenario(T):
        x = T.tensor(X, requires_grad=True)
        handle = x.register_hook(lambda g: g * 100)
        handle.remove()
        with x.register_hook(lambda g: g * 2):
            (x * x).sum().backward()
        first = x.grad.numpy().copy()
        (x * x).sum().backward()
        return first, x.grad.numpy()
    run_both(torch, scenario)


def test_post_accumulate_grad_hooks_see_the_accumulated_grad(torch):
    def scenario(T):
        seen = []
        x = T.tensor(X, requires_grad=True)
        x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
        for _ in range(2):
            (x * x).sum().backward()
        T.autograd.grad((x * x).sum(), x)  # accumulates nothing: no post hook
        return seen
    run_both(torch, scenario)


def test_an_optimizer_step_in_a_post_accumulate_hook_follows_the_parameter(torch):
    def scenario(T):
        w = T.tensor(X, requires_grad=True)

        def step(p):
            with T.no_grad():
                p -= 0.1 * p.grad
            p.grad = None
        w.register_post_accumulate_grad_hook(step)
        for _ in range(3):
            (w ** 2).sum().backward()
        return [w.detach().numpy()]
    run_both(torch, scenario)


def test_pytorchs_errors(torch):
    for T in (symgrad, torch):
        x = T.tensor(X, requires_grad=True)
        with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
            T.ones(2).register_hook(print)
        with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf"):
            (x * 2).register_post_accumulate_grad_hook(print)
        y = x * 2
        y.register_hook(lambda g: T.ones(2))
        with pytest.raises(RuntimeError, match="hook '<lambda>' has changed the size of value"):
            y.sum().backward()
        assert x.grad is None  # nothing half-updated
        z = x * 2
        z.register_hook(lambda g: 3)
        with pytest.raises(TypeError, match="expected Variable, but hook returned 'int'"):
            z.sum().backward()
        (x * 2).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_assigning_a_non_tensor_grad(torch):
    for T in (symgrad, torch):
        x = T.tensor(X, requires_grad=True)
        with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None but got grad of type int"):
            x.grad = 3
        with pytest.raises(RuntimeError, match=r"attempting to assign a gradient of size '\[2\]' to a tensor of size"):
            x.grad = T.ones(2)


def _hooked_create_graph(T, case):
    """Hooks under ``create_graph``: replacing an intermediate's gradient, watching one, and a leaf's."""
    x = T.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = T.tensor([1.5, 0.5, -0.25], requires_grad=True)
    seen, post = [], []
    h = x * w
    if case in ("intermediate", "both"):
        h.register_hook(lambda g: g.clamp(-1, 2.5) * 3)
    u = h.sin()
    u.register_hook(lambda g: seen.append(g.detach().clone()))
    if case in ("leaf", "both"):
        x.register_hook(lambda g: g * g + 1)
        x.register_post_accumulate_grad_hook(lambda t: post.append(t.grad.detach().clone()))
    loss = (u * u).sum() + (h * 2).sum()
    if case == "autograd.grad":
        h.register_hook(lambda g: g * 0.5)
        gx, gw = T.autograd.grad(loss, [x, w], create_graph=True)
    else:
        loss.backward(create_graph=True)
        gx, gw = x.grad, w.grad
    assert gx.requires_grad
    return [gx, gw, *seen, *post]


@pytest.mark.parametrize("case", ["none", "intermediate", "leaf", "both", "autograd.grad"])
def test_hooks_run_under_create_graph(case, torch):
    """Was: backward(create_graph=True) ran no hook at all."""
    ours, theirs = _hooked_create_graph(symgrad, case), _hooked_create_graph(torch, case)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)
