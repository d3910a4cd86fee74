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
