"""inference_mode as PyTorch has it (issue 12): inference tensors, and what PyTorch refuses of them."""
import numpy as np
import pytest

import symgrad


def _flags(T):
    x = T.ones(3, requires_grad=True)
    n = T.ones(3)
    with T.inference_mode():
        a, b, view_of_normal, d = T.ones(3), x * 2, n.view(3), n + 1
        n.add_(1)  # a normal tensor written in place inside the mode stays normal
        inside = (T.is_inference_mode_enabled(), T.is_grad_enabled())
        with T.inference_mode(False):
            nested = (T.is_inference_mode_enabled(), T.is_grad_enabled(), T.ones(1).is_inference())
    with T.no_grad(), T.inference_mode(False):
        turned_on = T.is_grad_enabled()
    after = (T.is_inference_mode_enabled(), T.is_grad_enabled())

    @T.inference_mode()
    def made():
        return T.ones(2)

    (a + x).sum().backward()  # add keeps nothing: allowed
    return dict(made=[t.is_inference() for t in (a, b, view_of_normal, d, n, x)], b_requires=b.requires_grad,
                inside=inside, nested=nested, turned_on=turned_on, after=after, decorated=made().is_inference(),
                derived=[(a * 2).is_inference(), a.clone().is_inference(), a.view(3).is_inference(),
                         a.detach().is_inference(), a[0].is_inference()],
                n=n.tolist(), version=n._version, grad=x.grad.tolist())


def test_inference_tensors_are_pytorchs(torch):
    assert _flags(symgrad) == _flags(torch)


def _saved(T, a, x):
    (a * x).sum().backward()


def _written(T, a, x):
    a.add_(1)


def _written_under_no_grad(T, a, x):
    with T.no_grad():
        a.mul_(2)


def _written_through_a_view(T, a, x):
    a[0] = 5.0


def _requires_grad(T, a, x):
    a.requires_grad_()


@pytest.mark.parametrize("use", [_saved, _written, _written_under_no_grad, _written_through_a_view, _requires_grad],
                         ids=lambda f: f.__name__.strip("_"))
def test_refusals_outside_the_mode(use, torch):
    messages = []
    for T in (torch, symgrad):
        x = T.ones(3, requires_grad=True)
        with T.inference_mode():
            a = T.ones(3)
        with pytest.raises(RuntimeError) as error:
            use(T, a, x)
        messages.append(str(error.value))
    assert a.tolist() == [1.0, 1.0, 1.0] and x.grad is None  # symgrad refuses before it writes (PyTorch may not)
    assert messages[1].startswith(messages[0][:60])


def test_a_model_evaluated_in_inference_mode_keeps_training():
    """An evaluation under inference_mode between training steps changes nothing of training."""
    symgrad.manual_seed(0)
    lin = symgrad.nn.Linear(4, 2)
    x = symgrad.tensor(np.ones((3, 4), np.float32))
    with symgrad.inference_mode():
        before = lin(x)
    assert before.is_inference() and not before.requires_grad and not lin.weight.is_inference()
    lin(x).sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.full((2, 4), 3.0, np.float32))
