"""nn.Module's full backward hooks and backward pre-hooks against PyTorch: when they run and in
which order, the gradients they see (values and None positions), replacements reaching ``.grad``,
handles, global hooks, create_graph, and PyTorch's warnings and errors."""
import warnings

import numpy as np
import pytest

import symgrad

OUTPUTS_ONLY = "Full backward hook is firing when gradients are computed with respect to module outputs"


def plain(value):
    """Tensors as (values, dtype name), tuples and lists element-wise: comparable across libraries."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if hasattr(value, "detach"):
        return (value.detach().numpy().astype(np.float64), str(value.dtype).split(".")[-1])
    return value


def assert_same(ours, theirs):
    if isinstance(ours, list):
        assert isinstance(theirs, list) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    elif isinstance(ours, tuple) and len(ours) == 2 and isinstance(ours[0], np.ndarray):
        assert ours[1] == theirs[1]
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-7)
    else:
        assert ours == theirs


def run_both(torch, scenario):
    assert_same(plain(scenario(symgrad)), plain(scenario(torch)))


class TwoInTwoOut:
    """A module of (a, a number, b) with two results: ``a * b * s`` and ``exp(a + b)``."""

    @staticmethod
    def make(T):
        class Two(T.nn.Module):
            def forward(self, a, s, b):
                return a * b * s, (a + b).exp()
        return Two()


def recorder(calls):
    def full(module, grad_input, grad_output):
        calls.append(("full", list(grad_input), list(grad_output)))

    def pre(module, grad_output):
        calls.append(("pre", list(grad_output)))
    return full, pre


def test_a_linear_layer_sees_its_gradients_and_the_output_has_pytorchs_grad_fn(torch):
    def scenario(T):
        T.manual_seed(0)
        calls = []
        lin = T.nn.Linear(3, 2)
        full, pre = recorder(calls)
        lin.register_full_backward_hook(full)
        lin.register_full_backward_pre_hook(pre)
        x = T.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], requires_grad=True)
        y = lin(x)
        (y * T.tensor([[1.0, 2.0]])).sum().backward()
        return [calls, x.grad, lin.weight.grad, type(y.grad_fn).__name__]
    run_both(torch, scenario)


def test_when_no_input_requires_grad_the_full_hook_runs_at_the_outputs_with_a_warning(torch):
    def scenario(T):
        T.manual_seed(0)
        calls = []
        lin = T.nn.Linear(2, 2)
        full, pre = recorder(calls)
        lin.register_full_backward_hook(full)
        lin.register_full_backward_pre_hook(pre)
        with pytest.warns(UserWarning, match=OUTPUTS_ONLY):
            lin(T.ones(1, 2)).sum().backward()
        lin.register_full_backward_hook(lambda m, gi, go: (T.ones(1, 2),))
        with pytest.raises(RuntimeError, match="Backward hook for Modules where no input requires gradient should "
                                               "always return None or None for all gradients."):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lin(T.ones(1, 2)).sum().backward()
        return [calls, lin.weight.grad]
    run_both(torch, scenario)


def test_two_inputs_one_without_grad_tuple_outputs_and_an_unused_output(torch):
    """grad_input: zeros for a tensor that needs no gradient (PyTorch materializes them, in its
    dtype), None for a number; grad_output: None for a result the loss does not use."""
    def scenario(T):
        calls = []
        m = TwoInTwoOut.make(T)
        full, pre = recorder(calls)
        m.register_full_backward_hook(full)
        m.register_full_backward_pre_hook(pre)
        a = T.tensor([1.0, 2.0], requires_grad=True)
        u, v = m(a, 3.0, T.tensor([0.5, -1.0]))
        u.sum().backward(retain_graph=True)
        (u.sum() + v.sum()).backward()
        n = m(a, 2.0, T.tensor([3, 4]))[0]  # an integer tensor: int64 zeros
        n.sum().backward()
        return [calls, a.grad, type(u.grad_fn).__name__, u.grad_fn is v.grad_fn]
    run_both(torch, scenario)


def test_replacements_reach_the_leaves(torch):
    """A full hook's grad_input reaches ``.grad`` (None: nothing reaches it); a pre-hook's grad_output
    flows into the module, even for a result the loss did not use; retain_grad keeps the gradient
    from before the pre-hooks."""
    def scenario(T):
        b = T.tensor([0.5, -1.0])
        grads = []
        for hook, kind in [(lambda m, gi, go: (gi[0] * 10, None, None), "full"),
                           (lambda m, gi, go: (None, None, None), "full"),
                           (lambda m, go: (go[0] * 2, T.ones(2)), "pre")]:
            a = T.tensor([1.0, 2.0], requires_grad=True)
            m = TwoInTwoOut.make(T)
            (m.register_full_backward_hook if kind == "full" else m.register_full_backward_pre_hook)(hook)
            u, v = m(a, 3.0, b)
            u.retain_grad()
            (u.sum() + v.sum() if kind == "full" else u.sum()).backward()
            grads += [a.grad, u.grad]
        return grads
    run_both(torch, scenario)


def test_hook_order_prepend_global_hooks_and_handles(torch):
    def scenario(T):
        calls = []
        lin = T.nn.Linear(2, 1)
        lin.register_full_backward_hook(lambda *a: calls.append("f1"))
        lin.register_full_backward_hook(lambda *a: calls.append("f0"), prepend=True)
        lin.register_full_backward_pre_hook(lambda *a: calls.append("p1"))
        lin.register_full_backward_pre_hook(lambda *a: calls.append("p0"), prepend=True)
        removed = lin.register_full_backward_hook(lambda *a: calls.append("removed"))
        removed.remove()
        every = T.nn.modules.module
        handles = [every.register_module_full_backward_hook(lambda *a: calls.append("global full")),
                   every.register_module_full_backward_pre_hook(lambda *a: calls.append("global pre"))]
        x = T.ones(1, 2, requires_grad=True)
        out = lin(x)
        for handle in handles:
            handle.remove()
        out.sum().backward()  # the hooks of the call: those registered when it ran
        late = lin.register_full_backward_hook(lambda *a: calls.append("late"))
        out = lin(x)
        late.remove()
        lin.register_full_backward_hook(lambda *a: calls.append("after the call"))
        out.sum().backward()
        return calls
    run_both(torch, scenario)


def test_nested_modules_run_outer_pre_hooks_first_and_outer_full_hooks_last(torch):
    def scenario(T):
        T.manual_seed(1)
        calls = []
        seq = T.nn.Sequential(T.nn.Linear(2, 3), T.nn.Tanh(), T.nn.Linear(3, 1))
        for name, module in seq.named_modules():
            module.register_full_backward_hook(lambda m, gi, go, name=name: calls.append(("full", name, gi[0])))
            module.register_full_backward_pre_hook(lambda m, go, name=name: calls.append(("pre", name, go[0])))
        x = T.tensor([[0.5, -1.0]], requires_grad=True)
        seq(x).sum().backward()
        return [calls, x.grad, seq[0].weight.grad]
    run_both(torch, scenario)


@pytest.mark.parametrize("how", ["backward", "autograd.grad"])
def test_hooks_under_create_graph(torch, how):
    """The hook's grad_input is a recorded gradient; what it returns is differentiated again."""
    def scenario(T):
        T.manual_seed(0)
        calls = []
        lin = T.nn.Linear(2, 1)
        lin.register_full_backward_hook(lambda m, gi, go: calls.append(list(gi)) or (gi[0] * gi[0],))
        x = T.tensor([[1.0, -2.0]], requires_grad=True)
        if how == "backward":
            lin(x).sum().backward(create_graph=True)
            g = x.grad
        else:
            (g,) = T.autograd.grad(lin(x).sum(), x, create_graph=True)
        (second,) = T.autograd.grad(g.sum(), lin.weight)
        return [calls, g, second, calls[0][0].requires_grad]
    run_both(torch, scenario)


def test_pytorchs_errors_and_warnings(torch):
    messages = []
    for T in (symgrad, torch):
        a = T.tensor([1.0, 2.0], requires_grad=True)
        b = T.tensor([0.5, -1.0])
        cases = [("full", lambda m, gi, go: (gi[0],), RuntimeError),
                 ("pre", lambda m, go: (go[0],), RuntimeError),
                 ("full", lambda m, gi, go: (T.ones(3), None, None), RuntimeError),
                 ("full", lambda m, gi, go: 5, TypeError)]
        for kind, hook, error in cases:
            m = TwoInTwoOut.make(T)
            (m.register_full_backward_hook if kind == "full" else m.register_full_backward_pre_hook)(hook)
            with pytest.raises(error) as raised:
                m(a, 3.0, b)[0].sum().backward()
            messages.append(str(raised.value))
        assert a.grad is None  # nothing half-updated

        class Returns(T.nn.Module):
            def forward(self, x):
                return {"y": x * 2}
        d = Returns()
        d.register_full_backward_hook(lambda *args: None)
        with pytest.warns(UserWarning, match="For backward hooks to be called, module output should be a Tensor or "
                                             "a tuple of Tensors but received <class 'dict'>"):
            assert isinstance(d(a), dict)
    assert messages[:4] == messages[4:]
    assert messages[0] == "Backward hook returned an invalid number of grad_input, got 1, but expected 3"
    assert messages[1] == "Backward pre hook returned an invalid number of grad_output, got 1, but expected 2"
    assert messages[2] == "hook 'hook' has changed the size of value"


def test_keyword_tensors_are_not_hooked_and_no_grad_calls_record_nothing(torch):
    def scenario(T):
        calls = []

        class Scaled(T.nn.Module):
            def forward(self, x, w=None):
                return x * w
        k = Scaled()
        full, _ = recorder(calls)
        k.register_full_backward_hook(full)
        x = T.tensor([[1.0, -2.0]], requires_grad=True)
        w = T.ones(1, 2, requires_grad=True)
        k(x, w=w).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            k(T.ones(1, 2), w=w).sum().backward()
        with T.no_grad():
            quiet = k(x, w=w)
        return [calls, x.grad, w.grad, quiet.grad_fn is None]
    run_both(torch, scenario)
