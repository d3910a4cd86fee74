"""Cost linear in graph size: no expression blow-up on long or heavily shared graphs."""
import time

import numpy as np

import symgrad as torch
from codegen.emit import live_assignments
from symgrad.tracing import BackwardPlan, Walk, forward_program


def _chain(depth, n=4):
    h = torch.linspace(0.1, 0.9, n, dtype=torch.float64).requires_grad_()
    x = h
    for _ in range(depth):
        x = torch.sin(x) * x + 0.5
    return h, x.sum()


def _program_sizes(loss):
    walk = Walk()
    position = walk.add(loss._node, False)
    forward = forward_program(walk, (position,))
    backward = BackwardPlan(loss._node, None).program()
    return len(live_assignments(forward)), len(live_assignments(backward)), forward, backward


def test_backward_of_a_1000_op_chain_is_at_most_4x_the_forward():
    _, loss = _chain(334)  # three ops per step: sin, mul, add
    start = time.perf_counter()
    n_forward, n_backward, forward, backward = _program_sizes(loss)
    seconds = time.perf_counter() - start
    assert n_forward >= 1000
    assert n_backward <= 4 * n_forward, (n_forward, n_backward)
    assert backward.node_count() <= 4 * forward.node_count()
    assert seconds < 20


def test_program_size_grows_linearly_with_depth():
    sizes = [_program_sizes(_chain(d)[1])[1] for d in (50, 100, 200)]
    assert sizes[2] - sizes[1] == 2 * (sizes[1] - sizes[0])


def test_deep_chain_gradient_is_right():
    depth = 60
    h, loss = _chain(depth)
    loss.backward()
    x = np.linspace(0.1, 0.9, 4)
    grad = np.ones(4)
    for _ in range(depth):
        grad = grad * (np.cos(x) * x + np.sin(x))
        x = np.sin(x) * x + 0.5
    np.testing.assert_allclose(h.grad.numpy(), grad, rtol=1e-10)


def test_heavy_sharing_stays_small():
    """x_{k+1} = x_k * x_k + x_k: as a tree it has 3^k nodes; as SSA it has 2 per step."""
    x0 = torch.tensor([0.1], dtype=torch.float64, requires_grad=True)
    x = x0
    for _ in range(40):
        x = x * x + x
    _, n_backward, _, _ = _program_sizes(x.sum())
    assert n_backward < 40 * 8
