"""Parity tests for backward's replay (symgrad.kinds / symgrad.replay) against PyTorch.

``backward`` finds a compiled program from the root's kind (plus the patterns of arguments,
pending leaves, targets and accumulation) without walking the graph.  If a replay reused a
program for a graph it does not describe, values or gradients would differ from PyTorch's.

Each scenario is a function ``scenario_name(T, **variant)`` of a library ``T`` (symgrad or
torch): a torch-style loop that records values, gradients, shapes and dtypes at every step, so
that each structure is first walked and then replayed.  ``@scenario`` registers it, once per
variant, and the one test at the end, ``test_matches_pytorch``, runs it with symgrad and with
PyTorch on the same NumPy numbers, compares the two records and, unless registered with
``replays=False``, checks that backward replayed at least once.  The program cache is emptied
before each run (the ``fresh_cache`` fixture).

Scenarios come in numbered sections by what they vary: training loops, repeated arguments,
gradient accumulation, pending parameters, retain_graph / retain_grad, integers and no-grad
tensors, structures that could share a key, in-place ops and ``.data``, indexing and losses, the
functional API, grad modes and threads, and many-parameter models.
"""
from __future__ import annotations

import functools
import threading
import warnings
from itertools import product
from types import SimpleNamespace
from typing import Callable, NamedTuple

import numpy as np
import pytest

import codegen.compile as programs
import symgrad
from symgrad import kinds
from replay_parity import (  # noqa: F401  (fresh_cache and replays are fixtures, found by name)
    RTOL, ATOL, Record, check, f32, fresh_cache, replays, rng, snap, torch)


# --------------------------------------------------------------------------- registration

SCENARIOS = []


class Expect(NamedTuple):
    replays: bool  # backward must run a replayed program at least once
    rtol: float
    atol: float
    setup: Callable | None  # setup(monkeypatch), before both runs


def id_part(value):
    if isinstance(value, tuple):  # a shape
        return "x".join(map(str, value)) or "scalar"
    return str(value)


def scenario(replays=True, rtol=RTOL, atol=ATOL, setup=None, marks=(), **axes):
    """Register ``run(T, **variant)`` for ``test_matches_pytorch``, once for each combination of
    the values listed in ``axes`` (once if there are none)."""
    def register(run):
        for values in product(*axes.values()):
            SCENARIOS.append(pytest.param(
                run, dict(zip(axes, values)), Expect(replays, rtol, atol, setup),
                id="-".join([run.__name__, *map(id_part, values)]), marks=marks))
        return run
    return register


# --------------------------------------------------------------------------------- helpers

class Steps(Record):
    """A Record with a shorthand for the values of one step."""

    def at(self, step, **values):
        """Record each value as ``"<name> <step>"``, in the order given."""
        for name, value in values.items():
            self.add(f"{name} {step}", value)


def descend(T, lr, *params):
    """One plain SGD step, in place under no_grad."""
    with T.no_grad():
        for p in params:
            p -= lr * p.grad


def with_grad(*params):
    return [p for p in params if p.grad is not None]


def clear_grads(*params):
    for p in params:
        p.grad = None


def there_and_back(names):
    """Every name, then in reverse, then again: each structure is walked, then replayed."""
    return names + names[::-1] + names


def arange_like(T, r):
    """1, 2, 3, ... in r's shape: weights that tell r's elements apart."""
    return T.tensor(np.arange(1, r.numel() + 1, dtype=np.float32).reshape(tuple(r.shape)))


def dataset(seed, rows, cols):
    r = rng(seed)
    return SimpleNamespace(X=f32(r.standard_normal((rows, cols))), y=f32(r.standard_normal(rows)),
                           w=f32(r.standard_normal(cols)), v=f32(r.standard_normal(cols)),
                           M=f32(r.standard_normal((cols, cols)) * 0.5))


TALL = dataset(seed=1, rows=4, cols=3)
WIDE = dataset(seed=21, rows=3, cols=4)


# ------------------------------------------------------------------ 1. torch-style training loops

SGD_OPTIONS = {"sgd": {}, "sgd_momentum": {"momentum": 0.9, "weight_decay": 0.01},
               "sgd_nesterov_zero_grad_keep": {"momentum": 0.5, "nesterov": True}}


@scenario(style=["isub", "sub_", "data", "data_assign", "grad_none", *SGD_OPTIONS])
def training_loop(T, style):
    lr = 0.05
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w = T.tensor(TALL.w, requires_grad=True)
    b = T.tensor(0.1, requires_grad=True)
    opt = T.optim.SGD([w, b], lr=lr, **SGD_OPTIONS[style]) if style in SGD_OPTIONS else None
    rec = Steps()
    for step in range(20):
        loss = ((X @ w + b - y) ** 2).mean()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=style != "sgd_nesterov_zero_grad_keep")
            continue
        if style == "isub":
            descend(T, lr, w, b)
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
            clear_grads(w, b)
        else:
            w.grad.zero_()
            b.grad.zero_()
    rec.at("final", w=w, b=b)
    return rec


@scenario(zeroing=["none", "zero_"])
def alternating_parameters(T, zeroing):
    """Two parameters used in turn in one structure."""
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w1 = T.tensor(TALL.w, requires_grad=True)
    w2 = T.tensor(TALL.v, requires_grad=True)
    b = T.tensor(-0.2, requires_grad=True)
    rec = Steps()
    for step in range(12):
        w = w1 if step % 2 == 0 else w2
        loss = ((X @ w + b - y) ** 2).mean()
        loss.backward()
        rec.at(step, loss=loss.item(), w1_grad=w1.grad, w2_grad=w2.grad, b_grad=b.grad)
        descend(T, 0.1, *with_grad(w1, w2, b))
        for p in (w1, w2, b):
            if zeroing == "none":
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()
    rec.at("final", w1=w1, w2=w2, b=b)
    return rec


@scenario()
def swapped_roles(T):
    """f(w1, w2) and f(w2, w1): one kind, the same argument pattern, the sources swapped."""
    X = T.tensor(TALL.X)
    w1 = T.tensor(TALL.w, requires_grad=True)
    w2 = T.tensor(TALL.v, requires_grad=True)
    rec = Steps()
    for step in range(10):
        p, q = (w1, w2) if step % 3 != 2 else (w2, w1)
        loss = (T.sin(X @ p) * (X @ q) ** 2).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w1_grad=w1.grad, w2_grad=w2.grad)
        descend(T, 0.05, w1, w2)
        clear_grads(w1, w2)
    rec.at("final", w1=w1, w2=w2)
    return rec


@scenario(schedule=["decay", "cyclic", "sgd_param_group"])
def learning_rate_schedule(T, schedule):
    steps = 14
    if schedule == "decay":
        lrs = [0.2 * 0.8 ** t for t in range(steps)]
    else:
        lrs = [[0.1, 0.02, 0.3][t % 3] for t in range(steps)]
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w = T.tensor(TALL.w, requires_grad=True)
    opt = T.optim.SGD([w], lr=0.1, momentum=0.5) if schedule == "sgd_param_group" else None
    rec = Steps()
    for step, lr in enumerate(lrs):
        target_shift = [0.0, 1, 0.5, -2.0][step % 4]  # a Python number inside the loss too
        loss = ((X @ w - y - target_shift) ** 2).mean()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        if opt is not None:
            opt.param_groups[0]["lr"] = lr
            opt.step()
            opt.zero_grad()
        else:
            descend(T, lr, w)
            w.grad = None
        rec.at(step, w=w)
    return rec


@scenario(replays=False, setup=lambda monkeypatch: monkeypatch.setattr(kinds, "MAX_KINDS", len(kinds._kinds) + 7))
def kinds_forgotten_mid_loop(T):
    """Interned kinds are dropped when there are too many: replay must stay right across it."""
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w1 = T.tensor(TALL.w, requires_grad=True)
    w2 = T.tensor(TALL.v, requires_grad=True)
    rec = Steps()
    for step in range(12):
        p, q = (w1, w2) if step % 2 else (w2, w1)
        loss = ((X @ p - y) ** 2).mean() + (T.sin(q) * 0.5).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w1_grad=w1.grad, w2_grad=w2.grad)
        descend(T, 0.05, w1, w2)
        w1.grad.zero_()
        w2.grad.zero_()
    return rec


# --------------------------------------------------------------------- 2. repeated arguments

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


@scenario(weights=["fixed", "updated"])
def repeated_arguments(T, weights):
    names = list(EXPRESSIONS)
    order = names + names[::-1] + names[::2] + names[1::2]
    x = T.tensor(f32(rng(3).standard_normal(3)))
    w = T.tensor(f32([0.5, -1.5, 2.0]), requires_grad=True)
    v = T.tensor(f32([-0.7, 0.3, 1.1]), requires_grad=True)
    rec = Steps()
    for step, name in enumerate(order):
        loss = EXPRESSIONS[name](T, x, w, v)
        loss.backward()
        rec.at(f"{name} {step}", loss=loss.item(), w_grad=w.grad, v_grad=v.grad)
        if weights == "updated":  # w and v are then pending (computed inside the next program)
            descend(T, 0.01, *with_grad(w, v))
        clear_grads(w, v)
    rec.at("final", w=w, v=v)
    return rec


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


@scenario()
def repeated_arguments_one_target(T):
    """The same kinds and target positions; only the repetition of the arguments differs."""
    names = list(ONE_TARGET)
    rx = rng(5)
    x, y = T.tensor(f32(rx.standard_normal(3))), T.tensor(f32(rx.standard_normal(3)))
    w = T.tensor(f32([0.5, -1.5, 2.0]), requires_grad=True)
    v = T.tensor(f32([-0.7, 0.3, 1.1]), requires_grad=True)
    rec = Steps()
    for step, name in enumerate(there_and_back(names)):
        loss = ONE_TARGET[name](T, x, y, w, v)
        loss.backward(inputs=[w])
        rec.at(f"{name} {step}", loss=loss.item(), w_grad=w.grad, v_grad=v.grad)
        w.grad = None
    return rec


@scenario()
def repeated_pending_leaves_one_target(T):
    """Parameters refilled in place with one constant: p and q are distinct pending leaves of one
    kind with no arguments, so only the pattern of pending leaves tells p * p from p * q."""
    forms = ["x*p*p", "x*p*q", "x*p*p", "x*q*p", "x*p*q", "x*q*q"]
    x = T.tensor(f32([0.5, -2.0, 3.0]))
    p = T.tensor(f32([1.0, 2.0, 3.0]), requires_grad=True)
    q = T.tensor(f32([4.0, 5.0, 6.0]), requires_grad=True)
    leaves = {"p": p, "q": q}
    rec = Steps()
    for step, form in enumerate(forms * 2):
        with T.no_grad():
            p.fill_(1.5)
            q.fill_(1.5)
        loss = (x * leaves[form[2]] * leaves[form[4]]).sum()
        loss.backward(inputs=[p])
        rec.at(f"{form} {step}", loss=loss.item(), p_grad=p.grad, q_grad=q.grad)
        p.grad = None
    return rec


# ------------------------------------------------------------------- 3. gradient accumulation

ACTIONS = ["acc", "acc", "acc", "zero", "acc", "none", "acc", "acc", "set_full", "acc", "zero_w", "acc",
           "none_b", "acc", "set_expr", "acc", "scale", "acc", "set_used", "acc", "acc", "zero", "none", "acc"]


@scenario()
def accumulation(T):
    rx = rng(4)
    xs = [f32(rx.standard_normal(3)) for _ in ACTIONS]
    w = T.tensor(TALL.w, requires_grad=True)
    b = T.tensor(0.3, requires_grad=True)
    rec = Steps()
    for step, action in enumerate(ACTIONS):
        x = T.tensor(xs[step])
        if action == "zero":
            w.grad.zero_()
            b.grad.zero_()
        elif action == "zero_w":
            w.grad.zero_()
        elif action == "none":
            clear_grads(w, b)
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
        rec.at(f"{action} {step}", loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
    return rec


@scenario()
def accumulation_retain_graph_then_new_graphs(T):
    """Several backwards of one graph and of fresh graphs of the same kind, never zeroed."""
    x = T.tensor(TALL.X[0])
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(4):
        loss = (T.sin(w) * x).sum()
        loss.backward(retain_graph=True)
        rec.at(step, grad_a=w.grad)
        loss.backward()
        rec.at(step, grad_b=w.grad)
        loss2 = (T.sin(w) * x).sum()
        loss2.backward()
        rec.at(step, grad_c=w.grad)
    return rec


@scenario()
def grad_assigned_from_another_parameter_grad(T):
    """``v.grad = w.grad`` (one tensor for both), then separate backwards into each."""
    x = T.tensor(WIDE.X[1])
    w = T.tensor(WIDE.w, requires_grad=True)
    v = T.tensor(WIDE.v, requires_grad=True)
    rec = Steps()
    for step in range(5):
        (T.sin(w) * x).sum().backward()
        v.grad = w.grad
        (v * x * 3).sum().backward()
        rec.at(step, w_grad=w.grad, v_grad=v.grad)
        clear_grads(w, v)
    return rec


@scenario(replays=False)
def shared_grad_tensor_between_parameters(T):
    """Two parameters whose .grad is one tensor: PyTorch accumulates into it in place, so it
    receives both gradients."""
    x = T.tensor(WIDE.X[0])
    w = T.tensor(WIDE.w, requires_grad=True)
    v = T.tensor(WIDE.v, requires_grad=True)
    rec = Steps()
    for step in range(4):
        g = T.zeros(4) + 1.0
        w.grad = g
        v.grad = g
        loss = (w * x + v * x * 2).sum()
        loss.backward()
        rec.at(step, w_grad=w.grad, v_grad=v.grad, g=g)
        rec.add(f"w.grad is v.grad {step}", w.grad is v.grad)
    return rec


# ------------------------------------------- 4. pending parameters (updated, not computed yet)

def peek(T, w, how):
    """Look at w's values (which computes a pending w) in one of several ways."""
    if how == "repr":
        return repr(w)
    if how == "item":
        return w.sum().item()
    if how == "numpy":
        return w.detach().numpy().copy()
    if how == "tolist":
        return w.tolist()
    return None


PEEKS = ["none", "repr", "item", "numpy", "tolist", "loss_item_first", "after_record", "none", "none",
         "repr", "after_record", "item", "none"]


@scenario()
def pending_parameter_peeked(T):
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w = T.tensor(TALL.w, requires_grad=True)
    b = T.tensor(0.1, requires_grad=True)
    rec = Steps()
    for step, how in enumerate(PEEKS):
        if how not in ("after_record", "loss_item_first"):
            peek(T, w, how)
        loss = ((X @ w + b - y) ** 2).mean()
        if how == "after_record":
            peek(T, w, "item")
            peek(T, b, "repr")
        if how == "loss_item_first":
            rec.at(step, loss_before_backward=loss.item())
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.05, w, b)
        w.grad.zero_()
        b.grad.zero_()
    rec.at("final", w=w, b=b)
    return rec


MIDDLE_PEEKS = ["none", "repr", "none", "item", "numpy", "none", "after", "repr", "after", "none", "item"]


@scenario(replays=False)
def pending_parameter_used_before_and_after_realized(T):
    """a = w * 2 while w is pending, then w is computed (print / item), then c = w * 3."""
    x = T.tensor(TALL.X[1])
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step, how in enumerate(MIDDLE_PEEKS):
        a = w * 2
        if how in ("repr", "item", "numpy"):
            rec.at(step, peek=peek(T, w, how) if how != "repr" else w.sum().item())
        c = T.sin(w) * 3
        loss = ((a + c) * x).sum()
        if how == "after":
            rec.at(step, peek_after=w.sum().item())
        loss.backward()
        rec.at(f"{how} {step}", loss=loss.item(), w_grad=w.grad)
        descend(T, 0.1, w)
        w.grad = None
    rec.at("final", w=w)
    return rec


@scenario(replays=False, change=["in_place_update", "requires_grad_toggle"])
def parameter_changed_between_two_uses(T, change):
    """a uses w; then w is updated in place under no_grad, or its requires_grad is switched off
    and on; then c uses w.  Both are the one leaf w in PyTorch, so w.grad is the sum of both
    contributions."""
    x = T.tensor(TALL.X[2])
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(4):
        a = w * 2
        if change == "in_place_update":
            with T.no_grad():
                w -= 0.1
        else:
            w.requires_grad_(False)
            w.requires_grad_(True)
        c = w * 3
        loss = ((a + c) * x).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        w.grad = None
    return rec


@scenario()
def two_losses_share_a_pending_parameter(T):
    x = T.tensor(TALL.X[3])
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(6):
        l1 = (w * x).sum()
        l2 = (T.sin(w) ** 2).sum()
        if step % 2:
            l1.backward()
            rec.at(step, after_l1=w.grad)
            l2.backward()
        else:
            l2.backward()
            rec.at(step, after_l2=w.grad)
            l1.backward()
        rec.at(step, w_grad=w.grad, losses=l1.item() + l2.item())
        descend(T, 0.1, w)
        w.grad.zero_()
    rec.at("final", w=w)
    return rec


@scenario()
def pending_detach_and_twice_updated(T):
    """Pending leaves from pending leaves: detach of a pending parameter, two updates per step."""
    x = T.tensor(TALL.X[0])
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(8):
        if step % 4 == 3:
            loss = (w * w.detach() * x).sum()
        else:
            loss = (w * T.cos(w.detach()) * x).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        with T.no_grad():
            w -= 0.1 * w.grad
            if step % 2:
                w *= 0.9
        w.grad = None
    rec.at("final", w=w)
    return rec


@scenario()
def nonleaf_computed_then_reused_after_parameter_update(T):
    """An intermediate recorded while w was pending, looked at (computed), then used in later
    graphs after w moved on: every graph sees the values the intermediate had when recorded."""
    X = T.tensor(WIDE.X)
    w = T.tensor(WIDE.w, requires_grad=True)
    v = T.tensor(WIDE.v, requires_grad=True)
    rec = Steps()
    for step in range(6):
        h = T.tanh(X @ w)  # w pending from step 1 on
        if step % 2:
            rec.at(step, h_peeked=h)
        l1 = (h * h).sum()
        l1.backward(retain_graph=True)
        descend(T, 0.1, w)
        w.grad = None
        l2 = (h * (X @ v)).sum()  # h's graph refers to the old w
        l2.backward()
        rec.at(step, l2=l2.item(), w_grad_from_l2=w.grad, v_grad=v.grad)
        descend(T, 0.1, v)
        clear_grads(w, v)
    rec.at("final", w=w, v=v)
    return rec


# ----------------------------------------------------------------- 5. retain_graph, retain_grad

@scenario()
def retain_graph_then_third_backward_raises(T):
    X = T.tensor(TALL.X)
    w = T.tensor(TALL.w, requires_grad=True)
    b = T.tensor(0.5, requires_grad=True)
    rec = Steps()
    for step in range(5):
        loss = (T.sin(X @ w) * b).sum()
        loss.backward(retain_graph=True)
        rec.at(step, w_grad_once=w.grad)
        loss.backward()
        rec.at(step, w_grad_twice=w.grad, b_grad_twice=b.grad)
        with pytest.raises(RuntimeError):
            loss.backward()
        rec.at(step, w_grad_after_error=w.grad)
        descend(T, 0.01, w)
        clear_grads(w, b)
    return rec


@scenario()
def second_backward_without_retain_raises_on_replay(T):
    x = T.tensor(TALL.X[0])
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(5):
        loss = (x * w * w).sum()
        loss.backward()
        rec.at(step, w_grad=w.grad)
        with pytest.raises(RuntimeError):
            loss.backward()
        rec.at(step, w_grad_after_error=w.grad)
        w.grad = None
    return rec


@scenario()
def retained_graph_backward_after_update(T):
    """A retained graph backpropagated again after its parameter was updated in place: the
    gradient still lands on (and adds to) the parameter's .grad."""
    x = T.tensor(TALL.X[1])
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(4):
        loss = (x * w).sum()
        loss.backward(retain_graph=True)
        descend(T, 0.1, w)
        loss.backward()
        rec.at(step, w_grad=w.grad, w=w)
        w.grad = None
    return rec


@scenario()
def index_roots_of_one_retained_graph(T):
    """Several scalar roots indexed out of one retained graph, in changing order."""
    orders = [(0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 1, 2), (1, 2, 0), (2, 0, 1), (1, 0, 2)]
    X = T.tensor(WIDE.X)
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step, order in enumerate(orders):
        out = T.sin(X @ w) * T.tensor(f32([1.0, 2.0, 3.0]))
        for k, i in enumerate(order):
            out[i].backward(retain_graph=k < 2)
            rec.add(f"out[{i}] w.grad {step}", w.grad)
        descend(T, 0.1, w)
        w.grad = None
    return rec


@scenario()
def retain_grad_in_loop(T):
    retain = [True, True, False, True, False, False, True, True]
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w = T.tensor(TALL.w, requires_grad=True)
    b = T.tensor(0.1, requires_grad=True)
    rec = Steps()
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
            warnings.simplefilter("ignore")  # .grad of a non-leaf that does not retain it
            rec.at(step, h_grad=h.grad, z_grad=z.grad)
        rec.at(step, w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.1, w, b)
        clear_grads(w, b)
    return rec


@scenario(replays=False)
def retain_grad_then_inplace(T):
    """``h.retain_grad()`` then an in-place op on h: PyTorch's h.grad is the gradient of h's
    latest version (retains_grad moves with in-place ops).  A retained non-leaf gradient is
    filled by walking, never by replay."""
    x = T.tensor(WIDE.X[0])
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step, op in enumerate(["mul_", "add_", "none", "mul_", "sin_chain", "none"]):
        h = w * 3
        h.retain_grad()
        if op == "mul_":
            h.mul_(2)
        elif op == "add_":
            h.add_(w)
        elif op == "sin_chain":
            h.mul_(x)
            h += 1
        loss = (T.sin(h) * x).sum()
        loss.backward()
        rec.at(f"{op} {step}", h_grad=h.grad, w_grad=w.grad)
        w.grad = None
    return rec


# ---------------------------------------------- 6. integers, no-grad tensors, requires_grad_

@scenario()
def integer_inputs_and_labels(T):
    rx = rng(9)
    X_int = rx.integers(-3, 4, size=(4, 3)).astype(np.int64)
    labels = [rx.integers(0, 5, size=4).astype(np.int64) for _ in range(8)]
    W0 = f32(rx.standard_normal((3, 5)) * 0.3)
    Xi = T.tensor(X_int)
    W = T.tensor(W0, requires_grad=True)
    rec = Steps()
    for step, lab in enumerate(labels):
        logits = Xi.float() @ W
        loss = T.nn.functional.cross_entropy(logits, T.tensor(lab)) + (Xi[:, 0] * W[0, 0]).sum() * 0.1
        loss.backward()
        rec.at(step, loss=loss.item(), W_grad=W.grad)
        descend(T, 0.2, W)
        W.grad.zero_()
    rec.at("final", W=W)
    return rec


@scenario()
def detached_intermediate_and_no_grad_tensors(T):
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
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
        rec.at(step, loss=loss.item(), w_grad=w.grad, scale_requires_grad=scale.requires_grad)
        descend(T, 0.05, w)
        w.grad = None
    rec.at("final", w=w)
    return rec


@scenario()
def parameter_made_under_no_grad(T):
    base = T.tensor(TALL.w, requires_grad=True)
    x = T.tensor(TALL.X[1])
    with T.no_grad():
        w = base * 2 + 1  # computed (lazily) without history
    w.requires_grad_()
    rec = Steps()
    rec.add("w is leaf", w.is_leaf)
    for step in range(6):
        loss = (T.sin(w) * x).sum() + (base * x).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, base_grad=base.grad)
        descend(T, 0.1, w)
        clear_grads(w, base)
    rec.at("final", w=w)
    return rec


@scenario()
def requires_grad_toggled_between_steps(T):
    flags = [True, True, False, False, True, False, True, True, False, True]
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w = T.tensor(TALL.w, requires_grad=True)
    b = T.tensor(0.2, requires_grad=True)
    rec = Steps()
    for step, flag in enumerate(flags):
        b.requires_grad_(flag)
        probe = T.sin(b * 2)  # its requires_grad comes from b's kind
        rec.at(step, probe_requires_grad=probe.requires_grad, probe_is_leaf=probe.is_leaf)
        loss = ((X @ w + b - y) ** 2).mean()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.1, *with_grad(w, b))
        w.grad = None
        if step % 2:
            b.grad = None
    rec.at("final", w=w, b=b)
    return rec


@scenario()
def buffer_updated_in_place_and_used(T):
    """A non-parameter buffer (no grad) updated in place each step, used in the loss, sometimes read."""
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w = T.tensor(TALL.w, requires_grad=True)
    running = T.zeros(3)
    rec = Steps()
    for step in range(10):
        loss = ((X @ (w + running * 0.1) - y) ** 2).mean()
        if step % 4 == 2:
            rec.at(step, running=running)
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        with T.no_grad():
            running.mul_(0.9)
            running.add_(w.grad * 0.1)
            w -= 0.1 * w.grad
        w.grad = None
    rec.at("final", running=running, w=w)
    return rec


@scenario()
def buffers_zeroed_together(T):
    """Tensors zeroed in place (no_grad) then updated separately and used in one loss."""
    w = T.tensor(TALL.w, requires_grad=True)
    a, b, c = T.ones(3), T.ones(3), T.ones(3)
    rec = Steps()
    for step in range(6):
        with T.no_grad():
            a.zero_()
            b.zero_()
            c.zero_()
            a.add_(w * 0.5)
            if step % 2:
                b.add_(1.0)
                rec.at(step, b=b)
        loss = (w * a + w * w * b + c).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, a=a, c=c)
        descend(T, 0.1, w)
        w.grad.zero_()
    return rec


@scenario(replays=False)
def zero_fill_of_different_shapes_and_dtypes(T):
    rec = Steps()
    for step in range(2):
        for name, make in [("(3,)", lambda: T.ones(3)), ("(4,)", lambda: T.ones(4)),
                           ("int (2,)", lambda: T.tensor([5, 6])),
                           ("float64 (2,)", lambda: T.ones(2, dtype=T.float64))]:
            t = make()
            t.zero_()
            rec.add(f"zeros {name} {step}", t)
    return rec


@scenario(replays=False)
def zero_filled_buffer_in_backward(T):
    """A buffer zero-filled in place (no_grad) then used in the loss: its shape matters."""
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(6):
        buf = T.ones(1 if step % 2 else 3)
        buf.zero_()
        loss = (buf + 1).sum() * w.sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        w.grad = None
    return rec


# ----------------------------------------------------- 7. structures that could share a key

@scenario(replays=False)
def constant_int_vs_float_in_one_place(T):
    """``xi * 1`` (int32, wraps around) and ``xi * 1.0`` (float32) differ only in the dtype of a
    constant; the overflow makes the difference visible in the loss and the gradient."""
    xi = T.tensor([2147483647, 5], dtype=T.int32)
    x = T.tensor([1.0, 0.5])
    w = T.tensor([1.0, 2.0], requires_grad=True)
    rec = Steps()
    for step, c in enumerate([1, 1.0, 1, 1.0, 1.0, 1]):
        loss = (w * (xi * c + 2) * x).sum()
        loss.backward()
        rec.at(f"c={c!r} {step}", loss=loss.item(), w_grad=w.grad)
        w.grad = None
    return rec


CONSTANTS_EQUAL_AS_NUMBERS = {  # a tensor, an op with a constant, constants equal as Python numbers
    "int32_times_1_or_1.0": (lambda T: T.tensor([2147483647, 5], dtype=T.int32), lambda t, c: t * c + 2,
                             [1, 1.0, 1, 1.0]),
    "bool_plus_True_or_1": (lambda T: T.tensor([True, False]), lambda t, c: t + c, [True, 1, True, 1]),
}


@scenario(replays=False, case=list(CONSTANTS_EQUAL_AS_NUMBERS))
def constants_equal_as_numbers(T, case):
    """``xi * 1`` is int32 (wraps around), ``xi * 1.0`` float32; ``bt + True`` stays bool,
    ``bt + 1`` is int64: the results differ although the constants compare equal."""
    make, op, constants = CONSTANTS_EQUAL_AS_NUMBERS[case]
    t = make(T)
    rec = Steps()
    for step, c in enumerate(constants):
        rec.add(f"with {c!r} {step}", op(t, c))
    return rec


@scenario(replays=False, factor=["int32_tensor", "changing_python_float"])
def gradient_dtype(T, factor):
    """d(w * c)/dw is c: an int32 tensor, or a Python float that changes every step (one program
    then takes it as an input).  The gradient of a float32 w is float32 either way."""
    w = T.tensor([1.0, -2.0], requires_grad=True)
    if factor == "int32_tensor":
        factors = [T.tensor([3, 5], dtype=T.int32)] * 3
    else:
        factors = [0.5, 0.25, 0.125, 0.5, 0.25]
    rec = Steps()
    for step, c in enumerate(factors):
        loss = (w * c).sum()
        loss.backward()
        rec.at(step, loss=loss, w_grad=w.grad)
        w.grad = None
    return rec


@scenario(replays=False)
def signed_zero_constants(T):
    """0.0 and -0.0 are equal numbers, but d(w * c * x)/dw = c * x keeps the sign of c."""
    w = T.tensor([1.0, -2.0], requires_grad=True)
    x = T.tensor([3.0, 4.0])
    rec = Steps()
    for step, c in enumerate([0.5, 0.25, -0.0, 0.0, -0.0, 0.0, 0.0, -0.0]):
        loss = (w * c * x).sum()
        loss.backward()
        rec.at(f"c={c!r} {step}", w_grad_signbit=bool(np.signbit(snap(w.grad)).any()), w_grad=w.grad)
        w.grad = None
    return rec


@scenario(replays=False, b_shape=[(), (1,), (3,), (2, 1), (1, 3), (2, 3)])
def broadcast_shapes(T, b_shape):
    rx = rng(10)
    x = T.tensor(f32(rx.standard_normal((2, 3))))
    w = T.tensor(TALL.w, requires_grad=True)
    b = T.tensor(f32(rx.standard_normal(b_shape)), requires_grad=True)
    rec = Steps()
    for step in range(3):
        loss = ((x * w + b) ** 2).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.1, b)
        clear_grads(w, b)
    return rec


@scenario()
def broadcast_shapes_interleaved(T):
    """Biases of several shapes used in turn in one loop, with one shared weight."""
    rx = rng(11)
    x = T.tensor(f32(rx.standard_normal((2, 3))))
    shapes = [(), (1,), (3,), (2, 1), (1, 3)]
    bs = [T.tensor(f32(rx.standard_normal(s)), requires_grad=True) for s in shapes]
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(3 * len(bs)):  # rounds 2 and 3: w and b pending, one structure per shape
        b = bs[step % len(bs)]
        loss = ((x * w + b) ** 2).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.01, w, b)
        clear_grads(w, b)
    return rec


@scenario()
def dtypes_interleaved(T):
    x32 = T.tensor(TALL.X[0])
    x64 = T.tensor(TALL.X[0].astype(np.float64))
    w32 = T.tensor(TALL.w, requires_grad=True)
    w64 = T.tensor(TALL.w.astype(np.float64) + 1e-9, requires_grad=True)
    pairs = [(x32, w32), (x64, w64), (x32, w64), (x64, w32)]
    rec = Steps()
    for step in range(8):
        x, w = pairs[step % 4]
        loss = (T.exp(x * w) * 1e-3).sum()
        loss.backward()
        rec.at(step, loss=loss, w32_grad=w32.grad, w64_grad=w64.grad)
        descend(T, 0.1, w)
        clear_grads(w32, w64)
    rec.at("final", w32=w32, w64=w64)
    return rec


@scenario()
def parameter_dtype_changed_through_data(T):
    """``p.data = ...`` may change a parameter's dtype (PyTorch allows it); the structure is new."""
    x32 = T.tensor(WIDE.X[0])
    x64 = T.tensor(WIDE.X[0].astype(np.float64))
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step in range(8):
        x = x64 if w.dtype == T.float64 else x32
        loss = (T.sin(x * w) * x).sum()
        loss.backward()
        rec.at(step, loss=loss, w_grad=w.grad, w_dtype=str(w.dtype).replace("torch.", ""))
        descend(T, 0.1, w)
        w.grad = None
        if step % 3 == 1:
            w.data = w.data.double() if w.dtype == T.float32 else w.data.float()
    rec.at("final", w=w)
    return rec


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


@scenario()
def reductions_with_different_dims(T):
    names = list(REDUCTIONS)
    x = T.tensor(f32(rng(12).standard_normal((2, 3))))
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step, name in enumerate(names + names[::-1]):
        r = REDUCTIONS[name](T, x * w)
        loss = (r * r * arange_like(T, r)).sum()
        loss.backward()
        rec.at(f"{name} {step}", loss=loss.item(), w_grad=w.grad)
        w.grad = None
    return rec


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


@scenario()
def shape_ops_with_different_attributes(T):
    names = list(SHAPE_OPS)
    x = T.tensor(f32(rng(13).standard_normal((2, 3))))
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step, name in enumerate(names + names[::-1]):
        r = SHAPE_OPS[name](x * w).reshape(-1)
        loss = (r * arange_like(T, r)).sum()
        loss.backward()
        rec.at(f"{name} {step}", loss=loss.item(), w_grad=w.grad)
        w.grad = None
    return rec


POWERS_AND_CONSTANTS = {
    "w**2": lambda w: w ** 2, "w**3": lambda w: w ** 3, "w**2.0": lambda w: w ** 2.0,
    "w*2": lambda w: w * 2, "w*3": lambda w: w * 3, "2**w": lambda w: 2 ** w,
    "w/2": lambda w: w / 2, "2/w": lambda w: 2 / w, "w-2": lambda w: w - 2, "2-w": lambda w: 2 - w,
}


@scenario()
def powers_and_constants(T):
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step, name in enumerate(list(POWERS_AND_CONSTANTS) * 2):
        loss = T.sin(POWERS_AND_CONSTANTS[name](w)).sum()
        loss.backward()
        rec.at(f"{name} {step}", loss=loss.item(), w_grad=w.grad)
        w.grad = None
    return rec


@scenario()
def backward_inputs_alternating(T):
    X, y = T.tensor(TALL.X), T.tensor(TALL.y)
    w = T.tensor(TALL.w, requires_grad=True)
    b = T.tensor(0.3, requires_grad=True)
    rec = Steps()
    for step, which in enumerate(["w", "b", "both", "w", "b", "both", "b", "w"]):
        loss = ((X @ w + b - y) ** 2).mean()
        loss.backward(inputs={"w": [w], "b": [b], "both": [w, b]}[which])
        rec.at(f"{which} {step}", w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.1, *with_grad(w, b))
        clear_grads(w, b)
    return rec


@scenario()
def temporary_leaf_requiring_grad_vs_kept_leaf(T):
    """Same kinds; in one graph the second leaf's tensor is gone (no target), in the other alive."""
    x = T.tensor(TALL.X[0])
    w = T.tensor(TALL.w, requires_grad=True)
    v = T.tensor(TALL.v, requires_grad=True)
    rec = Steps()
    for step in range(6):
        if step % 2:
            loss = (x * w * T.tensor(TALL.v, requires_grad=True)).sum()
        else:
            loss = (x * w * v).sum()
        loss.backward()
        rec.at(step, w_grad=w.grad, v_grad=v.grad)
        clear_grads(w, v)
    return rec


@scenario(replays=False)
def leaf_root(T):
    """backward from a 0-dim leaf (valued, then pending after an in-place update)."""
    b = T.tensor(0.5, requires_grad=True)
    rec = Steps()
    for step in range(5):
        b.backward()
        rec.at(step, b_grad=b.grad)
        descend(T, 0.25, b)
        if step % 2:
            b.grad = None
        rec.at(step, b=b)
    return rec


@scenario(replays=False)
def nonscalar_root_with_gradient(T):
    x = T.tensor(TALL.X[0])
    w = T.tensor(TALL.w, requires_grad=True)
    rec = Steps()
    for step in range(4):
        out = T.sin(x * w)
        out.backward(T.tensor(TALL.X[step % 4]))
        rec.at(step, w_grad=w.grad)
        w.grad = None
    return rec


@scenario(replays=False, terms=[32, 33])
def many_arguments_around_max_args(T, terms):
    """64 arguments still have a kind; 66 do not (backward walks)."""
    rx = rng(14)
    xs = [T.tensor(f32(rx.standard_normal(2))) for _ in range(terms)]
    w = T.tensor(TALL.w[:2], requires_grad=True)
    rec = Steps()
    for step in range(3):
        loss = (w * xs[0]).sum()
        for x in xs[1:]:
            loss = loss + (w * x).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        descend(T, 0.01, w)
        w.grad = None
    return rec


@scenario(replays=False, depth=[5, 6])
def exponentially_repeated_arguments(T, depth):
    """h = h * x + h doubles the argument list each time: 63 arguments at depth 5, 127 at 6."""
    x = T.tensor(f32([0.9, -0.8]))
    w = T.tensor(f32([0.3, 0.6]), requires_grad=True)
    rec = Steps()
    for step in range(3):
        h = w
        for _ in range(depth):
            h = h * x + h
        loss = h.sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        descend(T, 0.01, w)
        w.grad = None
    return rec


@scenario(replays=False, setup=lambda monkeypatch: monkeypatch.setattr(programs.cache, "capacity", 3))
def tiny_program_cache(T):
    """A cache of 3 programs (replays included) while structures and float constants change:
    evictions must never leave a replay pointing at the wrong program."""
    X, y = T.tensor(WIDE.X), T.tensor(WIDE.y)
    w = T.tensor(WIDE.w, requires_grad=True)
    b = T.tensor(0.0, requires_grad=True)
    rec = Steps()
    for step, lr in enumerate([0.1, 0.05, 0.1, 0.2, 0.05, 0.1, 0.3, 0.1, 0.05]):
        if step % 3 == 0:
            loss = ((X @ w + b - y) ** 2).mean()
        elif step % 3 == 1:
            loss = (T.tanh(X @ w) * b).sum() + (w * w).sum() * 0.1
        else:
            loss = ((X @ w) ** 2).mean() + b * b
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        descend(T, lr, w, b)
        w.grad = None
        b.grad.zero_()
    rec.at("final", w=w, b=b)
    return rec


# ------------------------------------------ 8. in-place ops and .data on tensors with history

INPLACE_CHAINS = ["iadd_mul_", "sub_alpha", "div_", "clone_add_", "iadd_param", "chain_all"]


@scenario()
def inplace_chain_on_nonleaf_in_grad_mode(T):
    """``y = x * w; y += 1; y.mul_(3)`` and friends, recorded with history, chains cycled."""
    x = T.tensor(WIDE.X[0])
    w = T.tensor(WIDE.w, requires_grad=True)
    b = T.tensor(0.3, requires_grad=True)
    rec = Steps()
    for step, chain in enumerate(there_and_back(INPLACE_CHAINS)):
        y = x * w
        z = None
        if chain == "iadd_mul_":
            y += 1
            y.mul_(3)
        elif chain == "sub_alpha":
            y.sub_(b, alpha=2)
        elif chain == "div_":
            y.div_(w.detach() * w.detach() + 1)
        elif chain == "clone_add_":
            z = y.clone()
            z.add_(w * w)
            y.mul_(0.5)  # z is a copy: it keeps y's old values
        elif chain == "iadd_param":
            y += b * w
        else:
            y += 1
            y.mul_(3)
            y -= w
            y.div_(2.0)
            z = y.clone()
            z.mul_(b)  # saves z's old values for b's gradient: z is not changed again
        loss = (T.tanh(y) * (x + 1)).sum() + (z.sum() if z is not None else 0.0)
        loss.backward()
        rec.at(f"{chain} {step}", y=y, z=z, y_requires_grad=y.requires_grad, loss=loss.item(),
               w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.05, *with_grad(w, b))
        clear_grads(w, b)
    rec.at("final", w=w, b=b)
    return rec


FILLS = ["zero_", "fill_2.0", "fill_then_add_", "none", "zero_then_iadd", "fill_int_2"]


@scenario()
def zero_and_fill_on_nonleaf_in_grad_mode(T):
    """``y.zero_()`` / ``y.fill_(2.0)`` in grad mode on a tensor with history: its gradient is cut."""
    x = T.tensor(WIDE.X[1])
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step, how in enumerate(there_and_back(FILLS)):
        y = T.sin(x * w)
        if how == "zero_":
            y.zero_()
        elif how == "fill_2.0":
            y.fill_(2.0)
        elif how == "fill_int_2":
            y.fill_(2)
        elif how == "fill_then_add_":
            y.fill_(-1.5)
            y.add_(w * x)
        elif how == "zero_then_iadd":
            y.zero_()
            y += T.cos(w)
        rec.at(f"{how} {step}", y_requires_grad=y.requires_grad)
        loss = (y * w).sum() + (w * w).sum() * 0.1
        loss.backward()  # values are looked at after backward: a look before computes w early
        rec.at(f"{how} {step}", y=y, loss=loss.item(), w_grad=w.grad)
        descend(T, 0.1, w)
        w.grad = None
    rec.at("final", w=w)
    return rec


@scenario(source=["with_history", "without_history", "broadcast_param", "float64", "no_grad_mode"])
def copy_into_tensor_with_history(T, source):
    """``y.copy_(src)`` on a tensor with history: y's old history gets no gradient in grad
    mode (CopyBackwards), and keeps it under no_grad."""
    x = T.tensor(WIDE.X[2])
    w = T.tensor(WIDE.w, requires_grad=True)
    b = T.tensor(0.7, requires_grad=True)
    rec = Steps()
    for step in range(5):
        y = T.sin(x * w)
        if source == "with_history":
            y.copy_(w * b)
        elif source == "without_history":
            y.copy_(x * 2)
        elif source == "broadcast_param":
            y.copy_(b)
        elif source == "float64":
            y.copy_(x.double() * 3)
        else:
            with T.no_grad():
                y.copy_(x + 1)
        rec.at(step, y_requires_grad=y.requires_grad)
        loss = (y * w).sum()
        loss.backward()
        rec.at(step, y=y, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.1, w)
        clear_grads(w, b)
    return rec


DETACH_FORMS = ["detach_", "data_read", "data_assign", "data_mul_", "clone_detach", "plain"]


@scenario()
def detach_inplace_and_data_on_nonleaf(T):
    X = T.tensor(WIDE.X)
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step, how in enumerate(there_and_back(DETACH_FORMS)):
        h = X @ w
        if how == "detach_":
            h.detach_()
        elif how == "data_read":
            h = h * h.data  # the values without history
        elif how == "data_assign":
            h.data = h.data * 2 + 1  # new values, the gradient still flows through the old h
        elif how == "data_mul_":
            h.data.mul_(-0.5)
        elif how == "clone_detach":
            h = h.clone().detach() + h
        rec.at(f"{how} {step}", h_requires_grad=h.requires_grad, h_is_leaf=h.is_leaf)
        loss = (h * T.tanh(X @ w)).sum()
        loss.backward()
        rec.at(f"{how} {step}", h=h, loss=loss.item(), w_grad=w.grad)
        descend(T, 0.05, w)
        w.grad = None
    rec.at("final", w=w)
    return rec


LEAF_DATA = ["data_mul_", "data_add_", "data_copy_", "data_zero_then_add", "data_fill_", "data_isub", "plain"]


@scenario()
def data_writes_on_parameters(T):
    X, y = T.tensor(WIDE.X), T.tensor(WIDE.y)
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step, how in enumerate(LEAF_DATA + LEAF_DATA[::-1]):
        loss = ((X @ w - y) ** 2).mean()
        loss.backward()
        rec.at(f"{how} {step}", loss=loss.item(), w_grad=w.grad)
        if how == "data_mul_":
            w.data.mul_(0.9)
        elif how == "data_add_":
            w.data.add_(w.grad, alpha=-0.1)
        elif how == "data_copy_":
            w.data.copy_(w.detach() - 0.2 * w.grad)
        elif how == "data_zero_then_add":
            d = w.data
            d.zero_()
            d.add_(T.tensor(WIDE.w) * 0.5)
        elif how == "data_fill_":
            w.data.fill_(0.25)
        elif how == "data_isub":
            w.data -= 0.1 * w.grad
        rec.at(f"{how} {step}", w=w, w_requires_grad=w.requires_grad, w_is_leaf=w.is_leaf)
        w.grad = None
    return rec


@scenario(replays=False)
def detached_alias_sees_later_updates(T):
    """PyTorch's ``.data`` and ``detach()`` share storage with the tensor: an update of one is
    seen by the other, in both directions."""
    x = T.tensor(WIDE.X[0])
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step in range(3):
        d = w.data
        e = w.detach()
        loss = (x * w).sum()
        loss.backward()
        descend(T, 0.1, w)
        rec.add(f".data taken before the update {step}", d)
        rec.add(f"detach() taken before the update {step}", e)
        e.mul_(0.5)  # written through to w in PyTorch
        rec.add(f"w after detach().mul_ {step}", w)
        w.grad = None
    return rec


@scenario(replays=False)
def fill_values_that_compare_equal(T):
    """fill_(0.0) and fill_(-0.0) (and 2 / 2.0) compare equal as Python numbers; the sign of
    a zero is still visible (1 / y)."""
    x = T.tensor(WIDE.X[0])
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step, value in enumerate([0.0, -0.0, 0.0, 2, 2.0, -0.0]):
        y = x * w
        y.fill_(value)
        rec.add(f"fill({value!r}) 1/y {step}", 1 / y.detach())
        loss = (y * w).sum()
        loss.backward()
        rec.add(f"fill({value!r}) w.grad {step}", w.grad)
        w.grad = None
    return rec


# ------------------------------------------------------ 9. indexing, masks, labels, losses

INDEXINGS = {
    "h[1:3]": lambda h: h[1:3],
    "h[:, ::2]": lambda h: h[:, ::2],
    "h[None, ..., 0]": lambda h: h[None, ..., 0],
    "h[:, 1::2]": lambda h: h[:, 1::2],
    "h[0:2]": lambda h: h[0:2],
    "h[None, ..., 1]": lambda h: h[None, ..., 1],
}


@scenario()
def indexing_in_a_training_loop(T):
    X = T.tensor(WIDE.X)
    M = T.tensor(WIDE.M, requires_grad=True)
    rec = Steps()
    for step, name in enumerate(there_and_back(list(INDEXINGS))):
        h = T.tanh(X @ M)
        part = INDEXINGS[name](h)
        loss = (part * arange_like(T, part)).sum()
        for i, row in enumerate(h):  # iteration over dim 0
            loss = loss + (row * row).sum() * (0.1 * (i + 1))
        loss.backward()
        rec.at(f"{name} {step}", shape=tuple(part.shape), loss=loss.item(), M_grad=M.grad)
        descend(T, 0.05, M)
        M.grad = None
    rec.at("final", M=M)
    return rec


@scenario()
def where_with_masks_from_parameters(T):
    """Masks computed from the (pending, updated) parameters change every step."""
    forms = ["w>0", "w>b", "x*w<=b", "w.detach()>0.2", "(w>0)&float"]
    x = T.tensor(WIDE.X[0])
    w = T.tensor(f32([0.3, -0.2, 0.05, -0.6]), requires_grad=True)
    b = T.tensor(0.1, requires_grad=True)
    rec = Steps()
    for step in range(3 * len(forms)):
        form = forms[step % len(forms)]
        if form == "w>0":
            mask = w > 0
            h = T.where(mask, w * x, -0.5 * w)
        elif form == "w>b":
            mask = w > b
            h = T.where(mask, w, b * x)
        elif form == "x*w<=b":
            mask = x * w <= b
            h = T.where(mask, T.sin(w), w * w)
        elif form == "w.detach()>0.2":
            mask = w.detach() > 0.2
            h = T.where(mask, x, w)
        else:
            mask = w > 0
            h = mask.float() * w + (w <= 0).float() * b
        rec.at(f"{form} {step}", mask_requires_grad=mask.requires_grad)
        loss = (h * h).sum() + (x * w).sum()
        loss.backward()
        rec.at(f"{form} {step}", mask=mask, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.3, *with_grad(w, b))  # large steps: signs flip, so the masks change
        clear_grads(w, b)
    rec.at("final", w=w)
    return rec


@scenario()
def comparisons_of_pending_parameters(T):
    x = T.tensor(WIDE.X[1])
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step in range(6):
        rec.add(f"w>0 {step}", w > 0)
        rec.add(f"w>=x {step}", w >= x)
        rec.add(f"(w<0).sum() {step}", (w < 0).sum())
        rec.add(f"w!=w {step}", w != w)  # noqa: PLR0124  (a comparison op, not a mistake)
        loss = (T.relu(w) * x).sum() + (w * w).sum() * 0.5
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        descend(T, 0.7, w)
        w.grad = None
    return rec


LABEL_STEPS = [  # (loss, reduction, ignore_index, labels)
    ("ce", "mean", -100, [0, 2, 1, 4]),
    ("ce", "mean", -100, [3, 3, 0, 1]),
    ("ce", "mean", 2, [2, 1, 2, 0]),
    ("ce", "mean", 2, [0, 4, 1, 2]),
    ("nll", "mean", -100, [1, -100, 4, 0]),
    ("nll", "mean", -100, [-100, 2, 2, 3]),
    ("nll", "sum", 1, [1, 0, 4, 3]),
    ("nll", "sum", 1, [2, 1, 1, 0]),
    ("ce", "none", -100, [4, -100, 0, 1]),
    ("ce", "none", -100, [0, 1, 2, 3]),
    ("nll", "mean", 3, [3, 0, 1, 1]),
    ("ce", "mean", -100, [1, 1, 1, 1]),
    ("ce", "sum", 0, [0, 4, 0, 3]),
    ("nll", "none", 4, [4, 2, 3, 4]),
]


@scenario()
def labels_changing_every_step(T):
    F = T.nn.functional
    rx = rng(22)
    x = T.tensor(f32(rx.standard_normal((4, 3))))
    W = T.tensor(f32(rx.standard_normal((3, 5)) * 0.5), requires_grad=True)
    rec = Steps()
    for step, (kind, reduction, ignore, labels) in enumerate(LABEL_STEPS + LABEL_STEPS[::-1]):
        target = T.tensor(np.asarray(labels, dtype=np.int64))
        logits = x @ W
        if kind == "ce":
            loss = F.cross_entropy(logits, target, reduction=reduction, ignore_index=ignore)
        else:
            loss = F.nll_loss(F.log_softmax(logits, dim=1), target, reduction=reduction, ignore_index=ignore)
        per_item = loss
        if reduction == "none":
            loss = (loss * T.tensor(f32([1.0, 2.0, 3.0, 4.0]))).sum()
        loss.backward()
        rec.at(f"{kind} {reduction} {ignore} {step}", loss=per_item, W_grad=W.grad)
        descend(T, 0.2, W)
        W.grad = None
    rec.at("final", W=W)
    return rec


SOFTMAXES = {
    "softmax0": lambda F, h: F.softmax(h, dim=0),
    "softmax1": lambda F, h: F.softmax(h, dim=1),
    "log_softmax0": lambda F, h: F.log_softmax(h, dim=0),
    "log_softmax-1": lambda F, h: h.log_softmax(-1),
    "mean-1_keep": lambda F, h: h.mean(-1, keepdim=True),
    "softmax-1_mean0": lambda F, h: h.softmax(-1).mean(0),
}


@scenario()
def softmax_and_reductions_over_changing_dims(T):
    names = list(SOFTMAXES)
    X = T.tensor(WIDE.X)
    M = T.tensor(WIDE.M, requires_grad=True)
    rec = Steps()
    for step, name in enumerate(names + names[::-1]):
        r = SOFTMAXES[name](T.nn.functional, X @ M)
        coeff = T.tensor(np.linspace(-1, 1, r.numel(), dtype=np.float32).reshape(tuple(r.shape)))
        loss = (r * coeff).sum()
        loss.backward()
        rec.at(f"{name} {step}", r=r, M_grad=M.grad)
        descend(T, 0.1, M)
        M.grad = None
    rec.at("final", M=M)
    return rec


MSE_SHAPES = [((3,), (3,)), ((3, 1), (3,)), ((3,), (3,)), ((1, 3), (3, 1)), ((3, 1), (3,)), ((3,), (1,))]


@scenario()
def mse_loss_with_broadcasting_warning(T):
    w = T.tensor(f32([0.4, -0.3, 1.2]), requires_grad=True)
    rec = Steps()
    for step, (in_shape, target_shape) in enumerate(MSE_SHAPES * 2):
        target = T.tensor(f32(np.arange(np.prod(target_shape)) * 0.5 - 0.3).reshape(target_shape))
        prediction = (w * 2).reshape(in_shape) if np.prod(in_shape) == 3 else w[:1]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss = T.nn.functional.mse_loss(prediction, target)
        tag = f"{in_shape} {target_shape} {step}"
        rec.at(tag, warned=any("target size" in str(c.message) for c in caught))
        loss.backward()
        rec.at(tag, loss=loss, w_grad=w.grad)
        descend(T, 0.1, w)
        w.grad = None
    return rec


# ---------------------------------------------- 10. the functional API between training steps

def value_and_grad_of(T, fn, argnums):
    if T is symgrad:
        return symgrad.value_and_grad(fn, argnums)
    grad_and_value = torch.func.grad_and_value(fn, argnums)

    def call(*args):
        grads, value = grad_and_value(*args)
        return value, grads

    return call


def grad_of_arrays(T, fn, argnums):
    """``grad(fn)`` called on NumPy arrays (symgrad's arrays-in, arrays-out form).  symgrad gives
    no gradient for a tensor argument that does not require grad (documented), torch.func does:
    arrays sidestep that documented difference."""
    if T is symgrad:
        g = symgrad.grad(fn, argnums)
        return lambda *arrays: np.asarray(g(*arrays))
    g = torch.func.grad(fn, argnums)
    return lambda *arrays: g(*[torch.tensor(a) for a in arrays])


@scenario()
def value_and_grad_between_training_steps(T):
    X, y = T.tensor(WIDE.X), T.tensor(WIDE.y)
    w = T.tensor(WIDE.w, requires_grad=True)
    b = T.tensor(0.2, requires_grad=True)

    def loss_fn(w_, b_):
        return ((T.tanh(X @ w_) + b_ - y) ** 2).mean()

    both = value_and_grad_of(T, loss_fn, (0, 1))
    only_w = grad_of_arrays(T, loss_fn, 0)
    rec = Steps()
    for step in range(8):
        if step % 2:  # called while w and b are pending (updated under no_grad, not computed yet)
            value, (gw, gb) = both(w, b)
            rec.at(step, functional_value=value, functional_dw=gw, functional_db=gb,
                   w_grad_after_functional=w.grad)
        loss = loss_fn(w, b)
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        if step % 3 == 0:  # between backward and the update: .grad must survive it
            gw = only_w(w.detach().numpy(), b.detach().numpy())
            rec.at(step, grad_dw=gw, w_grad_after_grad=w.grad, b_grad_after_grad=b.grad)
        descend(T, 0.2, w, b)
        w.grad = None
        if step % 2:
            b.grad.zero_()
        else:
            b.grad = None
    rec.at("final", w=w, b=b)
    return rec


@scenario()
def functional_traced_on_the_same_structure_as_the_loop(T):
    """The loop's loss and the traced function record the same kinds (same shapes); the jitted
    trace must not leave tracers or values in anything the loop's replay uses."""
    X = T.tensor(WIDE.X)
    w = T.tensor(WIDE.w, requires_grad=True)
    buf = T.zeros(4, requires_grad=True)  # refilled in place every step (pending when f sees it)

    def loss_fn(w_):
        return (T.sin(X @ w_) ** 2).sum()

    f = value_and_grad_of(T, loss_fn, 0)
    rec = Steps()
    for step in range(6):
        with T.no_grad():
            buf.zero_()
            buf.add_(w * 0.5)
        value, g = f(buf)
        rec.at(step, f_value=value, f_grad=g)
        loss = loss_fn(w) + (buf * w).sum()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad, buf_grad=buf.grad, buf=buf)
        descend(T, 0.1, w)
        clear_grads(w, buf)
    return rec


@scenario()
def gradcheck_and_crosscheck_between_training_steps(T):
    X, y = T.tensor(WIDE.X), T.tensor(WIDE.y)
    Xd = T.tensor(WIDE.X.astype(np.float64))
    w = T.tensor(WIDE.w, requires_grad=True)

    def scalar_fn(w_):
        return (T.tanh(Xd @ w_) * T.tensor(np.array([1.0, -2.0, 0.5]))).sum()

    rec = Steps()
    for step in range(6):
        loss = ((X @ w - y) ** 2).mean()
        loss.backward()
        rec.at(step, loss=loss.item(), w_grad=w.grad)
        if step % 2 == 0:
            if T is symgrad:
                ok = symgrad.gradcheck(scalar_fn, (w,))
                report = symgrad.crosscheck(scalar_fn, [w], against=("finite_differences",))
                rec.at(step, crosscheck_ok=report.ok, crosscheck_gradient=report.gradients["symgrad"]["w_"])
            else:
                w64 = w.detach().double().requires_grad_()
                ok = torch.autograd.gradcheck(scalar_fn, (w64,))
                rec.at(step, crosscheck_ok=True, crosscheck_gradient=torch.autograd.grad(scalar_fn(w64), w64)[0])
            rec.at(step, gradcheck=bool(ok), w_grad_after_checks=w.grad,
                   w_requires_grad_after_checks=w.requires_grad)
        descend(T, 0.1, w)
        w.grad.zero_()
    rec.at("final", w=w)
    return rec


AUTOGRAD_GRAD = ["leaf", "nonleaf", "two_outputs", "grad_outputs", "unused", "duplicate_inputs", "leaf"]


@scenario()
def autograd_grad_between_training_steps(T):
    X, y = T.tensor(WIDE.X), T.tensor(WIDE.y)
    w = T.tensor(WIDE.w, requires_grad=True)
    b = T.tensor(0.1, requires_grad=True)
    v = T.tensor(WIDE.v, requires_grad=True)  # not in the loss: allow_unused
    rec = Steps()
    for step, how in enumerate(AUTOGRAD_GRAD * 2):
        h = X @ w + b
        z = T.tanh(h)
        l1 = ((z - y) ** 2).mean()
        l2 = (z * h).sum()
        if how == "leaf":
            grads = T.autograd.grad(l1, [w, b], retain_graph=True)
        elif how == "nonleaf":
            grads = T.autograd.grad(l1, [h, z, w], retain_graph=True)
        elif how == "two_outputs":
            grads = T.autograd.grad([l1, l2], [h, w, b], retain_graph=True)
        elif how == "grad_outputs":
            grads = T.autograd.grad(z, [w, h], grad_outputs=T.tensor(f32([1.0, -1.0, 0.5])), retain_graph=True)
        elif how == "duplicate_inputs":
            grads = T.autograd.grad(l2, [w, b, w], retain_graph=True)
        else:
            grads = T.autograd.grad(l2, [v, w], retain_graph=True, allow_unused=True)
        for k, g in enumerate(grads):
            rec.add(f"{how} grad {k} {step}", g)
        rec.at(f"{how} {step}", w_grad_before_backward=w.grad, v_grad_before_backward=v.grad)
        loss = l1 + 0.1 * l2  # the same graph, then torch-style
        loss.backward()
        rec.at(f"{how} {step}", loss=loss.item(), w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.1, w, b)
        if step % 2:
            clear_grads(w, b)
    rec.at("final", w=w)
    return rec


@scenario()
def autograd_grad_of_the_loop_structure_does_not_touch_grad(T):
    """autograd.grad on exactly the structure the loop backpropagates (same kinds, same
    targets): its result must not land in .grad, and .grad must not leak into its result."""
    X, y = T.tensor(WIDE.X), T.tensor(WIDE.y)
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step in range(8):
        loss = ((X @ w - y) ** 2).mean()
        if step % 2:
            (g,) = T.autograd.grad(loss, w)
            rec.at(step, autograd_grad=g, w_grad_after_autograd_grad=w.grad)
            loss = ((X @ w - y) ** 2).mean()
        loss.backward()  # accumulates: .grad is zeroed only every third step
        rec.at(step, w_grad=w.grad)
        descend(T, 0.05, w)
        if step % 3 == 2:
            w.grad.zero_()
    return rec


@scenario()
def autograd_backward_of_several_roots(T):
    """``torch.autograd.backward([l1, l2])`` runs one backward over both roots: their shared
    graph is freed once, after both (no retain_graph needed)."""
    X = T.tensor(WIDE.X)
    w = T.tensor(WIDE.w, requires_grad=True)
    b = T.tensor(0.1, requires_grad=True)
    rec = Steps()
    for step in range(4):
        h = T.sin(X @ w + b)
        l1 = h.sum()
        l2 = (h * h).sum()
        if step % 2:
            T.autograd.backward([l1, l2])
        else:
            T.autograd.backward([l2, h], [None, T.tensor(f32([1.0, 0.5, -1.0]))])
        rec.at(step, w_grad=w.grad, b_grad=b.grad)
        descend(T, 0.1, w)
        clear_grads(w, b)
    return rec


# ------------------------------------------------------------------ 11. grad modes and threads

def recorded_under(T, mode, x, w):
    """x * w + w.sin(), recorded under ``mode``."""
    def expr():
        return x * w + T.sin(w)

    if mode == "grad":
        return expr()
    if mode == "no_grad":
        with T.no_grad():
            return expr()
    if mode == "enable_grad_in_no_grad":
        with T.no_grad(), T.enable_grad():
            return expr()
    if mode == "set_grad_enabled_false":
        T.set_grad_enabled(False)
        try:
            return expr()
        finally:
            T.set_grad_enabled(True)
    if mode == "inference_mode":
        with T.inference_mode():
            return expr()
    if mode == "inference_mode_false":
        with T.inference_mode(False):
            return expr()
    if mode == "decorated_no_grad":
        return T.no_grad()(expr)()
    if mode == "decorated_enable_grad":
        with T.no_grad():
            return T.enable_grad()(expr)()
    if mode == "set_grad_enabled_ctx":
        with T.set_grad_enabled(False):
            return expr()
    assert mode == "decorated_set_grad_enabled"
    return T.set_grad_enabled(False)(expr)()


MODES = ["grad", "no_grad", "enable_grad_in_no_grad", "set_grad_enabled_false", "inference_mode",
         "decorated_no_grad", "decorated_enable_grad", "set_grad_enabled_ctx", "decorated_set_grad_enabled",
         "inference_mode_false"]


@scenario()
def same_expression_recorded_under_alternating_modes(T):
    x = T.tensor(WIDE.X[0])
    w = T.tensor(WIDE.w, requires_grad=True)
    rec = Steps()
    for step, mode in enumerate(there_and_back(MODES)):
        h = recorded_under(T, mode, x, w)
        if mode == "inference_mode":
            h = h.clone()  # an inference tensor cannot be saved for backward in PyTorch
        rec.at(f"{mode} {step}", grad_enabled_after=T.is_grad_enabled(), h_requires_grad=h.requires_grad,
               h_is_leaf=h.is_leaf)
        loss = (h * w).sum()
        loss.backward()
        rec.at(f"{mode} {step}", loss=loss.item(), w_grad=w.grad)
        descend(T, 0.05, w)
        w.grad = None
    rec.at("final", w=w)
    return rec


@scenario(replays=False)
def no_grad_decorated_generator(T):
    """PyTorch's grad-mode decorators wrap generator functions: each resumption runs under the
    decorator's mode (torch.autograd.grad_mode._DecoratorContextManager)."""
    w = T.tensor(WIDE.w, requires_grad=True)

    @T.no_grad()
    def halves(t):
        for k in range(3):
            yield t * (0.5 ** k)

    rec = Steps()
    for k, h in enumerate(halves(w)):
        rec.at(f"yield {k}", requires_grad=h.requires_grad, value=h, grad_enabled_outside=T.is_grad_enabled())
    return rec


@scenario(replays=False)
def bare_no_grad_decorator(T):
    """``@torch.no_grad`` without parentheses (PyTorch >= 2.1)."""
    @T.no_grad
    def doubled(t):
        return t * 2

    h = doubled(T.tensor(WIDE.w, requires_grad=True))
    rec = Steps()
    rec.at("bare @no_grad", requires_grad=h.requires_grad, value=h, grad_enabled_after=T.is_grad_enabled())
    return rec


def in_lock_step(*jobs):
    """Run every ``job(barrier, rec)`` at once, the first in this thread and each other one in a
    thread of its own, sharing one barrier; the records one after the other, or the first error."""
    barrier = threading.Barrier(len(jobs))
    recs, errors = [Steps() for _ in jobs], []

    def guarded(job, rec):
        try:
            job(barrier, rec)
        except BaseException as error:  # noqa: BLE001  (raised again below, in this thread)
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=guarded, args=pair) for pair in zip(jobs[1:], recs[1:])]
    for thread in threads:
        thread.start()
    guarded(jobs[0], recs[0])
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return Steps(sum(recs, []))


@scenario()
def grad_mode_in_another_thread(T):
    """A thread with grad mode off records the same expression (and trains with enable_grad)
    in lock step with a thread training with grad mode on; neither thread's mode leaks."""
    steps = 6

    def train(barrier, rec):
        x = T.tensor(WIDE.X[0])
        w = T.tensor(WIDE.w, requires_grad=True)
        for step in range(steps):
            barrier.wait(timeout=60)
            h = x * w + T.sin(w)
            loss = (h * w).sum()
            loss.backward()
            rec.at(f"grad on {step}", h_requires_grad=h.requires_grad, loss=loss.item(), w_grad=w.grad)
            descend(T, 0.05, w)
            w.grad = None
            rec.at(f"grad on {step}", grad_enabled=T.is_grad_enabled())
            barrier.wait(timeout=60)
        rec.at("grad on final", w=w)

    def train_with_grad_mode_off(barrier, rec):
        T.set_grad_enabled(False)
        x = T.tensor(WIDE.X[1])
        w = T.tensor(WIDE.v, requires_grad=True)
        for step in range(steps):
            barrier.wait(timeout=60)
            h = x * w + T.sin(w)  # the other thread's expression, without history here
            rec.at(f"grad off {step}", h_requires_grad=h.requires_grad, h=h)
            with T.enable_grad():
                loss = ((x * w + T.sin(w)) * w).sum()
            loss.backward()
            rec.at(f"grad off {step}", loss=loss.item(), w_grad=w.grad)
            w -= 0.05 * w.grad  # grad mode is off in this thread
            w.grad = None
            rec.at(f"grad off {step}", grad_enabled=T.is_grad_enabled())
            barrier.wait(timeout=60)
        rec.at("grad off final", w=w)

    return in_lock_step(train, train_with_grad_mode_off)


@scenario()
def two_threads_training_the_same_structure_concurrently(T):
    """Two threads train identical structures (the same kinds, the same cached programs) on
    different numbers at the same time; each must get its own values and gradients."""

    def train(seed):
        def job(barrier, rec):
            rx = rng(seed)
            X = T.tensor(f32(rx.standard_normal((3, 4))))
            y = T.tensor(f32(rx.standard_normal(3)))
            w = T.tensor(f32(rx.standard_normal(4)), requires_grad=True)
            opt = T.optim.SGD([w], lr=0.1, momentum=0.5)
            for step in range(8):
                barrier.wait(timeout=60)
                loss = ((T.tanh(X @ w) - y) ** 2).mean()
                loss.backward()
                rec.at(f"seed {seed} {step}", loss=loss.item(), w_grad=w.grad)
                opt.step()
                opt.zero_grad()
            rec.at(f"seed {seed} final", w=w)
        return job

    return in_lock_step(train(30), train(31))


# ------------------------------------------------- 12. many parameters, float64, fresh leaves

def mlp_data(dtype):
    rx = rng(40)
    X = rx.standard_normal((5, 3)).astype(dtype)
    labels = rx.integers(0, 2, size=(10, 5)).astype(np.int64)
    shapes = [(3, 4), (4,), (4, 4), (4,), (4, 2), (2,)]
    params = [(rx.standard_normal(s) * 0.6).astype(dtype) for s in shapes]
    return X, labels, params


def mlp(T, X, params):
    W1, b1, W2, b2, W3, b3 = params
    h = T.tanh(X @ W1 + b1)
    h = T.relu(h @ W2 + b2)
    return h @ W3 + b3


@scenario(style=["sgd_nesterov", "hand_written"], dtype=["float32"], rtol=1e-4, atol=2e-5)
@scenario(style=["sgd_nesterov"], dtype=["float64"], rtol=1e-10, atol=1e-12)
def mlp_with_six_parameters(T, style, dtype):
    X_np, labels, params_np = mlp_data(dtype)
    lr, momentum, decay = 0.1, 0.9, 1e-2
    X = T.tensor(X_np)
    params = [T.tensor(p, requires_grad=True) for p in params_np]
    opt = T.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True, weight_decay=decay) \
        if style == "sgd_nesterov" else None
    buffers = [None] * len(params)
    rec = Steps()
    for step in range(10):
        loss = T.nn.functional.cross_entropy(mlp(T, X, params), T.tensor(labels[step]))
        loss.backward()
        rec.at(step, loss=loss, **{f"p{k}_grad": p.grad for k, p in enumerate(params)})
        if opt is not None:
            opt.step()
            opt.zero_grad()
            continue
        with T.no_grad():  # the same update written out, buffers updated in place
            for k, p in enumerate(params):
                g = p.grad + decay * p
                if buffers[k] is None:
                    buffers[k] = g.clone()
                else:
                    buffers[k].mul_(momentum).add_(g)
                p.sub_(lr * (g + momentum * buffers[k]))
        for p in params:
            p.grad.zero_()
    rec.at("final", **{f"p{k}": p for k, p in enumerate(params)})
    return rec


@scenario(fresh=["numpy_each_step", "detach_requires_grad", "alternating"], rtol=1e-4, atol=2e-5)
def parameters_made_fresh_every_step(T, fresh):
    X_np, labels, params_np = mlp_data(np.float32)
    lr = 0.2
    X = T.tensor(X_np)
    values = [p.copy() for p in params_np]
    params = [T.tensor(p, requires_grad=True) for p in values]
    rec = Steps()
    for step in range(8):
        new_leaves = fresh != "alternating" or step % 2 == 0
        if fresh == "numpy_each_step" or (fresh == "alternating" and new_leaves):
            params = [T.tensor(v, requires_grad=True) for v in values]
        loss = T.nn.functional.cross_entropy(mlp(T, X, params), T.tensor(labels[step]))
        loss.backward()
        rec.at(step, loss=loss, **{f"p{k}_grad": p.grad for k, p in enumerate(params)})
        if fresh == "detach_requires_grad":
            params = [(p - lr * p.grad).detach().requires_grad_() for p in params]
            rec.at(step, new_p0_is_leaf=params[0].is_leaf)
        elif new_leaves:
            values = [np.asarray(p.detach().numpy() - lr * p.grad.numpy(), dtype=np.float32) for p in params]
        else:
            descend(T, lr, *params)
            values = [p.detach().numpy().copy() for p in params]
            clear_grads(*params)
    rec.at("final", **{f"p{k}": p for k, p in enumerate(params)})
    return rec


@scenario(rtol=1e-4, atol=2e-5)
def float32_and_float64_models_interleaved(T):
    """One structure in two dtypes, trained in turn: the programs must not be swapped."""
    X32, labels, p32 = mlp_data(np.float32)
    X64, _, p64 = mlp_data(np.float64)
    models = [(T.tensor(X32), [T.tensor(p, requires_grad=True) for p in p32]),
              (T.tensor(X64), [T.tensor(p + 1e-3, requires_grad=True) for p in p64])]
    rec = Steps()
    for step in range(8):
        X, params = models[step % 2]
        loss = T.nn.functional.cross_entropy(mlp(T, X, params), T.tensor(labels[step]))
        loss.backward()
        rec.at(step, loss=loss, **{f"p{k}_grad": p.grad for k, p in enumerate(params)})
        descend(T, 0.1, *params)
        clear_grads(*params)
    return rec


# ------------------------------------------------------------------------------- the driver

@pytest.mark.parametrize("run, variant, expect", SCENARIOS)
def test_matches_pytorch(run, variant, expect, replays, monkeypatch):
    """symgrad records what PyTorch records, step by step, and replays where expected."""
    if expect.setup is not None:
        expect.setup(monkeypatch)
    check(functools.partial(run, **variant), rtol=expect.rtol, atol=expect.atol)
    if expect.replays:
        assert replays.count > 0, "backward never replayed: the scenario does not exercise the replay path"
