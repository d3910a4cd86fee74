"""A training step's program writes its results into the old parameters, optimizer state and
gradients when nothing can read those any more (symgrad.donation, codegen.donated), and every
value a user can still reach stays PyTorch's: held predictions and losses, snapshots, a second
backward through a retained graph, the plain path."""
import numpy as np
import pytest

import codegen
import symgrad
from codegen import donated
from symgrad import donation, replay
from symgrad.nodes import as_input

torch = pytest.importorskip("torch")

WIDTH = 512  # a 512 x 512 weight: big enough to be given up (donation.MIN_ELEMENTS)
STEPS = 6


def _models(rng, optimizer):
    """The same two-layer model in symgrad and in torch, and ``optimizer(T, parameters)`` on each."""
    weights = [rng.standard_normal(shape).astype(np.float32) * 0.05 for shape in
               ((WIDTH, WIDTH), (WIDTH,), (3, WIDTH), (3,))]
    pair = []
    for T in (symgrad, torch):
        model = T.nn.Sequential(T.nn.Linear(WIDTH, WIDTH), T.nn.ReLU(), T.nn.Linear(WIDTH, 3))
        with T.no_grad():
            for p, w in zip(model.parameters(), weights):
                p.copy_(T.tensor(w))
        pair.append((model, optimizer(T, model.parameters())))
    return pair


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng, rng.standard_normal((8, WIDTH)).astype(np.float32), rng.integers(0, 3, 8)


def _assert_same(ours, theirs, **tolerance):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(),
                               **(tolerance or dict(rtol=2e-5, atol=2e-6)))


def _momentum(T, parameters):
    return T.optim.SGD(parameters, lr=0.1, momentum=0.9)


def _adam(T, parameters):
    return T.optim.Adam(parameters, lr=1e-3)


ADAM = dict(rtol=0, atol=STEPS * 1e-3 / 4)  # where a gradient is a rounding error, Adam's step is about lr (W6)


def _train(data, step, steps=STEPS, optimizer=_momentum, **tolerance):
    """``step(T, model, optimizer, x, y)`` run side by side; returns what each step returned, per
    system, with the number of calls that gave arrays up.  A first stretch lets the variant compile."""
    rng, X, Y = data
    (ours, our_opt), (theirs, their_opt) = _models(rng, optimizer)
    inputs = {symgrad: (symgrad.tensor(X), symgrad.tensor(Y)), torch: (torch.tensor(X), torch.tensor(Y))}
    for _ in range(3 + donated.HOT_AFTER):  # the first three steps differ (no momentum buffer, then no .grad)
        step(symgrad, ours, our_opt, *inputs[symgrad])
        step(torch, theirs, their_opt, *inputs[torch])
    codegen.finish_compiles()
    before, results = donated.stats.calls, []
    for _ in range(steps):
        results.append((step(symgrad, ours, our_opt, *inputs[symgrad]), step(torch, theirs, their_opt, *inputs[torch])))
    for p, q in zip(ours.parameters(), theirs.parameters()):
        _assert_same(p, q, **tolerance)
    return results, donated.stats.calls - before


def _unheld(T, model, optimizer, x, y):
    optimizer.zero_grad()
    T.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


@pytest.mark.parametrize("optimizer", [_momentum, _adam])
def test_a_loop_that_keeps_nothing_gives_its_old_state_up(data, optimizer):
    _, given = _train(data, _unheld, optimizer=optimizer, **(ADAM if optimizer is _adam else {}))
    assert given >= STEPS // 2  # a step whose old state something still held (a cycle the collector
                                # has not freed yet) gives nothing up, and is right to


def _held(T, model, optimizer, x, y):
    """The prediction and loss held through the update and read after it (the values, as a loop
    printing them does: the next step's forward drops the tensors)."""
    optimizer.zero_grad()
    prediction = model(x)
    loss = T.nn.functional.cross_entropy(prediction, y)
    loss.backward()
    optimizer.step()
    return prediction.detach().numpy(), loss.item()


def test_predictions_and_losses_read_after_the_update_are_the_step_s(data):
    """A held prediction is computed from the parameters it was recorded with, which the program
    filled: the old ones it gave up are not needed."""
    results, given = _train(data, _held)
    assert given >= STEPS // 2
    for (prediction, loss), (their_prediction, their_loss) in results:
        np.testing.assert_allclose(prediction, their_prediction, rtol=2e-5, atol=2e-6)
        assert loss == pytest.approx(their_loss, rel=1e-5)


def _kept(T, model, optimizer, x, y):
    optimizer.zero_grad()
    prediction = model(x)
    T.nn.functional.cross_entropy(prediction, y).backward()
    optimizer.step()
    return prediction


def test_predictions_kept_for_later_keep_the_parameters_they_need(data):
    """Every step's prediction kept and read at the end: each needs the parameters it was
    recorded with, which later steps' programs read (and must not give up)."""
    results, _ = _train(data, _kept)
    for prediction, their_prediction in results:
        _assert_same(prediction, their_prediction)


def _snapshots(T, model, optimizer, x, y):
    """Copies taken before the update, read after it: they hold the old values' nodes."""
    optimizer.zero_grad()
    T.nn.functional.cross_entropy(model(x), y).backward()
    before = [p.detach().clone() for p in model.parameters()]
    moments = [optimizer.state[p]["momentum_buffer"] * 1 for p in model.parameters() if optimizer.state[p]]
    optimizer.step()
    return before, moments


def test_snapshots_of_parameters_and_moments_keep_their_values(data):
    results, _ = _train(data, _snapshots)
    for (before, moments), (their_before, their_moments) in results:
        for ours, theirs in zip(before + moments, their_before + their_moments):
            _assert_same(ours, theirs)


def _twice(T, model, optimizer, x, y):
    """A retained graph differentiated again through a new op on its loss: the second backward's
    description names leaves the first one computed (and arrays it gave up)."""
    optimizer.zero_grad()
    loss = T.nn.functional.cross_entropy(model(x), y)
    loss.backward(retain_graph=True)
    (loss * 2).backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    optimizer.step()
    return grads


def test_a_second_backward_through_a_retained_graph(data):
    results, given = _train(data, _twice, rtol=1e-4, atol=2e-5)
    assert given >= STEPS // 2
    for grads, their_grads in results:
        for ours, theirs in zip(grads, their_grads):
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=5e-5)  # float32 sums over drifting parameters


def test_a_description_whose_pending_leaves_were_computed_finds_no_program():
    """Its arguments are no longer reached through inputs, so they may have been given up: the
    backward walks the graph (replay.request refuses it)."""
    w = symgrad.ones(3, requires_grad=True)
    with symgrad.no_grad():
        w -= 1
    loss = (w * 2).sum()
    loss.backward(retain_graph=True)
    twice = loss * 2
    assert as_input(twice._node)[1] and replay.request(twice._node, [w._node]) is None
    twice.backward()
    assert w.grad.tolist() == [6.0, 6.0, 6.0]


def test_the_plain_path_gives_nothing_up(data):
    with symgrad.plain_path():
        _, given = _train(data, _unheld, steps=2)
    assert given == 0


def test_an_array_a_numpy_view_holds_is_not_given_up():
    """Only arrays their node alone refers to are candidates: a view, or a second node (a
    detached leaf shares its array), keeps them."""
    leaf = symgrad.zeros(WIDTH, WIDTH)._node
    assert donation._sole_array(leaf)
    held = leaf.value
    assert not donation._sole_array(leaf)
    del held
    assert donation._sole_array(leaf)
    assert not donation._sole_array(symgrad.zeros(4, 4)._node)  # small: malloc reuses it without fresh pages


def _updated_in_place(keep=None):
    """A parameter updated under no_grad (its node a pending leaf computed from the old one),
    and the old node's donation verdict; ``keep(p)`` runs before the update and its result is
    held through the verdict."""
    p = symgrad.ones(WIDTH, WIDTH)
    kept = keep(p) if keep else None
    sources = (p._node,)
    with symgrad.no_grad():
        p.mul_(2)
    verdict = donation.dead_sources(p._node, (p._node,), sources, (0,), (sources,))
    return verdict, kept


def test_a_leaf_only_the_update_reads_is_dead_and_one_held_elsewhere_is_not():
    """The counting itself, without a program: the old node of a parameter updated in place is
    dead once nothing but the update refers to it; a tensor or a node outside the graph holding
    it, or a second node sharing its array, keeps it."""
    assert _updated_in_place()[0] == {0}
    assert _updated_in_place(lambda p: p * 1)[0] == frozenset()  # a node recorded on it
    assert _updated_in_place(lambda p: symgrad.Tensor(p._node))[0] == frozenset()  # a tensor on it
    assert _updated_in_place(lambda p: p.detach())[0] == frozenset()  # a leaf sharing its array
