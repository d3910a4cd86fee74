"""Bad input fails at the user's line with PyTorch's exception class, naming op, shapes and
dtypes; afterwards the same tensors and a fresh graph keep working."""
import re

import numpy as np
import pytest

import symgrad
import symgrad as torch
import symgrad.nn.functional as F


def _fresh_graph_still_works(w):
    loss = (torch.matmul(torch.ones(5), w) ** 2).sum()
    loss.backward()
    assert w.grad is not None and np.all(np.isfinite(w.grad.numpy()))


def test_matmul_shape_mismatch_names_op_and_shapes():
    w = torch.randn(5, 3, requires_grad=True)
    with pytest.raises(RuntimeError) as error:
        torch.matmul(torch.ones(5), torch.randn(4, 3))
    message = str(error.value)
    assert "mat1 and mat2 shapes cannot be multiplied (1x5 and 4x3)" in message
    assert "matmul" in message and "(5,)" in message and "(4, 3)" in message and "torch.float32" in message
    _fresh_graph_still_works(w)


def test_broadcast_mismatch():
    with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size of tensor b \(4\)"):
        torch.ones(3) + torch.ones(4)


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        torch.tensor([1, 2], requires_grad=True)
    t = torch.tensor([1, 2])
    with pytest.raises(RuntimeError, match="floating point dtype can require gradients"):
        t.requires_grad_()
    assert not t.requires_grad  # nothing half-updated
    assert (t * 2).tolist() == [2, 4]


def test_second_backward_without_retain_graph():
    w = torch.randn(5, 3, requires_grad=True)
    loss = (torch.matmul(torch.ones(5), w) * 2).exp().sum()
    loss.backward()
    first = w.grad.numpy().copy()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), first)  # not accumulated by the failed call
    w.grad.zero_()
    _fresh_graph_still_works(w)


def test_backward_twice_through_ops_that_save_nothing_is_allowed(torch):
    """PyTorch only refuses when the freed graph saved tensors: y = x + 2 can go twice."""
    import symgrad
    x = symgrad.ones(3, requires_grad=True)
    y = (x + 2).sum()
    y.backward()
    y.backward()
    tx = torch.ones(3, requires_grad=True)
    ty = (tx + 2).sum()
    ty.backward()
    ty.backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


INDEX_AND_MASK_OPS = {
    "gather": lambda t, x: x.gather(0, t.tensor([0, 2])),
    "index_select": lambda t, x: x.index_select(0, t.tensor([0, 1])),
    "masked_fill": lambda t, x: x.masked_fill(t.tensor([True, False, True]), 0.0),
    "where": lambda t, x: t.where(t.tensor([True, False, True]), x, 0.0),
    "indexing": lambda t, x: x[t.tensor([0, 2])],
}


@pytest.mark.parametrize("name", sorted(INDEX_AND_MASK_OPS))
def test_backward_twice_through_an_op_that_keeps_its_index_or_mask_raises(torch, name):
    """PyTorch's backward keeps the index or mask, so a second backward after the graph was freed
    raises though no float tensor was saved (a fuzzer finding)."""
    import symgrad
    outcomes = []
    for module in (symgrad, torch):
        x = module.tensor([1.0, 3.0, 2.0], requires_grad=True)
        y = INDEX_AND_MASK_OPS[name](module, x).sum()
        y.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
        outcomes.append(x.grad.tolist())
    assert outcomes[0] == outcomes[1]


def test_gather_keeps_its_input_for_the_version_check(torch):
    """GatherBackward0 saves ``self``: writing it before backward raises as in PyTorch."""
    import symgrad
    for module in (symgrad, torch):
        x = module.ones(3, 5, requires_grad=True)
        y = module.gather(x, 1, module.zeros(2, 4, dtype=module.int64))
        with module.no_grad():
            x.fill_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_non_scalar_backward_needs_a_gradient():
    x = torch.randn(4, requires_grad=True)
    y = x ** 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    y.backward(torch.ones(4))  # the graph was not consumed by the failed call
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)


def test_backward_gradient_shape_must_match():
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(torch.ones(3))


def test_backward_on_a_tensor_that_does_not_require_grad():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        torch.ones(3).sum().backward()


def test_in_place_on_a_leaf_that_requires_grad():
    w = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w += 1
    assert w.is_leaf and w.tolist() == [1.0, 1.0, 1.0]


def test_bce_target_size_mismatch_is_a_value_error_as_in_pytorch():
    with pytest.raises(ValueError, match="Target size"):
        F.binary_cross_entropy_with_logits(torch.ones(3), torch.ones(5))


@pytest.mark.parametrize("bad", ["input", "target"])
def test_bce_input_and_target_outside_0_and_1_raise_as_in_pytorch(torch, bad):
    """Was (fuzzer): a target of 1.5 was computed with; PyTorch checks both, the input first."""
    import symgrad
    for module in (symgrad, torch):
        p = module.tensor([0.5, 1.5 if bad == "input" else 0.5])
        t = module.tensor([1.5 if bad == "target" else 0.5, 0.5])
        with pytest.raises(RuntimeError, match=f"all elements of {bad} should be between 0 and 1"):
            module.nn.functional.binary_cross_entropy(p, t)


def test_dimension_out_of_range():
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.ones(2, 3).sum(2)


def test_reshape_to_wrong_size():
    with pytest.raises(RuntimeError, match="invalid for input of size 6"):
        torch.ones(2, 3).reshape(4, 2)


def test_mean_of_integers():
    with pytest.raises(RuntimeError, match="mean"):
        torch.tensor([1, 2]).mean()


def test_keyword_spellings_and_broadcast_errors_are_pytorchs(torch):
    """flip(dims=), split(split_size=), concatenate(axis=); a broadcast mismatch is reported at the
    last dimension that mismatches, as PyTorch looks from the end (masked_fill, +, *)."""
    results = []
    for T in (symgrad, torch):
        x = T.tensor(np.arange(6.0).reshape(2, 3))
        values = [T.flip(x, dims=(0,)), x.flip(dims=[1]), x.flip(0, 1), T.concatenate([x, x], axis=1),
                  x.split(split_size=2, dim=1)[1], T.split(x, 2, 1)[0]]
        messages = []
        for bad in (lambda: x.masked_fill(T.ones(3, 2, dtype=T.bool), 0.0), lambda: T.ones(2, 3) + T.ones(3, 2),
                    lambda: T.ones(2, 3, 4) * T.ones(3, 2, 4)):
            with pytest.raises(RuntimeError) as error:
                bad()
            messages.append(str(error.value).split(" [")[0])
        results.append(([v.tolist() for v in values], messages))
    assert results[0] == results[1]


SMALL_REFUSALS = {  # (found by the normalization helper, session 29)
    "size(dim) past the last dim": lambda T: T.ones(3).size(1),
    "size(dim) before the first dim": lambda T: T.ones(2, 3).size(-3),
    "size(dim) of a 0-d tensor": lambda T: T.tensor(1.0).size(0),
    "batch_norm's weight of another size": lambda T: T.nn.functional.batch_norm(
        T.ones(2, 3, 4), T.zeros(3), T.ones(3), weight=T.ones(4)),
    "batch_norm's bias checked after its running stats": lambda T: T.nn.functional.batch_norm(
        T.ones(2, 3, 4), T.zeros(3), T.ones(4), weight=T.ones(3), bias=T.ones(5)),
    "batch_norm's running_mean in training": lambda T: T.nn.functional.batch_norm(
        T.ones(2, 3, 4), T.zeros(4), T.ones(3), training=True),
    "batch_norm of a 1-d input with running stats": lambda T: T.nn.functional.batch_norm(
        T.ones(3), T.zeros(3), T.ones(3)),
    "batch_norm of a 1-d input in training": lambda T: T.nn.functional.batch_norm(T.ones(3), None, None, training=True),
    "batch_norm of integers": lambda T: T.nn.functional.batch_norm(T.ones(2, 3, 4).long(), T.zeros(3), T.ones(3)),
    "layer_norm of integers": lambda T: T.nn.functional.layer_norm(T.ones(2, 3).long(), (3,)),
}


@pytest.mark.parametrize("name", list(SMALL_REFUSALS))
def test_small_refusals_raise_pytorchs_class_and_words(torch, name):
    with pytest.raises(Exception) as theirs:
        SMALL_REFUSALS[name](torch)
    with pytest.raises(type(theirs.value)) as ours:
        SMALL_REFUSALS[name](symgrad)
    assert re.sub(r" \[\w+: shapes .*\]$", "", str(ours.value)) == str(theirs.value).split("\n")[0]
