"""Adversarial parity tests for backward's replay (symgrad.kinds / symgrad.replay).

``backward`` finds a compiled program from the root's kind (plus the patterns of arguments,
pending leaves, targets and accumulation) without walking the graph.  Every scenario here is
run twice with the same numbers, once with symgrad and once with PyTorch, for several
iterations, so that a structure is seen for the first time (walk, replay registered) and then
again (replay).  If a replay reused a program for a graph it does not describe, values or
gradients differ from PyTorch's.

The program cache is emptied before each test so that each one sees its structures first
walked and then replayed, whatever ran before it.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from symgrad import kinds
from replay_parity import (  # noqa: F401  (fixtures are found by name)
    RTOL, ATOL, Record, check, compare, f32, fresh_cache, replays, rng, snap, torch)


# ------------------------------------------------------------- 1. a torch-style training loop

R = rng(1)
X_N = f32(R.standard_normal((4, 3)))
Y_N = f32(R.standard_normal(4))
W_N = f32(R.standard_normal(3))
W2_N = f32(R.standard_normal(3))


@pytest.mark.parametrize("style", ["isub", "sub_", "data", "data_assign", "grad_none", "sgd", "sgd_momentum",
                                   "sgd_nesterov_zero_grad_keep"])
def test_training_loop(style, replays):
    lr = 0.05

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w = T.tensor(W_N, requires_grad=True)
        b = T.tensor(0.1, requires_grad=True)
        opt = None
        if style == "sgd":
            opt = T.optim.SGD([w, b], lr=lr)
        elif style == "sgd_momentum":
            opt = T.optim.SGD([w, b], lr=lr, momentum=0.9, weight_decay=0.01)
        elif style == "sgd_nesterov_zero_grad_keep":
            opt = T.optim.SGD([w, b], lr=lr, momentum=0.5, nesterov=True)
        rec = Record()
        for step in range(20):
            loss = ((X @ w + b - y) ** 2).mean()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"b.grad {step}", b.grad)
            if opt is not None:
                opt.step()
                opt.zero_grad(set_to_none=style != "sgd_nesterov_zero_grad_keep")
                continue
            if style == "isub":
                with T.no_grad():
                    w -= lr * w.grad
                    b -= lr * b.grad
            elif style in ("sub_", "grad_none"):
                with T.no_grad():
                    w.sub_(lr * w.grad)
                    b.sub_(lr * b.grad)
            elif style == "data":
                w.data -= lr * w.grad
                b.data -= lr * b.grad
            elif style == "data_assign":
                w.data = w.data - lr * w.grad
                b.data = b.data - lr * b.grad
            if style == "grad_none":
                w.grad = None
                b.grad = None
            else:
                w.grad.zero_()
                b.grad.zero_()
        rec.add("w", w)
        rec.add("b", b)
        return rec

    check(run)
    assert replays.count > 0, "the loop never replayed: the test does not exercise the replay path"


# ------------------------------------------------------ 2. two parameters alternating in one structure


@pytest.mark.parametrize("zeroing", ["none", "zero_"])
def test_alternating_parameters(zeroing, replays):
    lr = 0.1

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w1 = T.tensor(W_N, requires_grad=True)
        w2 = T.tensor(W2_N, requires_grad=True)
        b = T.tensor(-0.2, requires_grad=True)
        rec = Record()
        for step in range(12):
            w = w1 if step % 2 == 0 else w2
            loss = ((X @ w + b - y) ** 2).mean()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            for name, p in (("w1", w1), ("w2", w2), ("b", b)):
                rec.add(f"{name}.grad {step}", p.grad)
            with T.no_grad():
                for p in (w1, w2, b):
                    if p.grad is not None:
                        p -= lr * p.grad
            for p in (w1, w2, b):
                if zeroing == "none":
                    p.grad = None
                elif p.grad is not None:
                    p.grad.zero_()
        for name, p in (("w1", w1), ("w2", w2), ("b", b)):
            rec.add(name, p)
        return rec

    check(run)
    assert replays.count > 0


def test_swapped_roles(replays):
    """f(w1, w2) and f(w2, w1): one kind, the same argument pattern, the sources swapped."""
    lr = 0.05

    def run(T):
        X = T.tensor(X_N)
        w1 = T.tensor(W_N, requires_grad=True)
        w2 = T.tensor(W2_N, requires_grad=True)
        rec = Record()
        for step in range(10):
            p, q = (w1, w2) if step % 3 != 2 else (w2, w1)
            loss = (T.sin(X @ p) * (X @ q) ** 2).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w1.grad {step}", w1.grad)
            rec.add(f"w2.grad {step}", w2.grad)
            with T.no_grad():
                w1 -= lr * w1.grad
                w2 -= lr * w2.grad
            w1.grad = None
            w2.grad = None
        rec.add("w1", w1)
        rec.add("w2", w2)
        return rec

    check(run)
    assert replays.count > 0


# --------------------------------------------------------------------- 3. repeated arguments

EXPRESSIONS = {
    "x*w*w": lambda T, x, w, v: (x * w * w).sum(),
    "x*w*v": lambda T, x, w, v: (x * w * v).sum(),
    "x*v*w": lambda T, x, w, v: (x * v * w).sum(),
    "x*v*v": lambda T, x, w, v: (x * v * v).sum(),
    "w+w": lambda T, x, w, v: ((w + w) * x).sum(),
    "w+v": lambda T, x, w, v: ((w + v) * x).sum(),
    "w*w.detach()": lambda T, x, w, v: (w * w.detach()).sum(),
    "w*v.detach()": lambda T, x, w, v: (w * v.detach()).sum(),
    "v*w.detach()": lambda T, x, w, v: (v * w.detach()).sum(),
    "h*h": lambda T, x, w, v: ((x * w) * (x * w)).sum(),
    "h*h same node": lambda T, x, w, v: (lambda h: (h * h).sum())(x * w),
    "h*g": lambda T, x, w, v: ((x * w) * (x * v)).sum(),
    "sin(h)*h": lambda T, x, w, v: (lambda h: (T.sin(h) * h).sum())(x * w),
    "sin(h)*g": lambda T, x, w, v: (T.sin(x * w) * (x * v)).sum(),
    "where(x>0,w,v)": lambda T, x, w, v: (T.where(x > 0, w, v) ** 2).sum(),
    "where(x>0,v,w)": lambda T, x, w, v: (T.where(x > 0, v, w) ** 2).sum(),
    "where(x>0,w,w)": lambda T, x, w, v: (T.where(x > 0, w, w) ** 2).sum(),
    "where(w>0,w,v)": lambda T, x, w, v: (T.where(w > 0, w, v) ** 2).sum(),
    "where(v>0,w,v)": lambda T, x, w, v: (T.where(v > 0, w, v) ** 2).sum(),
}


@pytest.mark.parametrize("updates", [False, True], ids=["fixed", "updated"])
def test_repeated_arguments(updates, replays):
    names = list(EXPRESSIONS)
    order = names + names[::-1] + names[::2] + names[1::2]
    rx = rng(3)
    x_n = f32(rx.standard_normal(3))
    w_n, v_n = f32([0.5, -1.5, 2.0]), f32([-0.7, 0.3, 1.1])

    def run(T):
        x = T.tensor(x_n)
        w = T.tensor(w_n, requires_grad=True)
        v = T.tensor(v_n, requires_grad=True)
        rec = Record()
        for step, name in enumerate(order):
            loss = EXPRESSIONS[name](T, x, w, v)
            loss.backward()
            rec.add(f"{name} loss {step}", loss.item())
            rec.add(f"{name} w.grad {step}", w.grad)
            rec.add(f"{name} v.grad {step}", v.grad)
            if updates:  # w and v are then pending (computed inside the next program)
                with T.no_grad():
                    for p in (w, v):
                        if p.grad is not None:
                            p -= 0.01 * p.grad
            w.grad = None
            v.grad = None
        rec.add("w", w)
        rec.add("v", v)
        return rec

    check(run)
    assert replays.count > 0


ONE_TARGET = {  # backward(inputs=[w]): v is a leaf of w's kind that receives no gradient
    "x*w*w": lambda T, x, y, w, v: (x * w * w).sum(),
    "x*w*v": lambda T, x, y, w, v: (x * w * v).sum(),
    "w*x*x": lambda T, x, y, w, v: (w * x * x).sum(),
    "w*x*y": lambda T, x, y, w, v: (w * x * y).sum(),
    "w*y*x": lambda T, x, y, w, v: (w * y * x).sum(),
    "sin(w*x)*x": lambda T, x, y, w, v: (T.sin(w * x) * x).sum(),
    "sin(w*x)*y": lambda T, x, y, w, v: (T.sin(w * x) * y).sum(),
    "w+v+w": lambda T, x, y, w, v: ((w + v + w) * x).sum(),
    "w+w+v": lambda T, x, y, w, v: ((w + w + v) * x).sum(),
    "w+v+v": lambda T, x, y, w, v: ((w + v + v) * x).sum(),
}


def test_repeated_arguments_one_target(replays):
    """The same kinds and target positions; only the repetition of the arguments differs."""
    names = list(ONE_TARGET)
    order = names + names[::-1] + names
    rx = rng(5)
    x_n, y_n = f32(rx.standard_normal(3)), f32(rx.standard_normal(3))

    def run(T):
        x, y = T.tensor(x_n), T.tensor(y_n)
        w = T.tensor(f32([0.5, -1.5, 2.0]), requires_grad=True)
        v = T.tensor(f32([-0.7, 0.3, 1.1]), requires_grad=True)
        rec = Record()
        for step, name in enumerate(order):
            loss = ONE_TARGET[name](T, x, y, w, v)
            loss.backward(inputs=[w])
            rec.add(f"{name} loss {step}", loss.item())
            rec.add(f"{name} w.grad {step}", w.grad)
            rec.add(f"{name} v.grad {step}", v.grad)
            w.grad = None
        return rec

    check(run)
    assert replays.count > 0


def test_repeated_pending_leaves_one_target(replays):
    """Parameters refilled in place with one constant: p and q are distinct pending leaves of one
    kind with no arguments, so only the pattern of pending leaves tells p * p from p * q."""
    x_n = f32([0.5, -2.0, 3.0])
    forms = ["x*p*p", "x*p*q", "x*p*p", "x*q*p", "x*p*q", "x*q*q"]

    def run(T):
        x = T.tensor(x_n)
        p = T.tensor(f32([1.0, 2.0, 3.0]), requires_grad=True)
        q = T.tensor(f32([4.0, 5.0, 6.0]), requires_grad=True)
        rec = Record()
        for step, form in enumerate(forms * 2):
            with T.no_grad():
                p.fill_(1.5)
                q.fill_(1.5)
            a, b = {"p": p, "q": q}[form[2]], {"p": p, "q": q}[form[4]]
            loss = (x * a * b).sum()
            loss.backward(inputs=[p])
            rec.add(f"{form} loss {step}", loss.item())
            rec.add(f"{form} p.grad {step}", p.grad)
            rec.add(f"{form} q.grad {step}", q.grad)
            p.grad = None
        return rec

    check(run)
    assert replays.count > 0


# ------------------------------------------------------------------- 4. gradient accumulation

ACTIONS = ["acc", "acc", "acc", "zero", "acc", "none", "acc", "acc", "set_full", "acc", "zero_w", "acc",
           "none_b", "acc", "set_expr", "acc", "scale", "acc", "set_used", "acc", "acc", "zero", "none", "acc"]


def test_accumulation(replays):
    rx = rng(4)
    xs = [f32(rx.standard_normal(3)) for _ in range(len(ACTIONS))]

    def run(T):
        w = T.tensor(W_N, requires_grad=True)
        b = T.tensor(0.3, requires_grad=True)
        rec = Record()
        for step, action in enumerate(ACTIONS):
            x = T.tensor(xs[step])
            if action == "zero":
                w.grad.zero_()
                b.grad.zero_()
            elif action == "zero_w":
                w.grad.zero_()
            elif action == "none":
                w.grad = None
                b.grad = None
            elif action == "none_b":
                b.grad = None
            elif action == "set_full":
                w.grad = T.full((3,), 0.5)
            elif action == "set_expr":
                w.grad = T.ones(3) * 0.25 + x
            elif action == "scale":
                with T.no_grad():
                    w.grad.mul_(0.5)
                    b.grad.mul_(-1.0)
            elif action == "set_used":
                w.grad = x  # the existing gradient is also an argument of the loss
            loss = (T.tanh(x * w + b) * x).sum()
            loss.backward()
            rec.add(f"{action} loss {step}", loss.item())
            rec.add(f"{action} w.grad {step}", w.grad)
            rec.add(f"{action} b.grad {step}", b.grad)
        return rec

    check(run)
    assert replays.count > 0


def test_accumulation_retain_graph_then_new_graphs(replays):
    """Several backwards of one graph and of fresh graphs of the same kind, never zeroed."""

    def run(T):
        x = T.tensor(X_N[0])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(4):
            loss = (T.sin(w) * x).sum()
            loss.backward(retain_graph=True)
            rec.add(f"grad a {step}", w.grad)
            loss.backward()
            rec.add(f"grad b {step}", w.grad)
            loss2 = (T.sin(w) * x).sum()
            loss2.backward()
            rec.add(f"grad c {step}", w.grad)
        return rec

    check(run)
    assert replays.count > 0


# ------------------------------------------------------------ 5. pending leaves looked at early

PEEKS = ["none", "repr", "item", "numpy", "tolist", "loss_item_first", "after_record", "none", "none",
         "repr", "after_record", "item", "none"]


def _peek(T, w, how):
    if how == "repr":
        return repr(w)
    if how == "item":
        return w.sum().item()
    if how == "numpy":
        return w.detach().numpy().copy()
    if how == "tolist":
        return w.tolist()
    return None


def test_pending_parameter_peeked(replays):
    lr = 0.05

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w = T.tensor(W_N, requires_grad=True)
        b = T.tensor(0.1, requires_grad=True)
        rec = Record()
        for step, how in enumerate(PEEKS):
            if how not in ("after_record", "loss_item_first"):
                _peek(T, w, how)
            loss = ((X @ w + b - y) ** 2).mean()
            if how == "after_record":
                _peek(T, w, "item")
                _peek(T, b, "repr")
            if how == "loss_item_first":
                rec.add(f"loss before backward {step}", loss.item())
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"b.grad {step}", b.grad)
            with T.no_grad():
                w -= lr * w.grad
                b -= lr * b.grad
            w.grad.zero_()
            b.grad.zero_()
        rec.add("w", w)
        rec.add("b", b)
        return rec

    check(run)
    assert replays.count > 0


MIDDLE_PEEKS = ["none", "repr", "none", "item", "numpy", "none", "after", "repr", "after", "none", "item"]


def test_pending_parameter_used_before_and_after_realized(replays):
    """a = w * 2 while w is pending, then w is computed (print / item), then c = w * 3."""

    def run(T):
        x = T.tensor(X_N[1])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step, how in enumerate(MIDDLE_PEEKS):
            a = w * 2
            if how in ("repr", "item", "numpy"):
                rec.add(f"peek {step}", _peek(T, w, how) if how != "repr" else w.sum().item())
            c = T.sin(w) * 3
            loss = ((a + c) * x).sum()
            if how == "after":
                rec.add(f"peek after {step}", w.sum().item())
            loss.backward()
            rec.add(f"{how} loss {step}", loss.item())
            rec.add(f"{how} w.grad {step}", w.grad)
            with T.no_grad():
                w -= 0.1 * w.grad
            w.grad = None
        rec.add("w", w)
        return rec

    check(run)


def test_parameter_updated_between_two_uses():
    """a uses w, w is updated in place (no_grad), c uses the new w: both are the one leaf w in
    PyTorch, so w.grad is the sum of both contributions."""

    def run(T):
        x = T.tensor(X_N[2])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(4):
            a = w * 2
            with T.no_grad():
                w -= 0.1
            c = w * 3
            loss = ((a + c) * x).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)


def test_requires_grad_toggled_between_two_uses():
    def run(T):
        x = T.tensor(X_N[2])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(3):
            a = w * 2
            w.requires_grad_(False)
            w.requires_grad_(True)
            c = w * 3
            loss = ((a + c) * x).sum()
            loss.backward()
            rec.add(f"w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)


def test_two_losses_share_a_pending_parameter(replays):
    def run(T):
        x = T.tensor(X_N[3])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(6):
            l1 = (w * x).sum()
            l2 = (T.sin(w) ** 2).sum()
            if step % 2:
                l1.backward()
                rec.add(f"after l1 {step}", w.grad)
                l2.backward()
            else:
                l2.backward()
                rec.add(f"after l2 {step}", w.grad)
                l1.backward()
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"losses {step}", l1.item() + l2.item())
            with T.no_grad():
                w -= 0.1 * w.grad
            w.grad.zero_()
        rec.add("w", w)
        return rec

    check(run)
    assert replays.count > 0


def test_pending_detach_and_twice_updated(replays):
    """Pending leaves from pending leaves: detach of a pending parameter, two updates per step."""

    def run(T):
        x = T.tensor(X_N[0])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(8):
            if step % 4 == 3:
                loss = (w * w.detach() * x).sum()
            else:
                loss = (w * T.cos(w.detach()) * x).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            with T.no_grad():
                w -= 0.1 * w.grad
                if step % 2:
                    w *= 0.9
            w.grad = None
        rec.add("w", w)
        return rec

    check(run)
    assert replays.count > 0


# ------------------------------------------------------------------ 6. learning-rate schedules


@pytest.mark.parametrize("schedule", ["decay", "cyclic", "sgd_param_group"])
def test_learning_rate_schedule(schedule, replays):
    steps = 14
    if schedule == "decay":
        lrs = [0.2 * 0.8 ** t for t in range(steps)]
    else:
        lrs = [[0.1, 0.02, 0.3][t % 3] for t in range(steps)]

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w = T.tensor(W_N, requires_grad=True)
        opt = T.optim.SGD([w], lr=0.1, momentum=0.5) if schedule == "sgd_param_group" else None
        rec = Record()
        for step, lr in enumerate(lrs):
            target_shift = [0.0, 1, 0.5, -2.0][step % 4]  # a Python number inside the loss too
            loss = ((X @ w - y - target_shift) ** 2).mean()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            if opt is not None:
                opt.param_groups[0]["lr"] = lr
                opt.step()
                opt.zero_grad()
            else:
                with T.no_grad():
                    w -= lr * w.grad
                w.grad = None
            rec.add(f"w {step}", w)
        return rec

    check(run)
    assert replays.count > 0


# ---------------------------------------------------------------------------- 7. retain_graph


def test_retain_graph_then_second_backward_raises(replays):
    def run(T):
        X = T.tensor(X_N)
        w = T.tensor(W_N, requires_grad=True)
        b = T.tensor(0.5, requires_grad=True)
        rec = Record()
        for step in range(5):
            loss = (T.sin(X @ w) * b).sum()
            loss.backward(retain_graph=True)
            rec.add(f"w.grad once {step}", w.grad)
            loss.backward()
            rec.add(f"w.grad twice {step}", w.grad)
            rec.add(f"b.grad twice {step}", b.grad)
            try:
                loss.backward()
                rec.add(f"third backward raised {step}", False)
            except RuntimeError:
                rec.add(f"third backward raised {step}", True)
            rec.add(f"w.grad after error {step}", w.grad)
            with T.no_grad():
                w -= 0.01 * w.grad
            w.grad = None
            b.grad = None
        return rec

    check(run)
    assert replays.count > 0


def test_second_backward_without_retain_raises_on_replay(replays):
    def run(T):
        x = T.tensor(X_N[0])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(5):
            loss = (x * w * w).sum()
            loss.backward()
            rec.add(f"w.grad {step}", w.grad)
            try:
                loss.backward()
                rec.add(f"raised {step}", False)
            except RuntimeError:
                rec.add(f"raised {step}", True)
            rec.add(f"w.grad after {step}", w.grad)
            w.grad = None
        return rec

    got = check(run)
    assert all(v for label, v in got if label.startswith("raised"))
    assert replays.count > 0


# ------------------------------------------------------------------------- 8. retain_grad


def test_retain_grad_in_loop(replays):
    retain = [True, True, False, True, False, False, True, True]

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w = T.tensor(W_N, requires_grad=True)
        b = T.tensor(0.1, requires_grad=True)
        rec = Record()
        for step, keep in enumerate(retain):
            h = X @ w + b
            if keep:
                h.retain_grad()
            z = T.tanh(h)
            if step % 3 == 0:
                z.retain_grad()
            loss = ((z - y) ** 2).mean()
            loss.backward()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rec.add(f"h.grad {step}", h.grad)
                rec.add(f"z.grad {step}", z.grad)
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"b.grad {step}", b.grad)
            with T.no_grad():
                w -= 0.1 * w.grad
                b -= 0.1 * b.grad
            w.grad = None
            b.grad = None
        return rec

    check(run)
    assert replays.count > 0


# ------------------------------------------- 9. integers, no-grad tensors, detach, requires_grad_


def test_integer_inputs_and_labels(replays):
    rx = rng(9)
    X_int = rx.integers(-3, 4, size=(4, 3)).astype(np.int64)
    labels = [rx.integers(0, 5, size=4).astype(np.int64) for _ in range(8)]
    W0 = f32(rx.standard_normal((3, 5)) * 0.3)

    def run(T):
        Xi = T.tensor(X_int)
        W = T.tensor(W0, requires_grad=True)
        rec = Record()
        for step, lab in enumerate(labels):
            target = T.tensor(lab)
            logits = Xi.float() @ W
            loss = T.nn.functional.cross_entropy(logits, target) + (Xi[:, 0] * W[0, 0]).sum() * 0.1
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"W.grad {step}", W.grad)
            with T.no_grad():
                W -= 0.2 * W.grad
            W.grad.zero_()
        rec.add("W", W)
        return rec

    check(run)
    assert replays.count > 0


def test_detached_intermediate_and_no_grad_tensors(replays):
    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(10):
            h = X @ w
            if step % 3 == 0:
                centre = h.detach().mean()
            elif step % 3 == 1:
                with T.no_grad():
                    centre = (X @ w).mean()
            else:
                centre = h.mean()  # not detached: a different graph of the same shape
            with T.no_grad():
                scale = w * 2
            loss = ((h - centre - y) ** 2).mean() + (scale * w).sum() * 0.01
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"scale requires_grad {step}", scale.requires_grad)
            with T.no_grad():
                w -= 0.05 * w.grad
            w.grad = None
        rec.add("w", w)
        return rec

    check(run)
    assert replays.count > 0


def test_parameter_made_under_no_grad(replays):
    def run(T):
        base = T.tensor(W_N, requires_grad=True)
        x = T.tensor(X_N[1])
        with T.no_grad():
            w = base * 2 + 1  # computed (lazily) without history
        w.requires_grad_()
        rec = Record()
        rec.add("w is leaf", w.is_leaf)
        for step in range(6):
            loss = (T.sin(w) * x).sum() + (base * x).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"base.grad {step}", base.grad)
            with T.no_grad():
                w -= 0.1 * w.grad
            w.grad = None
            base.grad = None
        rec.add("w", w)
        return rec

    check(run)
    assert replays.count > 0


def test_requires_grad_toggled_between_steps(replays):
    flags = [True, True, False, False, True, False, True, True, False, True]

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w = T.tensor(W_N, requires_grad=True)
        b = T.tensor(0.2, requires_grad=True)
        rec = Record()
        for step, flag in enumerate(flags):
            b.requires_grad_(flag)
            probe = T.sin(b * 2)  # its requires_grad comes from b's kind
            rec.add(f"probe requires_grad {step}", probe.requires_grad)
            rec.add(f"probe is_leaf {step}", probe.is_leaf)
            loss = ((X @ w + b - y) ** 2).mean()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"b.grad {step}", b.grad)
            with T.no_grad():
                w -= 0.1 * w.grad
                if b.grad is not None:
                    b -= 0.1 * b.grad
            w.grad = None
            if step % 2:
                b.grad = None
        rec.add("w", w)
        rec.add("b", b)
        return rec

    check(run)
    assert replays.count > 0


# ------------------------------------------------------ 10. structures that could share a key


def test_constant_int_vs_float_in_one_place():
    """``xi * 1`` (int32, wraps around) and ``xi * 1.0`` (float32) differ only in the dtype of a
    constant; the overflow makes the difference visible in the loss and the gradient."""

    def run(T):
        xi = T.tensor([2147483647, 5], dtype=T.int32)
        x = T.tensor([1.0, 0.5])
        w = T.tensor([1.0, 2.0], requires_grad=True)
        rec = Record()
        for step, c in enumerate([1, 1.0, 1, 1.0, 1.0, 1]):
            loss = (w * (xi * c + 2) * x).sum()
            loss.backward()
            rec.add(f"c={c!r} loss {step}", loss.item())
            rec.add(f"c={c!r} w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)


def test_gradient_dtype_through_integer_factor():
    """d(w * xi)/dw is an integer expression; the gradient of a float32 w is float32."""

    def run(T):
        xi = T.tensor([3, 5], dtype=T.int32)
        w = T.tensor([1.0, 2.0], requires_grad=True)
        rec = Record()
        for step in range(3):
            loss = (w * xi).sum()
            loss.backward()
            rec.add(f"loss {step}", loss)
            rec.add(f"w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)


def test_gradient_dtype_with_changing_float_constant(replays):
    """A structure seen with several Python floats runs one program taking them as inputs; the
    gradient of a float32 w, which is just that float, stays float32."""

    def run(T):
        w = T.tensor([1.0, -2.0], requires_grad=True)
        rec = Record()
        for step, c in enumerate([0.5, 0.25, 0.125, 0.5, 0.25]):
            loss = (w * c).sum()
            loss.backward()
            rec.add(f"c={c!r} loss {step}", loss)
            rec.add(f"c={c!r} w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)


def test_constant_int_vs_float_value():
    def run(T):
        xi = T.tensor([2147483647, 5], dtype=T.int32)
        rec = Record()
        for step, c in enumerate([1, 1.0, 1, 1.0]):
            rec.add(f"xi * {c!r} + 2 ({step})", xi * c + 2)
        return rec

    check(run)


def test_constant_bool_vs_int_value():
    """``bt + True`` stays bool; ``bt + 1`` is int64 (True == 1 as Python numbers)."""

    def run(T):
        bt = T.tensor([True, False])
        rec = Record()
        for step, c in enumerate([True, 1, True, 1]):
            rec.add(f"bool + {c!r} ({step})", bt + c)
        return rec

    check(run)


def test_signed_zero_constants(replays):
    """0.0 and -0.0 are equal numbers, but d(w * c * x)/dw = c * x keeps the sign of c."""

    def run(T):
        w = T.tensor([1.0, -2.0], requires_grad=True)
        x = T.tensor([3.0, 4.0])
        rec = Record()
        for step, c in enumerate([0.5, 0.25, -0.0, 0.0, -0.0, 0.0, 0.0, -0.0]):
            loss = (w * c * x).sum()
            loss.backward()
            rec.add(f"c={c!r} w.grad signbit {step}", bool(np.signbit(snap(w.grad)).any()))
            rec.add(f"c={c!r} w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)


@pytest.mark.parametrize("b_shape", [(), (1,), (3,), (2, 1), (1, 3), (2, 3)])
def test_broadcast_shapes(b_shape, replays):
    rx = rng(10)
    x_n = f32(rx.standard_normal((2, 3)))
    b_n = f32(rx.standard_normal(b_shape))

    def run(T):
        x = T.tensor(x_n)
        w = T.tensor(W_N, requires_grad=True)
        b = T.tensor(b_n, requires_grad=True)
        rec = Record()
        for step in range(3):
            loss = ((x * w + b) ** 2).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"b.grad {step}", b.grad)
            with T.no_grad():
                b -= 0.1 * b.grad
            w.grad = None
            b.grad = None
        return rec

    check(run)


def test_broadcast_shapes_interleaved(replays):
    """Biases of several shapes used in turn in one loop, with one shared weight."""
    rx = rng(11)
    x_n = f32(rx.standard_normal((2, 3)))
    shapes = [(), (1,), (3,), (2, 1), (1, 3)]
    b_ns = [f32(rx.standard_normal(s)) for s in shapes]

    def run(T):
        x = T.tensor(x_n)
        w = T.tensor(W_N, requires_grad=True)
        bs = [T.tensor(b, requires_grad=True) for b in b_ns]
        rec = Record()
        for step in range(3 * len(bs)):  # rounds 2 and 3: w and b pending, one structure per shape
            b = bs[step % len(bs)]
            loss = ((x * w + b) ** 2).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"b.grad {step}", b.grad)
            with T.no_grad():
                w -= 0.01 * w.grad
                b -= 0.01 * b.grad
            w.grad = None
            b.grad = None
        return rec

    check(run)
    assert replays.count > 0


def test_dtypes_interleaved(replays):
    def run(T):
        x32 = T.tensor(X_N[0])
        x64 = T.tensor(X_N[0].astype(np.float64))
        w32 = T.tensor(W_N, requires_grad=True)
        w64 = T.tensor(W_N.astype(np.float64) + 1e-9, requires_grad=True)
        rec = Record()
        pairs = [(x32, w32), (x64, w64), (x32, w64), (x64, w32)]
        for step in range(8):
            x, w = pairs[step % 4]
            loss = (T.exp(x * w) * 1e-3).sum()
            loss.backward()
            rec.add(f"loss {step}", loss)
            rec.add(f"w32.grad {step}", w32.grad)
            rec.add(f"w64.grad {step}", w64.grad)
            with T.no_grad():
                w -= 0.1 * w.grad
            w32.grad = None
            w64.grad = None
        rec.add("w32", w32)
        rec.add("w64", w64)
        return rec

    check(run)
    assert replays.count > 0


REDUCTIONS = {
    "sum()": lambda T, h: h.sum(),
    "sum(0)": lambda T, h: h.sum(0),
    "sum(1)": lambda T, h: h.sum(1),
    "sum(-1,keepdim)": lambda T, h: h.sum(-1, keepdim=True),
    "sum((0,1))": lambda T, h: h.sum((0, 1)),
    "mean(0)": lambda T, h: h.mean(0),
    "mean(1)": lambda T, h: h.mean(1),
    "amax(1)": lambda T, h: T.amax(h, 1),
    "amax(0)": lambda T, h: T.amax(h, 0),
    "logsumexp(0)": lambda T, h: T.logsumexp(h, 0),
    "logsumexp(1)": lambda T, h: T.logsumexp(h, 1),
}


def test_reductions_with_different_dims(replays):
    rx = rng(12)
    x_n = f32(rx.standard_normal((2, 3)))
    names = list(REDUCTIONS)

    def run(T):
        x = T.tensor(x_n)
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step, name in enumerate(names + names[::-1]):
            r = REDUCTIONS[name](T, x * w)
            coeff = T.tensor(np.arange(1, r.numel() + 1, dtype=np.float32).reshape(tuple(r.shape)))
            loss = (r * r * coeff).sum()
            loss.backward()
            rec.add(f"{name} loss {step}", loss.item())
            rec.add(f"{name} w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)
    assert replays.count > 0


SHAPE_OPS = {
    "reshape(3,2)": lambda h: h.reshape(3, 2),
    "reshape(6)": lambda h: h.reshape(6),
    "t()": lambda h: h.t(),
    "transpose(0,1)": lambda h: h.transpose(0, 1),
    "permute(1,0)": lambda h: h.permute(1, 0),
    "h[0]": lambda h: h[0],
    "h[1]": lambda h: h[1],
    "h[:,1:]": lambda h: h[:, 1:],
    "h[:,:2]": lambda h: h[:, :2],
    "h[...,0]": lambda h: h[..., 0],
    "h[...,2]": lambda h: h[..., 2],
    "unsqueeze(0)": lambda h: h.unsqueeze(0),
    "unsqueeze(2)": lambda h: h.unsqueeze(2),
}


def test_shape_ops_with_different_attributes(replays):
    rx = rng(13)
    x_n = f32(rx.standard_normal((2, 3)))
    names = list(SHAPE_OPS)

    def run(T):
        x = T.tensor(x_n)
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step, name in enumerate(names + names[::-1]):
            r = SHAPE_OPS[name](x * w)
            coeff = T.tensor(np.arange(1, r.numel() + 1, dtype=np.float32))
            loss = (r.reshape(-1) * coeff).sum()
            loss.backward()
            rec.add(f"{name} loss {step}", loss.item())
            rec.add(f"{name} w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)
    assert replays.count > 0


def test_powers_and_constants(replays):
    forms = [lambda w: w ** 2, lambda w: w ** 3, lambda w: w ** 2.0, lambda w: w * 2, lambda w: w * 3,
             lambda w: 2 ** w, lambda w: w / 2, lambda w: 2 / w, lambda w: w - 2, lambda w: 2 - w]

    def run(T):
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step, i in enumerate(list(range(len(forms))) * 2):
            loss = T.sin(forms[i](w)).sum()
            loss.backward()
            rec.add(f"form {i} loss {step}", loss.item())
            rec.add(f"form {i} w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)
    assert replays.count > 0


def test_zero_fill_of_different_shapes_and_dtypes():
    def run(T):
        rec = Record()
        for step in range(2):
            a = T.ones(3)
            a.zero_()
            rec.add(f"zeros (3,) {step}", a)
            b = T.ones(4)
            b.zero_()
            rec.add(f"zeros (4,) {step}", b)
            c = T.tensor([5, 6])
            c.zero_()
            rec.add(f"int zeros (2,) {step}", c)
            d = T.ones(2, dtype=T.float64)
            d.zero_()
            rec.add(f"float64 zeros (2,) {step}", d)
        return rec

    check(run)


def test_zero_filled_buffer_in_backward(replays):
    """A buffer zero-filled in place (no_grad) then used in the loss: its shape matters."""

    def run(T):
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(6):
            buf = T.ones(1 if step % 2 else 3)
            buf.zero_()
            loss = (buf + 1).sum() * w.sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)


def test_backward_inputs_alternating(replays):
    choice = ["w", "b", "both", "w", "b", "both", "b", "w"]

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w = T.tensor(W_N, requires_grad=True)
        b = T.tensor(0.3, requires_grad=True)
        rec = Record()
        for step, which in enumerate(choice):
            loss = ((X @ w + b - y) ** 2).mean()
            inputs = {"w": [w], "b": [b], "both": [w, b]}[which]
            loss.backward(inputs=inputs)
            rec.add(f"{which} w.grad {step}", w.grad)
            rec.add(f"{which} b.grad {step}", b.grad)
            with T.no_grad():
                for p in (w, b):
                    if p.grad is not None:
                        p -= 0.1 * p.grad
            w.grad = None
            b.grad = None
        return rec

    check(run)
    assert replays.count > 0


def test_temporary_leaf_requiring_grad_vs_kept_leaf(replays):
    """Same kinds; in one graph the second leaf's tensor is gone (no target), in the other alive."""

    def run(T):
        x = T.tensor(X_N[0])
        w = T.tensor(W_N, requires_grad=True)
        v = T.tensor(W2_N, requires_grad=True)
        rec = Record()
        for step in range(6):
            if step % 2:
                loss = (x * w * T.tensor(W2_N, requires_grad=True)).sum()
            else:
                loss = (x * w * v).sum()
            loss.backward()
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"v.grad {step}", v.grad)
            w.grad = None
            v.grad = None
        return rec

    check(run)
    assert replays.count > 0


def test_leaf_root(replays):
    """backward from a 0-dim leaf (valued, then pending after an in-place update)."""

    def run(T):
        b = T.tensor(0.5, requires_grad=True)
        rec = Record()
        for step in range(5):
            b.backward()
            rec.add(f"b.grad {step}", b.grad)
            with T.no_grad():
                b -= 0.25 * b.grad
            if step % 2:
                b.grad = None
            rec.add(f"b {step}", b)
        return rec

    check(run)


def test_nonscalar_root_with_gradient():
    def run(T):
        x = T.tensor(X_N[0])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(4):
            out = T.sin(x * w)
            out.backward(T.tensor(X_N[step % 4]))
            rec.add(f"w.grad {step}", w.grad)
            w.grad = None
        return rec

    check(run)


@pytest.mark.parametrize("terms", [32, 33])
def test_many_arguments_around_max_args(terms, replays):
    """64 arguments still have a kind; 66 do not (backward walks)."""
    rx = rng(14)
    xs_n = [f32(rx.standard_normal(2)) for _ in range(terms)]

    def run(T):
        xs = [T.tensor(a) for a in xs_n]
        w = T.tensor(W_N[:2], requires_grad=True)
        rec = Record()
        for step in range(3):
            loss = (w * xs[0]).sum()
            for x in xs[1:]:
                loss = loss + (w * x).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            with T.no_grad():
                w -= 0.01 * w.grad
            w.grad = None
        return rec

    check(run)


@pytest.mark.parametrize("depth", [5, 6])
def test_exponentially_repeated_arguments(depth):
    """h = h * x + h doubles the argument list each time: 63 arguments at depth 5, 127 at 6."""

    def run(T):
        x = T.tensor(f32([0.9, -0.8]))
        w = T.tensor(f32([0.3, 0.6]), requires_grad=True)
        rec = Record()
        for step in range(3):
            h = w
            for _ in range(depth):
                h = h * x + h
            loss = h.sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            with T.no_grad():
                w -= 0.01 * w.grad
            w.grad = None
        return rec

    check(run)


def test_kinds_forgotten_mid_loop(monkeypatch, replays):
    """Interned kinds are dropped when there are too many: replay must stay right across it."""
    monkeypatch.setattr(kinds, "MAX_KINDS", len(kinds._kinds) + 7)

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w1 = T.tensor(W_N, requires_grad=True)
        w2 = T.tensor(W2_N, requires_grad=True)
        rec = Record()
        for step in range(12):
            p, q = (w1, w2) if step % 2 else (w2, w1)
            loss = ((X @ p - y) ** 2).mean() + (T.sin(q) * 0.5).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w1.grad {step}", w1.grad)
            rec.add(f"w2.grad {step}", w2.grad)
            with T.no_grad():
                w1 -= 0.05 * w1.grad
                w2 -= 0.05 * w2.grad
            w1.grad.zero_()
            w2.grad.zero_()
        return rec

    check(run)


def test_buffer_updated_in_place_and_used(replays):
    """A non-parameter buffer (no grad) updated in place each step, used in the loss, sometimes read."""

    def run(T):
        X, y = T.tensor(X_N), T.tensor(Y_N)
        w = T.tensor(W_N, requires_grad=True)
        running = T.zeros(3)
        rec = Record()
        for step in range(10):
            loss = ((X @ (w + running * 0.1) - y) ** 2).mean()
            if step % 4 == 2:
                rec.add(f"running {step}", running)
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            with T.no_grad():
                running.mul_(0.9)
                running.add_(w.grad * 0.1)
                w -= 0.1 * w.grad
            w.grad = None
        rec.add("running", running)
        rec.add("w", w)
        return rec

    check(run)
    assert replays.count > 0


def test_buffers_zeroed_together(replays):
    """Tensors zeroed in place (no_grad) then updated separately and used in one loss."""

    def run(T):
        w = T.tensor(W_N, requires_grad=True)
        a, b, c = T.ones(3), T.ones(3), T.ones(3)
        rec = Record()
        for step in range(6):
            with T.no_grad():
                a.zero_()
                b.zero_()
                c.zero_()
                a.add_(w * 0.5)
                if step % 2:
                    b.add_(1.0)
                    rec.add(f"b {step}", b)
            loss = (w * a + w * w * b + c).sum()
            loss.backward()
            rec.add(f"loss {step}", loss.item())
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"a {step}", a)
            rec.add(f"c {step}", c)
            with T.no_grad():
                w -= 0.1 * w.grad
            w.grad.zero_()
        return rec

    check(run)
    assert replays.count > 0


def test_retained_graph_backward_after_update(replays):
    """A retained graph backpropagated again after its parameter was updated in place: the
    gradient still lands on (and adds to) the parameter's .grad."""

    def run(T):
        x = T.tensor(X_N[1])
        w = T.tensor(W_N, requires_grad=True)
        rec = Record()
        for step in range(4):
            loss = (x * w).sum()
            loss.backward(retain_graph=True)
            with T.no_grad():
                w -= 0.1 * w.grad
            loss.backward()
            rec.add(f"w.grad {step}", w.grad)
            rec.add(f"w {step}", w)
            w.grad = None
        return rec

    check(run)
    assert replays.count > 0
