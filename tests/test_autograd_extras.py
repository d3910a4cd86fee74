"""Smaller autograd features against PyTorch: ``ctx.mark_dirty`` in custom Functions (the input is
the output, its version counts the write, its grad_fn becomes the call's), and ``autograd.grad``'s
deprecated ``only_inputs`` and dict ``inputs``."""
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import symgrad

X = [1.0, -2.0, 3.0]


def close(a, b):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-6, atol=1e-7)


def scale_in_place(T):
    class ScaleInPlace(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.mark_dirty(x)
            ctx.k = k
            return x.mul_(k)

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None
    return ScaleInPlace


def add_into(T):
    class AddInto(T.autograd.Function):
        @staticmethod
        def forward(ctx, buffer, w):
            ctx.mark_dirty(buffer)
            return buffer.add_(w), (w * 2).exp()

        @staticmethod
        def backward(ctx, g, h):
            return g, g * 2 + h
    return AddInto


def exp_saving_the_result(T):
    class ExpInPlace(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            x.exp_()
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y
    return ExpInPlace


def test_a_dirty_input_is_the_output_with_the_calls_grad_fn(torch):
    results = []
    for T in (symgrad, torch):
        a = T.tensor(X, requires_grad=True)
        x = a * 1
        start = x._version
        y = scale_in_place(T).apply(x, 3.0)
        facts = (y is x, x._version - start, type(x.grad_fn).__name__, x.requires_grad)
        (y * y).sum().backward()
        first = a.grad.clone()
        z = exp_saving_the_result(T).apply(a * 0.5)
        z.sum().backward()
        results.append((facts, y.detach().numpy(), first.numpy(), z.detach().numpy(), a.grad.numpy()))
    assert results[0][0] == results[1][0] == (True, 2, "ScaleInPlaceBackward", True)
    for ours, theirs in zip(results[0][1:], results[1][1:]):
        close(ours, theirs)


def test_a_buffer_without_grad_written_from_a_tensor_that_requires_it(torch):
    """The buffer becomes a non-leaf with the call's grad_fn; a second output is an ordinary one."""
    results = []
    for T in (symgrad, torch):
        w = T.tensor(X, requires_grad=True)
        buffer = T.zeros(3)
        y, e = add_into(T).apply(buffer, w)
        facts = (y is buffer, buffer.is_leaf, buffer.requires_grad, type(buffer.grad_fn).__name__, buffer._version)
        (y * T.tensor([1.0, 2.0, 3.0]) + e).sum().backward()
        results.append((facts, buffer.detach().numpy(), w.grad.numpy()))
    assert results[0][0] == results[1][0] == (True, False, True, "AddIntoBackward", 2)
    for ours, theirs in zip(results[0][1:], results[1][1:]):
        close(ours, theirs)


def test_a_dirty_view_writes_its_base_and_double_backward_goes_through(torch):
    results = []
    for T in (symgrad, torch):
        a = T.tensor(X, requires_grad=True)
        base = a * a
        scale_in_place(T).apply(base[:2], -2.0)
        (g,) = T.autograd.grad(base.sum(), a, create_graph=True)
        (h,) = T.autograd.grad((g * g).sum(), a)
        results.append((base.detach().numpy(), g.detach().numpy(), h.numpy(), type(base.grad_fn).__name__))
    for ours, theirs in zip(results[0][:3], results[1][:3]):
        close(ours, theirs)
    assert results[0][3] == results[1][3] == "CopySlices"


def test_without_grad_or_without_inputs_that_need_it(torch):
    for T in (symgrad, torch):
        fn = scale_in_place(T)
        plain = T.tensor(X)
        assert fn.apply(plain, 2.0) is plain and plain._version == 2 and not plain.requires_grad
        a = T.tensor(X, requires_grad=True)
        with T.no_grad():
            y = fn.apply(a, 2.0)  # a leaf that requires grad, written under no_grad: allowed
        assert y is not a and a._version == 2 and not y.requires_grad
        close(a.detach().numpy(), np.array(X) * 2)
        close(plain.numpy(), np.array(X) * 2)


def test_pytorchs_errors(torch):
    for T in (symgrad, torch):
        a = T.tensor(X, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place "
                                               "operation."):
            scale_in_place(T).apply(a, 2.0)
        assert a._version == 2  # PyTorch's forward wrote it before refusing
        close(a.detach().numpy(), np.array(X) * 2)

        class NotReturned(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x)
                x.mul_(2)
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g
        with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward method were not "
                                               "returned as output. The inputs that are modified inplace must all "
                                               "be outputs of the Function."):
            NotReturned.apply(a * 1)

        class Number(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x, 3)
                return x

            @staticmethod
            def backward(ctx, g):
                return g
        with pytest.raises(RuntimeError) as raised:
            Number.apply(a * 1)
        assert str(raised.value) == "mark_dirty can only accept variables, but argument "


def test_only_inputs_warns_as_pytorch_and_is_ignored(torch):
    seen = []
    for T in (symgrad, torch):
        x = T.tensor(X, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (quiet,) = T.autograd.grad((x * x).sum(), x, only_inputs=True)
            (loud,) = T.autograd.grad((x * x).sum(), x, only_inputs=False)
        seen.append([(w.category, str(w.message)) for w in caught])
        close(quiet.numpy(), loud.numpy())
        close(loud.numpy(), np.array(X) * 2)
        assert x.grad is None
    assert seen[0] == seen[1] == [(FutureWarning, "only_inputs argument is deprecated and is ignored now (defaults "
                                                  "to True). To accumulate gradient for other parts of the graph, "
                                                  "please use torch.autograd.backward.")]


def test_inputs_as_a_dict_and_pytorchs_errors(torch):
    results, messages = [], []
    for T in (symgrad, torch):
        T.manual_seed(0)
        lin = T.nn.Linear(3, 2)
        x = T.tensor([X], requires_grad=True)
        found = T.autograd.grad(lin(x).pow(2).sum(), dict(lin.named_parameters()))
        results.append({k: v.numpy() for k, v in found.items()})
        for bad, error in ((OrderedDict(lin.named_parameters()), TypeError), ([], RuntimeError)):
            with pytest.raises(error) as raised:
                T.autograd.grad(lin(x).sum(), bad)
            messages.append(str(raised.value))
    assert list(results[0]) == list(results[1]) == ["weight", "bias"]
    for key in results[0]:
        close(results[0][key], results[1][key])
    assert messages[:2] == messages[2:]
