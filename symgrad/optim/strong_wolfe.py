"""The strong-Wolfe line search LBFGS runs with ``line_search_fn="strong_wolfe"``: bracket a step
that lowers the loss enough, then zoom into the bracket by cubic interpolation until the slope
has shrunk enough (Nocedal and Wright, algorithms 3.5 and 3.6, in minFunc's form).

The numbers mix Python floats (the losses) with the parameters' dtype (slopes, steps: 0-d tensors
in PyTorch) in PyTorch's order.  The latter are NumPy scalars here, rounded after every
operation as PyTorch's eager ops on 0-d tensors are (as tensors they would be compiled into one
fused expression, rounded differently), so every comparison takes the branch PyTorch's takes and
the chosen step is PyTorch's."""
from __future__ import annotations

import numpy as np

from symgrad import creation
from symgrad.tensor import Tensor


def cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through two points with their values and slopes, kept inside
    ``bounds`` (the points' interval by default); the interval's middle when the cubic has none."""
    low, high = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - _quotient(3 * (f1 - f2), x1 - x2)
    square = d1 ** 2 - g1 * g2
    if not square >= 0:
        return (low + high) / 2.0
    d2 = np.sqrt(square)
    if x1 <= x2:
        point = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        point = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(point, low), high)


def _quotient(number, value):
    """``number / value``, for a NumPy ``value`` (a tensor's) as PyTorch computes a number over a
    tensor: the value's reciprocal times the number (not the correctly rounded quotient)."""
    if isinstance(value, np.floating) and not isinstance(number, np.floating):
        return value.dtype.type(1) / value * number
    return number / value


def held(value):
    """A 0-d tensor as the NumPy number it holds; a Python number as it is."""
    return value.numpy()[()] if isinstance(value, Tensor) else value


class _Point:
    """A trial step with its loss, gradient and slope along the direction."""
    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def strong_wolfe(evaluate, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """``(loss, flat gradient, step, evaluations)`` at a step along ``d`` meeting the strong
    Wolfe conditions, or the best one found within ``max_ls`` evaluations.  ``evaluate(x, t, d)``
    is the loss and flat gradient at step ``t`` (a number) from the parameters ``x``."""
    d_norm, gtd = held(d.abs().max()), held(gtd)
    bracket, done, tries = _bracket(evaluate, x, held(t), d, f, g, gtd, c1, c2, max_ls)
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    stalled = False
    while not done and tries < max_ls:
        if abs(bracket[1].t - bracket[0].t) * d_norm < tolerance_change:
            break
        step = cubic_minimum(bracket[0].t, bracket[0].f, bracket[0].gtd, bracket[1].t, bracket[1].f, bracket[1].gtd)
        step, stalled = _away_from_ends(step, bracket[0].t, bracket[1].t, stalled)
        f_new, g_new = evaluate(x, step, d)
        new = _Point(step, f_new, g_new.clone(), held(g_new.dot(d)))
        tries += 1
        if new.f > (f + c1 * step * gtd) or new.f >= bracket[low].f:
            bracket[high] = new
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
            continue
        if abs(new.gtd) <= -c2 * gtd:
            done = True
        elif new.gtd * (bracket[high].t - bracket[low].t) >= 0:
            bracket[high] = bracket[low]
        bracket[low] = new
    best = bracket[low]
    return best.f, best.g, creation.tensor(best.t) if isinstance(best.t, np.floating) else best.t, tries + 1


def _bracket(evaluate, x, t, d, f, g, gtd, c1, c2, max_ls):
    """Steps growing by interpolation until one breaks the sufficient decrease or turns the slope
    up, bracketing a good step: ``(bracket, whether its one point already satisfies the
    conditions, the trials after the first)``."""
    previous, tries = _Point(0, f, g.clone(), gtd), 0
    f_new, g_new = evaluate(x, t, d)
    new = _Point(t, f_new, g_new, held(g_new.dot(d)))
    while tries < max_ls:
        if new.f > (f + c1 * new.t * gtd) or (tries > 1 and new.f >= previous.f):
            return [previous, _Point(new.t, new.f, new.g.clone(), new.gtd)], False, tries
        if abs(new.gtd) <= -c2 * gtd:
            return [new], True, tries
        if new.gtd >= 0:
            return [previous, _Point(new.t, new.f, new.g.clone(), new.gtd)], False, tries
        step = cubic_minimum(previous.t, previous.f, previous.gtd, new.t, new.f, new.gtd,
                             bounds=(new.t + 0.01 * (new.t - previous.t), new.t * 10))
        previous = _Point(new.t, new.f, new.g.clone(), new.gtd)
        f_new, g_new = evaluate(x, step, d)
        new = _Point(step, f_new, g_new, held(g_new.dot(d)))
        tries += 1
    return [_Point(0, f, g, None), _Point(new.t, new.f, new.g, None)], False, tries


def _away_from_ends(step, a, b, stalled):
    """A trial step within a tenth of the bracket's length of an end is moved to that distance
    when the last trial was also that close or the step is at (or past) an end: the zoom then
    keeps shrinking the bracket."""
    top, bottom = max(a, b), min(a, b)
    margin = 0.1 * (top - bottom)
    if not min(top - step, step - bottom) < margin:
        return step, False
    if stalled or step >= top or step <= bottom:
        return (top - margin if abs(step - top) < abs(step - bottom) else bottom + margin), False
    return step, True
