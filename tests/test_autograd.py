"""PyTorch's autograd semantics, as the seeds use them, with PyTorch's numbers."""
import threading
import warnings

import numpy as np
import pytest

import symgrad as torch
import symgrad.nn.functional as F

pytestmark = pytest.mark.usefixtures("both_paths")  # each test on the fast and the plain path


def test_requires_grad_at_creation_and_later():
    x = torch.ones(3)
    assert not x.requires_grad and x.is_leaf and x.grad_fn is None
    w = torch.randn(3, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    x.requires_grad_(True)
    assert x.requires_grad and x.is_leaf
    y = x * w
    assert y.requires_grad and not y.is_leaf and type(y.grad_fn).__name__ == "MulBackward0"
    assert (torch.ones(2) * torch.ones(2)).requires_grad is False


def test_scalar_backward_fills_leaf_grads():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_vector_jacobian_product():
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x ** 2
    y.backward(torch.tensor([1.0, 0.5, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -2.0, 12.0])


def test_gradients_accumulate_and_zero():
    inp = torch.eye(3, requires_grad=True)
    out = (inp + 1).pow(2)
    out.backward(torch.ones_like(inp), retain_graph=True)
    first = inp.grad.numpy().copy()
    grad_object = inp.grad
    out.backward(torch.ones_like(inp), retain_graph=True)
    assert inp.grad is grad_object  # accumulated in place, as PyTorch does
    np.testing.assert_allclose(inp.grad.numpy(), 2 * first)
    inp.grad.zero_()
    np.testing.assert_allclose(inp.grad.numpy(), np.zeros((3, 3)))
    out.backward(torch.ones_like(inp))
    np.testing.assert_allclose(inp.grad.numpy(), first)
    np.testing.assert_allclose(first, 2 * (np.eye(3) + 1))


def test_grad_of_non_leaf_is_none_with_a_warning():
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert y.grad is None


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [6.0, 12.0])
    np.testing.assert_allclose(x.grad.numpy(), [18.0, 36.0])


def test_no_grad_results_do_not_require_grad():
    w = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        z = w * 2
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    assert not z.requires_grad and z.grad_fn is None and z.is_leaf


def test_no_grad_as_decorator_and_enable_grad_inside():
    w = torch.randn(3, requires_grad=True)

    @torch.no_grad()
    def frozen():
        with torch.enable_grad():
            inner = w * 2
        return w * 2, inner

    outer, inner = frozen()
    assert not outer.requires_grad and inner.requires_grad


def test_set_grad_enabled_call_and_context():
    w = torch.randn(2, requires_grad=True)
    with torch.set_grad_enabled(False):
        assert not (w * 1).requires_grad
    assert (w * 1).requires_grad
    torch.set_grad_enabled(False)
    try:
        assert not (w * 1).requires_grad
    finally:
        torch.set_grad_enabled(True)
    with torch.inference_mode():
        assert not (w * 1).requires_grad


def test_grad_mode_is_thread_local():
    seen = []

    def other_thread():
        seen.append(torch.is_grad_enabled())

    with torch.no_grad():
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert seen == [True]


def test_no_grad_in_a_worker_thread_stays_there():
    """The other direction: a thread's ``no_grad`` turns its own grad mode off, not the main
    thread's, and its results record no history while the main thread's do."""
    w, seen = torch.ones(2, requires_grad=True), []

    def worker():
        with torch.no_grad():
            seen.append((torch.is_grad_enabled(), (w * 2).requires_grad))
            entered.set()
            leave.wait()

    entered, leave = threading.Event(), threading.Event()
    thread = threading.Thread(target=worker)
    thread.start()
    entered.wait()
    seen.append((torch.is_grad_enabled(), (w * 2).requires_grad))
    leave.set()
    thread.join()
    assert seen == [(False, False), (True, True)]


def test_detach_shares_the_value_and_has_no_history():
    w = torch.randn(3, requires_grad=True)
    z = w * 2 + 1
    d = z.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    np.testing.assert_array_equal(d.numpy(), z.detach().numpy())
    (d * w).sum().backward()  # the detached factor is a constant
    np.testing.assert_allclose(w.grad.numpy(), d.numpy())


def test_detached_value_used_with_its_source_blocks_only_that_path():
    w = torch.tensor([2.0], requires_grad=True)
    y = w * w
    (y * y.detach()).sum().backward()  # d/dw (w^2 * c) with c = w^2 = 4 -> 2w * 4
    np.testing.assert_allclose(w.grad.numpy(), [16.0])


def test_requires_grad_false_on_a_leaf():
    a = torch.randn(2, requires_grad=True)
    a.requires_grad_(False)
    assert not a.requires_grad
    assert "requires_grad" not in repr(a)


def _train(T):
    """The same manual SGD loop, on symgrad or on PyTorch (``T`` is the module)."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((64, 3)).astype(np.float32)
    labels = (data @ np.array([1.0, -2.0, 0.5]) > 0).astype(np.float32)
    xs, ys = T.tensor(data), T.tensor(labels)
    w = T.zeros(3, requires_grad=True)
    b = T.zeros(1, requires_grad=True)
    losses = []
    for _ in range(50):
        loss = T.nn.functional.binary_cross_entropy_with_logits(xs @ w + b, ys)
        loss.backward()
        with T.no_grad():
            w -= 0.5 * w.grad
            b.sub_(0.5 * b.grad)
        w.grad.zero_()
        b.grad.zero_()
        losses.append(loss.item())
    return losses, w.detach().numpy()


def test_manual_sgd_loop_trains():
    losses, _ = _train(torch)
    assert losses[-1] < losses[0] * 0.5
    np.testing.assert_allclose(losses[0], np.log(2), rtol=1e-6)


def test_sgd_loop_matches_pytorch(torch):
    import symgrad
    ours, w = _train(symgrad)
    theirs, tw = _train(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(w, tw, rtol=1e-5, atol=1e-6)


def test_dynamic_graph_with_python_control_flow():
    x = torch.tensor([0.5, -1.5], requires_grad=True)
    for step in range(4):
        y = x * 2 if step % 2 == 0 else x.exp()
        if y.sum().item() > 0:
            y = y * y
        y.sum().backward()
    assert x.grad is not None
    expected = np.zeros(2)
    xv = np.array([0.5, -1.5])
    for step in range(4):
        if step % 2 == 0:
            y = xv * 2
            expected += 8 * xv if y.sum() > 0 else 2
        else:
            y = np.exp(xv)
            expected += 2 * np.exp(2 * xv) if y.sum() > 0 else np.exp(xv)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_values_printed_before_an_in_place_update_are_kept():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    z = w * 10
    with torch.no_grad():
        w += 1
    np.testing.assert_allclose(z.detach().numpy(), [10.0, 20.0])  # computed from the old w
    np.testing.assert_allclose(w.detach().numpy(), [2.0, 3.0])
    assert w.is_leaf and w.requires_grad


def test_in_place_on_non_leaf_records_history():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y += x
    assert type(y.grad_fn).__name__ == "AddBackward0"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_float64_and_promotion_follow_pytorch():
    a = torch.ones(2, dtype=torch.float64)
    assert (a * 2).dtype is torch.float64
    assert (torch.ones(2) * torch.ones(2, dtype=torch.float64)).dtype is torch.float64
    assert (torch.ones(2) * torch.tensor(2.0, dtype=torch.float64)).dtype is torch.float32  # 0-dim
    assert (torch.tensor([1, 2]) * 1.5).dtype is torch.float32
    assert (torch.tensor([1, 2]) / torch.tensor([2, 2])).dtype is torch.float32
    np.testing.assert_allclose((torch.tensor([1, 2]) / 2).numpy(), [0.5, 1.0])


def test_item_tolist_numpy_shape_T():
    w = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert w.shape == (2, 2) and repr(w.shape) == "torch.Size([2, 2])"
    assert w.T.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert (w.sum() * 1).item() == 10.0
    with pytest.raises(RuntimeError, match="requires grad"):
        w.numpy()
    assert w.detach().numpy().dtype == np.float32


def test_mean_with_dim_and_keepdim():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    m = x.mean(dim=1, keepdim=True)
    assert m.shape == (2, 1) and type(m.grad_fn).__name__ == "MeanBackward1"
    np.testing.assert_allclose(m.detach().numpy(), [[2.0], [5.0]])
    (m * torch.tensor([[1.0], [2.0]])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1 / 3] * 3, [2 / 3] * 3], rtol=1e-6)


def test_bce_with_logits_is_stable_at_large_logits():
    z = torch.tensor([100.0, -100.0, 0.0], requires_grad=True)
    y = torch.tensor([0.0, 1.0, 1.0], requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(z, y)
    np.testing.assert_allclose(loss.item(), (100 + 100 + np.log(2)) / 3, rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(z.grad.numpy(), [1 / 3, -1 / 3, -1 / 6], rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), [-100 / 3, 100 / 3, 0.0], rtol=1e-6)
    assert np.all(np.isfinite(z.grad.numpy()))


def test_user_warning_free_leaf_grad_access():
    w = torch.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert w.grad is None


def test_basic_indexing_matches_pytorch(torch):
    import symgrad
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    keys = [0, (slice(None), 1), (0, slice(1, 3)), (Ellipsis, 2), (1, None), (slice(None, None, 2),), (-1, -1, -1)]
    for key in keys:
        ours = symgrad.tensor(values, requires_grad=True)
        theirs = torch.tensor(values, requires_grad=True)
        o, t = ours[key], theirs[key]
        assert repr(o) == repr(t), key
        (o * o).sum().backward()
        (t * t).sum().backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6)
    assert [r.tolist() for r in symgrad.tensor([[1.0, 2.0], [3.0, 4.0]])] == [[1.0, 2.0], [3.0, 4.0]]


def test_indexing_second_derivatives_and_bad_indices():
    x = torch.tensor(np.linspace(-1, 1, 12).reshape(3, 4), dtype=torch.float64, requires_grad=True)
    assert torch.gradgradcheck(lambda x: torch.tanh(x[1:, ::2]) * x[0, :2], (x,))
    with pytest.raises(IndexError, match="out of bounds"):
        x[3]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]


def test_backward_inputs_may_be_one_tensor_but_not_empty():
    w = torch.ones(3, requires_grad=True)
    v = torch.ones(3, requires_grad=True)
    (w * v * 2).sum().backward(inputs=w)  # as PyTorch: one tensor, not a list
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0, 2.0])
    assert v.grad is None
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (w * 2).sum().backward(inputs=[])
