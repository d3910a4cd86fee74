"""IR heads for the connectionist temporal classification loss: the alpha recursion (the loss) and
PyTorch's CPU backward kernel (its gradient), each lowered to one ``jax.lax.scan`` over time, so a
program holds two heads whatever the sequence length.

The gradient is PyTorch's ``ctc_loss_backward_cpu``, not the derivative of the loss:
``(exp(lp) - exp(log_ab + nll - lp)) * g`` where ``log_ab`` collects alpha times beta per label.
The ``exp(lp)`` term assumes the input is a ``log_softmax`` output (it is in the null space of
log_softmax's backward, so the logits' gradient is the derivative's); on unnormalized input PyTorch's
gradient, and this one, differ from the loss's derivative by ``exp(lp)``.  A second derivative
raises PyTorch's error.

Layout (PyTorch's): log_probs (T, N, C); labels padded (N, S) or concatenated (sum of lengths,);
input and target lengths (N,) int64.  The extended label sequence l' has 2S + 1 states (blanks
between and around the labels); states past a sequence's 2 * length + 1 are -inf.
"""
from __future__ import annotations

import sympy as sp

from symgrad.ir.functions import Structural

NEG = "-jnp.inf"


def _let(names: str, values, body: str) -> str:
    """``body`` with ``names`` bound to ``values``: an expression, as the printer needs."""
    return f"(lambda {names}: {body})({', '.join(values)})"


def _shifted(a: str, by: int, length: int) -> str:
    """a[:, s - by] along the states, -inf before the first."""
    return f"jnp.pad({a}, ((0, 0), ({by}, 0)), constant_values={NEG})[:, :{length}]"


def _logsumexp(*terms: str) -> str:
    """PyTorch's log(exp(a - m) + exp(b - m) ...) + m, m the largest term (0 if all are -inf)."""
    largest = terms[0]
    for term in terms[1:]:
        largest = f"jnp.maximum({largest}, {term})"
    return _let("m", [f"(lambda m: jnp.where(m == {NEG}, 0, m))({largest})"],
                f"jnp.log({' + '.join(f'jnp.exp({t} - m)' for t in terms)}) + m")


class _Ctc(Structural):
    """Arrays first; then the attributes blank, S (the padded label length the states are made
    for), whether the labels are concatenated, and zero_infinity (which only the gradient reads)."""

    @classmethod
    def arity_of(cls, args) -> int:  # symgrad.ir.linalg.emit's question
        return cls.arity

    def attributes(self):
        blank, states, concatenated = self.args[self.arity:self.arity + 3]
        return int(blank), int(states), bool(concatenated)

    def _setting(self, printer, lp, labels, il, tl, body: str, extra=()) -> str:
        """``body`` with lp, il, tl, the extended labels ``lab`` (N, L), ``skip`` (the s - 2 step
        allowed), ``valid`` (the states each sequence has) and ``e`` (lp at each state, T N L) bound,
        and the ``extra`` (name, array) pairs bound too, every array printed outside all the lambdas."""
        blank, states, concatenated = self.attributes()
        lp, labels, il, tl = (printer._print(a) for a in (lp, labels, il, tl))
        n, length = f"{lp}.shape[1]", 2 * states + 1
        if states == 0:
            extended = f"jnp.full(({n}, 1), {blank}, {tl}.dtype)"
        else:
            if concatenated:
                last = f"max({labels}.shape[0] - 1, 0)"
                starts = f"(jnp.cumsum({tl}) - {tl})[:, None]"
                tg = f"jnp.take({labels}, jnp.clip({starts} + jnp.arange({states}), 0, {last}))"
            else:
                tg = f"{labels}[:, :{states}].astype({tl}.dtype)"
            between = f"jnp.stack([jnp.full_like(t, {blank}), t], axis=2).reshape(t.shape[0], {2 * states})"
            extended = _let("t", [tg], f"jnp.pad({between}, ((0, 0), (0, 1)), constant_values={blank})")
        inner = _let("skip, valid, e",
                     [f"jnp.pad(lab[:, 2:] != lab[:, :-2], ((0, 0), (2, 0)))[:, :{length}]",
                      f"jnp.arange({length}) < 2 * tl[:, None] + 1",
                      f"jnp.take_along_axis(lp, jnp.broadcast_to(lab[None], (lp.shape[0],) + lab.shape), axis=2)"],
                     body)
        names = ", ".join(["lp, lab, il, tl", *(name for name, _ in extra)])
        return _let(names, [lp, extended, il, tl, *(printer._print(a) for _, a in extra)], inner)

    def _alpha(self) -> str:
        """log alpha (T, N, L) given the bound names of ``_setting``: eq. (6), (7) of Graves et al."""
        length = 2 * self.attributes()[1] + 1
        step = _let("a2, a3", [_shifted("a", 1, length), f"jnp.where(skip, {_shifted('a', 2, length)}, {NEG})"],
                    f"jnp.where(valid, {_logsumexp('a', 'a2', 'a3')} + et, {NEG})")
        first = f"jnp.where(valid & (jnp.arange({length}) < 2), e[0], {NEG})"
        return _let("a0", [first], f"jnp.concatenate([a0[None], jax.lax.scan(lambda a, et: (lambda n: (n, n))({step}), "
                                   f"a0, e[1:])[1]])")

    @staticmethod
    def _nll() -> str:
        """-log p per sequence from ``alpha``: its last two states at the last input (no input: 0 if no label)."""
        pick = "jnp.take_along_axis(last, jnp.clip({}, 0)[:, None], axis=1)[:, 0]"
        l1, l2 = pick.format("2 * tl"), f"jnp.where(tl > 0, {pick.format('2 * tl - 1')}, {NEG})"
        likelihood = _let("l1, l2", [l1, l2], _logsumexp("l1", "l2"))
        last = "alpha[jnp.clip(il - 1, 0), jnp.arange(il.shape[0])]"
        return _let("last", [last], f"-jnp.where(il == 0, jnp.where(tl == 0, 0, {NEG}).astype(lp.dtype), {likelihood})")


class CtcLoss(_Ctc):
    """-log p(labels | log_probs) per sequence (N,): inf where no alignment exists."""

    arity = 4
    display = "ctc_loss"

    def shape(self, shape_of):
        return (shape_of(self.args[0])[1],)

    def _jax_source(self, printer):
        return self._setting(printer, *self.args[:4], _let("alpha", [self._alpha()], self._nll()))

    def vjp(self, p, g, out):
        lp = self.args[0]
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        grad = CtcLossGrad(g, *self.args[:4], out, *self.args[4:])
        return [(lp, p.assign(grad, p.shape_of(lp), p.dtype_of(lp), "ctc_grad"))]


class CtcLossGrad(_Ctc):
    """PyTorch's ``_ctc_loss_backward`` of the cotangent ``g`` (N,): args g, log_probs, labels,
    input and target lengths, the loss (N,); then blank, S, concatenated, zero_infinity."""

    arity = 6
    display = "ctc_loss_backward"

    def shape(self, shape_of):
        return shape_of(self.args[1])

    def dtype(self, dtype_of):
        return dtype_of(self.args[1])

    def _beta(self) -> str:
        """log beta (T, N, L), eq. (10), (11): each sequence starts at its own last input."""
        length = 2 * self.attributes()[1] + 1
        s = f"jnp.arange({length})"
        ahead1 = f"jnp.pad(b[:, 1:], ((0, 0), (0, 1)), constant_values={NEG})"
        ahead2 = f"jnp.pad(b[:, 2:], ((0, 0), (0, 2)), constant_values={NEG})[:, :{length}]"
        skip_ahead = f"jnp.pad(skip[:, 2:], ((0, 0), (0, 2)))[:, :{length}]"
        recursion = _let("b2, b3", [ahead1, f"jnp.where({skip_ahead}, {ahead2}, {NEG})"],
                         f"{_logsumexp('b', 'b2', 'b3')} + et")
        start = f"jnp.where(({s} == 2 * tl[:, None]) | ({s} == 2 * tl[:, None] - 1), et, {NEG})"
        new = (f"jnp.where(valid, jnp.where((t == il - 1)[:, None], {start}, jnp.where((t < il - 1)[:, None], "
               f"{recursion}, {NEG})), {NEG})")
        return (f"jax.lax.scan(lambda b, x: (lambda et, t: (lambda n: (n, n))({new}))(*x), "
                f"jnp.full(e.shape[1:], {NEG}, e.dtype), (e, jnp.arange(e.shape[0])), reverse=True)[1]")

    def _jax_source(self, printer):
        g, lp, labels, il, tl, nll = self.args[:6]
        zero_infinity = bool(self.args[9])
        index = "jnp.arange(lp.shape[0])[:, None, None], jnp.arange(lp.shape[1])[None, :, None], lab[None]"
        at_states = "jnp.broadcast_to(lab[None], ab.shape)"
        # log of the sum of alpha beta over the states of each label, PyTorch's log_collected_alpha_beta
        top = _let("mx", [f"jnp.full(lp.shape, {NEG}, lp.dtype).at[{index}].max(ab)"], f"jnp.where(mx == {NEG}, 0, mx)")
        collected = _let("top", [top], f"jnp.log(jnp.zeros(lp.shape, lp.dtype).at[{index}].add(jnp.exp(ab - "
                                       f"jnp.take_along_axis(top, {at_states}, axis=2)))) + top")
        grad = (f"jnp.where(jnp.arange(lp.shape[0])[:, None, None] < il[None, :, None], (jnp.exp(lp) - jnp.exp(lcab + "
                f"nll[None, :, None] - lp)) * g[None, :, None], 0)")
        if zero_infinity:
            grad = f"jnp.where((nll == jnp.inf)[None, :, None], 0, {grad})"
        body = _let("alpha", [self._alpha()], _let("ab", [f"alpha + {self._beta()}"], _let("lcab", [collected], grad)))
        return self._setting(printer, lp, labels, il, tl, body, extra=(("g", g), ("nll", nll)))

    def vjp(self, p, g, out):
        raise RuntimeError("derivative for aten::_ctc_loss_backward is not implemented")


def ctc_attributes(blank: int, states: int, concatenated: bool, zero_infinity: bool) -> tuple:
    """The heads' attributes as SymPy holds them."""
    return (sp.Integer(blank), sp.Integer(states), sp.true if concatenated else sp.false,
            sp.true if zero_infinity else sp.false)
