"""torch.autograd.Function against PyTorch: the user's backward traced into the symbolic program
(numbers, double backward, compiled once), ctx's API, and PyTorch's errors for a bad backward."""
import numpy as np
import pytest

import symgrad
from codegen.compile import stats

X = np.array([0.5, -1.0, 2.0], np.float32)


def close(ours, theirs, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=atol)


def legendre(T):
    class Legendre(T.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)
    return Legendre


def scaled_product(T):
    """Two tensors and a number in, two outputs (one marked non-differentiable), setup_context form."""
    class ScaledProduct(T.autograd.Function):
        @staticmethod
        def forward(x, w, scale):
            return x * w * scale, (x > 0).to(x.dtype)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, w, scale = inputs
            ctx.save_for_backward(x, w)
            ctx.scale = scale
            ctx.mark_non_differentiable(output[1])
            ctx.set_materialize_grads(False)

        @staticmethod
        def backward(ctx, grad, _):
            x, w = ctx.saved_tensors
            gx = grad * w * ctx.scale if ctx.needs_input_grad[0] else None
            gw = (grad * x * ctx.scale).sum(0) if ctx.needs_input_grad[1] else None
            return gx, gw, None
    return ScaledProduct


def test_first_and_higher_derivatives_match_pytorch(torch):
    results = []
    for T in (symgrad, torch):
        x = T.tensor(X, requires_grad=True)
        y = legendre(T).apply(x * 2)
        (g,) = T.autograd.grad((y * y).sum(), x, create_graph=True)
        (h,) = T.autograd.grad(g.sum(), x)
        results.append((y.detach().numpy(), g.detach().numpy(), h.numpy(), type(y.grad_fn).__name__,
                        y.grad_fn.name(), y.requires_grad, type(g.grad_fn).__name__))
    for a, b in zip(results[0][:3], results[1][:3]):
        close(a, b)
    assert results[0][3:] == results[1][3:] == ("LegendreBackward", "LegendreBackward", True, "MulBackward0")


def test_several_inputs_and_outputs_ctx_and_needs_input_grad(torch):
    results = []
    for T in (symgrad, torch):
        x = T.tensor([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]], requires_grad=True)
        w = T.tensor([2.0, 3.0, -1.0], requires_grad=True)
        fn = scaled_product(T)
        y, mask = fn.apply(x, w, 3.0)
        (y * mask + y).sum().backward()
        frozen = T.tensor([1.0, 1.0, 1.0])
        z, _ = fn.apply(x, frozen, 2.0)
        (gx,) = T.autograd.grad(z.sum(), x)
        results.append((y.detach().numpy(), mask.numpy(), x.grad.numpy(), w.grad.numpy(), gx.numpy(),
                        mask.requires_grad, y.grad_fn is z.grad_fn, len(y.grad_fn.next_functions)))
    for a, b in zip(results[0][:5], results[1][:5]):
        close(a, b)
    assert results[0][5:] == results[1][5:]


def test_outputs_without_grad_and_the_forward_under_no_grad(torch):
    for T in (symgrad, torch):
        seen = []

        class Probe(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                seen.append(T.is_grad_enabled())
                return x.exp()

            @staticmethod
            def backward(ctx, g):
                return g
        plain = Probe.apply(T.tensor(X))
        with T.no_grad():
            inside = Probe.apply(T.tensor(X, requires_grad=True))
        assert seen == [False, False]
        assert not plain.requires_grad and plain.grad_fn is None and inside.grad_fn is None
        close(plain.numpy(), np.exp(X))


def test_an_intermediate_kept_on_ctx_and_read_later_leaves_the_recorded_graph_whole(torch):
    """Reading ``ctx.h`` computes h; the call's recorded forward, lowered again by each later
    program, must not lose the ops that made it (a computed node without history forgets them)."""
    results = []
    for T in (symgrad, torch):
        class Kept(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                ctx.h = h = x * 3
                return h.sin()

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * (3 * x).cos() * 3
        x = T.tensor(X, requires_grad=True)
        y = Kept.apply(x * 2)
        y.sum().backward(retain_graph=True)
        kept = (y.grad_fn.h + 1).numpy()
        (g,) = T.autograd.grad(y.sum(), x, create_graph=True)
        (h,) = T.autograd.grad(g.sum(), x)
        results.append((kept, y.detach().numpy(), x.grad.numpy(), g.detach().numpy(), h.numpy()))
    for a, b in zip(*results):
        close(a, b)


def test_a_node_with_a_dead_nodes_id_is_set_aside_in_recording_order():
    """A dict keeps a reused key where it was first put: a node given a dead node's id came first
    among the results set aside, the same step's program got its outputs in another order, another
    cache key and a second compile (test_carried_values' weight_average, now and then in CI)."""
    from symgrad import nodes
    w = symgrad.tensor(X, requires_grad=True)._node
    with symgrad.no_grad():
        first, second = (symgrad.tensor(X) * 2)._node, (symgrad.tensor(X) * 3)._node
    saved = dict(nodes.aside)
    nodes.aside.clear()
    try:
        nodes.aside[id(second)] = lambda: None  # a dead node's weak reference, under the id second now has
        nodes.set_aside(first, (w,))
        nodes.set_aside(second, (w,))
        assert nodes.taken_aside() == [first, second]
    finally:
        nodes.aside.clear()
        nodes.aside.update(saved)


def test_a_dead_nodes_id_does_not_set_a_new_node_aside():
    """``nodes.aside`` is keyed by id, which a new node can share with a dead one."""
    from symgrad import nodes
    a = symgrad.tensor(X)._node
    nodes.aside[id(a)] = lambda: None  # a dead weak reference left under a's id
    try:
        b = (symgrad.tensor(X) * 2)._node
        nodes.set_aside(b, (a,))
        assert id(b) not in nodes.aside
    finally:
        nodes.aside.pop(id(a), None)


def test_gradcheck_catches_a_wrong_backward(torch):
    class Wrong(symgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos() * 1.01  # one percent off
    x = symgrad.tensor(X.astype(np.float64), requires_grad=True)
    assert symgrad.gradcheck(legendre(symgrad).apply, (x,))
    assert symgrad.gradgradcheck(legendre(symgrad).apply, (x,))
    assert not symgrad.gradcheck(Wrong.apply, (x,), raise_exception=False)
    with pytest.raises(symgrad.autograd.GradcheckError, match="Jacobian mismatch"):
        symgrad.autograd.gradcheck(Wrong.apply, (x,))


def _train(T, steps=6):
    fn = legendre(T)
    w = T.tensor(X, requires_grad=True)
    compiles = []
    for _ in range(steps):
        loss = fn.apply(w * 0.5).pow(2).sum()
        loss.backward()
        with T.no_grad():
            w -= 0.01 * w.grad
        w.grad.zero_()
        compiles.append(stats.compiles)
    return w.detach().numpy(), compiles


def test_a_training_loop_through_a_custom_function_compiles_once_on_both_paths(torch):
    fast, compiles = _train(symgrad)
    with symgrad.plain_path():
        plain, _ = _train(symgrad)
    theirs, _ = _train(torch)
    assert compiles[-1] == compiles[1]
    np.testing.assert_array_equal(fast, plain)
    close(fast, theirs)


def test_compiled_value_and_grad_traces_the_users_backward():
    fn = legendre(symgrad)
    value, grad = symgrad.value_and_grad(lambda x: fn.apply(x).sum())(X)
    close(value, (0.5 * (5 * X ** 3 - 3 * X)).sum())
    close(grad, 1.5 * (5 * X ** 2 - 1))


def _bad(T, backward, n_inputs=2):
    class Bad(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, *rest):
            return x * y

    Bad.backward = staticmethod(backward)
    return Bad


BAD_BACKWARDS = {
    "too few gradients": (lambda ctx, g: g, "incorrect number of gradients"),
    "too many gradients": (lambda ctx, g: (g, g, g), "incorrect number of gradients"),
    "a wrong shape": (lambda ctx, g: (g[0], g), "invalid gradient at index 0"),
}


@pytest.mark.parametrize("case", list(BAD_BACKWARDS))
def test_a_bad_backward_raises_pytorchs_error_at_backward_and_leaves_tensors_usable(torch, case):
    backward, pattern = BAD_BACKWARDS[case]
    messages = []
    for T in (symgrad, torch):
        x = T.ones(2, 3, requires_grad=True)
        y = T.full((2, 3), 2.0, requires_grad=True)
        out = _bad(T, backward).apply(x, y)  # the error waits for backward, as in PyTorch
        with pytest.raises(RuntimeError, match=pattern) as error:
            out.sum().backward()
        messages.append(str(error.value))
        assert x.grad is None
        (x * y).sum().backward()
        close(x.grad.numpy(), np.full((2, 3), 2.0))
    assert messages[0] == messages[1]


def test_a_gradient_for_a_number_and_a_broadcast_gradient(torch):
    messages, grads = [], []
    for T in (symgrad, torch):
        class Between(T.autograd.Function):  # a number between two tensors
            @staticmethod
            def forward(ctx, x, factor, y):
                return x * factor * y

            @staticmethod
            def backward(ctx, g):
                return g * 2, None, g * 3

        class Scale(T.autograd.Function):
            @staticmethod
            def forward(ctx, x, factor):
                return x * factor

            @staticmethod
            def backward(ctx, g):
                return g * 2, g

        class Broadcast(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.sum(0)

            @staticmethod
            def backward(ctx, g):
                return g.expand(4, 2, 3) if hasattr(g, "expand") else g

        x = T.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError) as error:
            Scale.apply(x, 2.0).sum().backward()
        messages.append(str(error.value))
        Broadcast.apply(x).sum().backward()
        grads.append(x.grad.numpy().copy())  # PyTorch's numpy() shares the .grad that backward adds into
        y = T.ones(2, 3, requires_grad=True)
        Between.apply(x, 5.0, y).sum().backward()
        grads += [x.grad.numpy(), y.grad.numpy()]
    assert messages[0] == messages[1]
    for a, b in zip(grads[:3], grads[3:]):
        close(a, b)


def test_backward_cannot_read_the_values_of_grad_output():
    class Reads(symgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * g.sum().item()
    y = Reads.apply(symgrad.tensor(X, requires_grad=True))
    with pytest.raises(RuntimeError, match="traced symbolically"):
        y.sum().backward()


def test_saved_tensors_are_freed_by_backward(torch):
    for T in (symgrad, torch):
        x = T.tensor(X, requires_grad=True)
        y = legendre(T).apply(x)
        assert len(y.grad_fn.saved_tensors) == 1
        y.sum().backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.grad_fn.saved_tensors
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.sum().backward()


def nested(T, argument, seen):
    """A Function whose backward calls another Function on what it saved (``argument`` picks which:
    the input, a value computed from it, or a detached copy).  The inner one's backward is not the
    true derivative (5x, where x**3 gives 3x**2), so a second derivative shows which was used."""
    class Inner(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            seen.append(ctx.needs_input_grad)
            return x ** 3

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 5 * x

    class Outer(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return Inner.apply(argument(x)) * grad_output + x * grad_output
    return Outer


@pytest.mark.parametrize("argument", [lambda x: x, lambda x: x * 2 - 1, lambda x: x.detach()],
                         ids=["saved input", "computed from it", "detached"])
def test_a_function_called_by_a_backward_is_differentiated_by_its_own_backward(torch, argument):
    """PyTorch saves the input itself, which requires grad, so the inner call records a node and a
    second derivative goes through the inner backward (a detached copy stops it)."""
    results = []
    for T in (symgrad, torch):
        seen = []
        x = T.tensor(X, dtype=T.float64, requires_grad=True)
        y = nested(T, argument, seen).apply(x)
        (g,) = T.autograd.grad(y.sum(), x, create_graph=True)
        (h,) = T.autograd.grad((g * g).sum(), x)
        results.append((g.detach().numpy(), h.numpy(), seen[-1]))
    (g, h, seen), (g_torch, h_torch, seen_torch) = results
    close(g, g_torch, rtol=1e-12)
    close(h, h_torch, rtol=1e-12)
    assert seen == seen_torch


def in_backward_under_no_grad(T, seen):
    """A backward that computes part of its gradient under no_grad, from the saved input and from
    grad_output, and reports what requires grad inside it."""
    class Cubed(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x ** 3 * y

        @staticmethod
        def backward(ctx, grad_output):
            x, y = ctx.saved_tensors
            seen.append((x.requires_grad, y.requires_grad, (x * 2).requires_grad, x.grad_fn is None))
            with T.no_grad():
                slope = 3 * x * x  # a constant to a second derivative
                doubled = grad_output * 2
            return doubled * slope * y / 2 + grad_output * x, grad_output * x ** 3
    return Cubed


def test_what_a_backward_computes_under_no_grad_is_a_constant_to_a_second_derivative(torch):
    """PyTorch hands the backward the saved input itself (it requires grad where the caller's does):
    what the backward computes from it in grad mode is differentiated again, what it computes under
    no_grad is not (symgrad's second derivative went through the no_grad part: 13 where PyTorch's
    is 1)."""
    results = []
    for T in (symgrad, torch):
        seen = []
        x = T.tensor(X, dtype=T.float64, requires_grad=True)
        y = T.tensor([0.5, 3.0, -2.0], dtype=T.float64)
        out = in_backward_under_no_grad(T, seen).apply(x, y)
        (g,) = T.autograd.grad((out * out).sum(), x, create_graph=True)
        (h,) = T.autograd.grad(g.sum(), x)
        results.append((g.detach().numpy(), h.numpy(), seen[0]))  # (PyTorch runs it again for h, in no_grad)
    (g, h, seen), (g_torch, h_torch, seen_torch) = results
    close(g, g_torch, rtol=1e-12)
    close(h, h_torch, rtol=1e-12)
    assert seen == seen_torch == (True, False, True, True)


def sinh_saving_intermediates(T):
    """The double-backward tutorial's SinhBad: its backward reads results of the forward that are
    not outputs, which PyTorch's second derivative takes as constants."""
    class SinhBad(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.expx, ctx.expnegx = T.exp(x), T.exp(-x)
            return (ctx.expx - ctx.expnegx) / 2

        @staticmethod
        def backward(ctx, grad_out):
            return grad_out * (ctx.expx + ctx.expnegx) / 2
    return SinhBad


def test_a_gradient_through_a_backward_that_reads_only_constants_has_no_history(torch):
    """SinhBad's gradient reads only what the forward kept on ctx, constants to autograd: PyTorch's has
    no grad_fn and a second derivative raises (symgrad's required grad, and its second derivative was 0)."""
    for T in (symgrad, torch):
        x = T.tensor(X, dtype=T.float64, requires_grad=True)
        (g,) = T.autograd.grad(sinh_saving_intermediates(T).apply(x).sum(), x, create_graph=True)
        assert not g.requires_grad and g.grad_fn is None
        close(g.numpy(), np.cosh(X), rtol=1e-6)
        with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
            T.autograd.grad(g.sum(), x)


def sinh_with_outputs(T):
    """The tutorial's Sinh: the intermediates returned as outputs too, so the second derivative goes
    through them (through this backward again), though the caller uses only the first."""
    class Sinh(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx, expnegx = T.exp(x), T.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, grad_expx, grad_expnegx):
            expx, expnegx = ctx.saved_tensors
            return grad_out * (expx + expnegx) / 2 + grad_expx * expx - grad_expnegx * expnegx
    return lambda x: Sinh.apply(x)[0]


@pytest.mark.parametrize("function", [lambda T: sinh_saving_intermediates(T).apply, sinh_with_outputs],
                         ids=["intermediates on ctx", "intermediates as outputs"])
def test_a_second_derivative_through_the_forwards_intermediates_as_pytorch_takes_it(torch, function):
    """The second derivative of sinh(x)^2 is 2 cosh^2 + 2 sinh^2 through the outputs; with the
    intermediates held constant only grad_out's dependence on x counts: each is PyTorch's."""
    results = []
    for T in (symgrad, torch):
        x = T.tensor(X, dtype=T.float64, requires_grad=True)
        (g,) = T.autograd.grad((function(T)(x) ** 2).sum(), x, create_graph=True)
        (h,) = T.autograd.grad(g.sum(), x)
        results.append((g.detach().numpy(), h.numpy()))
    (g, h), (g_torch, h_torch) = results
    close(g, g_torch, rtol=1e-12)
    close(h, h_torch, rtol=1e-12)
    exact = 2 * np.cosh(X) ** 2 + 2 * np.sinh(X) ** 2
    close(h, exact if function is sinh_with_outputs else 2 * np.cosh(X) ** 2, rtol=1e-6)


def test_a_once_differentiable_gradient_is_a_constant_to_autograd_grad(torch):
    """PyTorch runs such a backward under no_grad: a second derivative by ``autograd.grad`` gets the
    other terms only (symgrad's went through the backward's ops: [2.10, 6.88, 30.88])."""
    results = []
    for T in (symgrad, torch):
        class CubedOnce(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            @T.autograd.function.once_differentiable
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                return grad_output * 3 * x * x

        x = T.tensor([0.3, -0.7, 1.2], dtype=T.float64, requires_grad=True)
        w = T.tensor([1.0, 2.0, 3.0], dtype=T.float64, requires_grad=True)
        (g,) = T.autograd.grad((CubedOnce.apply(x) ** 2).sum() + (x * x * w).sum(), x, create_graph=True)
        results.append([h.numpy() for h in T.autograd.grad(g.sum(), [x, w])])
    for ours, theirs in zip(*results):
        close(ours, theirs, rtol=1e-12)
    close(results[0][0], [2.0, 4.0, 6.0], rtol=1e-12)


def test_a_tensor_kept_from_the_forward_is_detached_after_the_call(torch):
    """The backward is recorded on the detached arguments made to require grad; afterwards a user
    who kept one from the forward holds a detached leaf again (PyTorch's is the argument itself; the
    difference is listed in api.md), not a leaf that requires grad and never gets a gradient."""
    stash = []

    class Doubled(symgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            stash.append(x)
            return x * 2

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2

    x = symgrad.tensor(X, requires_grad=True)
    Doubled.apply(x).sum().backward()
    close(x.grad.numpy(), [2.0, 2.0, 2.0])
    assert not stash[0].requires_grad and stash[0].is_leaf


def returning_its_input(T):
    """A forward that returns its argument as it is and saves it."""
    class Squared(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 2 * x
    return Squared


def returning_its_input_and_a_result(T):
    class Both(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 3
            ctx.save_for_backward(x, y)
            return x, y

        @staticmethod
        def backward(ctx, grad_x, grad_y):
            x, y = ctx.saved_tensors
            return grad_x * x + grad_y * y
    return Both


def _higher_derivatives(T, function, of_a_result):
    x = T.tensor([1.0, 2.0, 3.0], dtype=T.float64, requires_grad=True)
    if function is returning_its_input_and_a_result:
        a, b = function(T).apply(x)
        loss = (a + b).sum()
    else:
        z = function(T).apply(x * 1 if of_a_result else x)
        loss = (z * z).sum() if of_a_result else z.sum()
    (g,) = T.autograd.grad(loss, x, create_graph=True)
    (h,) = T.autograd.grad((g * g).sum(), x, create_graph=True)
    h.sum().backward()
    return [t.detach().numpy() for t in (g, h, x.grad)]


@pytest.mark.parametrize("function, of_a_result", [(returning_its_input, False), (returning_its_input, True),
                                                   (returning_its_input_and_a_result, False)])
def test_an_argument_returned_as_it_is_stays_the_argument_where_the_backward_reads_it(torch, function, of_a_result):
    """PyTorch's output is then a new tensor and what was saved is the input, so a second derivative
    does not go through this backward again (symgrad's did: 4x where PyTorch's d(2x)/dx is 2)."""
    ours, theirs = (_higher_derivatives(T, function, of_a_result) for T in (symgrad, torch))
    for a, b in zip(ours, theirs):
        close(a, b, rtol=1e-12)
    if function is returning_its_input and not of_a_result:
        close(ours[1], [8.0, 16.0, 24.0], rtol=1e-12)  # d/dx sum((2x)^2); through the backward again: 16 x^2
