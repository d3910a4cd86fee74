"""IR heads that run PyTorch's CPU order kernels step by step, so that among equal values they pick
the entry PyTorch picks: kthvalue's quickselect (median-of-three pivot, Hoare partition, NaN
largest) and mode's std::sort of (value, index) pairs (libstdc++'s introsort and insertion sort
with ``<``, under which a NaN is neither less nor greater than anything, and equals nothing).

Each lowers to a ``jax.lax.while_loop`` over one slice, mapped over the others, written as one
expression as the printer needs (lambdas bound to names).  Their results are positions (int64)
along the last axis of x: they carry no gradient; the values are taken at them (TakeAlong).
"""
from __future__ import annotations

from symgrad.ir.functions import Structural


def _let(names: str, values, body: str) -> str:
    """``body`` with ``names`` bound to ``values``: an expression."""
    return f"(lambda {names}: {body})({', '.join(values)})"


def _each_slice(printer, x, row: str) -> str:
    """``row`` (a function of one slice, the last axis of x) run on each slice in turn, as PyTorch's
    kernel does (a loop compiles in half the time a vmap of the while loops takes)."""
    return _let("m", [printer._print(x)], f"jax.lax.map({row}, m.reshape(-1, m.shape[-1])).reshape(m.shape[:-1])")


# Helpers every kernel binds: PyTorch's ``x > y or (x is NaN and y is not)``, and swaps of the
# working values ``a`` and their positions ``ix``, always or where ``c`` holds.
_GT = "lambda x, y: (jnp.isnan(x) & ~jnp.isnan(y)) | (x > y)"
_SWAP = "lambda a, ix, i, j: (a.at[i].set(a[j]).at[j].set(a[i]), ix.at[i].set(ix[j]).at[j].set(ix[i]))"
_SWAP_IF = "lambda c, a, ix, i, j: (lambda b: (jnp.where(c, b[0], a), jnp.where(c, b[1], ix)))(sw(a, ix, i, j))"


def _with_helpers(body: str) -> str:
    return _let("gt, sw", [_GT, _SWAP], _let("cs", [_SWAP_IF], body))


def _partition(k: int) -> str:
    """One round of PyTorch's quick_select_template on a[L..R]: median of three to a[L] (the
    pivot), a[L + 1] and a[R] as sentinels, the Hoare scans (bounded by L and R, which they never
    pass where the round is taken), the pivot swapped to j; (a, ix, L, R) for the next round."""
    up = "jax.lax.while_loop(lambda i: (i < R) & gt(piv, t[0][i]), lambda i: i + 1, t[2] + 1)"
    down = "jax.lax.while_loop(lambda j: (j > L) & gt(t[0][j], piv), lambda j: j - 1, t[3] - 1)"
    scan = (f"lambda t: (lambda i: (lambda j: (lambda b: (jnp.where(j < i, t[0], b[0]), jnp.where(j < i, t[1], b[1]), "
            f"i, j, j < i))(sw(t[0], t[1], i, j)))({down}))({up})")
    pivot_placed = (f"(lambda piv: (lambda t: (lambda u: (u[0], u[1], jnp.where(t[3] <= {k}, t[2], L), "
                    f"jnp.where(t[3] >= {k}, t[3] - 1, R)))(sw(t[0], t[1], L, t[3])))"
                    f"(jax.lax.while_loop(lambda t: ~t[4], {scan}, (s[0], s[1], L + 1, R, False))))(s[0][L])")
    return (f"lambda a, ix, L, R: (lambda s: (lambda s: (lambda s: (lambda s: {pivot_placed})"
            f"(cs(gt(s[0][L + 1], s[0][L]), *s, L + 1, L)))(cs(gt(s[0][L], s[0][R]), *s, L, R)))"
            f"(cs(gt(s[0][L + 1], s[0][R]), *s, L + 1, R)))(sw(a, ix, L + (R - L) // 2, L + 1))")


class _PositionAlongLastAxis(Structural):
    """A position (int64) along the last axis of x, one per slice: no gradient goes through it."""

    def shape(self, shape_of):
        return shape_of(self.args[0])[:-1]

    def dtype(self, dtype_of):
        return "int64"

    def vjp(self, p, g, out):
        return []


class QuickSelect(_PositionAlongLastAxis):
    """The position of the k-th smallest entry (``args[1]``, from 0) along the last axis of x, where
    PyTorch's kthvalue finds it."""

    display = "quickselect"

    def _jax_source(self, printer):
        k = int(self.args[1])
        step = ("lambda s: (lambda q, t: (jnp.where(s[3] <= s[2], s[0], jnp.where(s[3] == s[2] + 1, t[0], q[0])), "
                "jnp.where(s[3] <= s[2], s[1], jnp.where(s[3] == s[2] + 1, t[1], q[1])), q[2], q[3], "
                "(s[3] <= s[2]) | (s[3] == s[2] + 1)))(part(s[0], s[1], s[2], s[3]), "
                "cs(gt(s[0][s[2]], s[0][s[3]]), s[0], s[1], s[2], s[3]))")
        row = (f"lambda a: jax.lax.while_loop(lambda s: ~s[4], {step}, "
               f"(a, jnp.arange(a.shape[0]), 0, a.shape[0] - 1, False))[1][{k}]")
        return _each_slice(printer, self.args[0], _with_helpers(_let("part", [_partition(k)], row)))


# libstdc++'s std::sort of (value, position) pairs by value with ``<``: introsort (median of three
# moved first, unguarded partitions) down to runs of 16, then an insertion sort, guarded over the
# first 16 (an entry less than the first goes first) and unguarded after.  Segments are kept on a
# stack (first, last, depth); they are disjoint, so the order they are taken in does not matter.
_MEDIAN_FIRST = ("lambda a, ix, r, p, q, c: sw(a, ix, r, jnp.where(a[p] < a[q], jnp.where(a[q] < a[c], q, "
                 "jnp.where(a[p] < a[c], c, p)), jnp.where(a[p] < a[c], p, jnp.where(a[q] < a[c], c, q))))")
_SCANS = ("lambda t: (lambda f: (lambda l: (lambda b, done: (jnp.where(done, t[0], b[0]), jnp.where(done, t[1], b[1]), "
          "jnp.where(done, f, f + 1), l, done))(sw(t[0], t[1], f, l), ~(f < l)))"
          "(jax.lax.while_loop(lambda l: (l > first) & (piv < t[0][l]), lambda l: l - 1, t[3] - 1)))"
          "(jax.lax.while_loop(lambda f: (f < last - 1) & (t[0][f] < piv), lambda f: f + 1, t[2]))")
_PARTITION = (f"lambda a, ix, first, last: (lambda s: (lambda piv: jax.lax.while_loop(lambda t: ~t[4], {_SCANS}, "
              "(s[0], s[1], first + 1, last, False))[:3])(s[0][first]))"
              "(med(a, ix, first, first + 1, first + (last - first) // 2, last - 1))")
_SEGMENT = ("lambda s: (lambda e, top: (lambda big, p: (jnp.where(big, p[0], s[0]), jnp.where(big, p[1], s[1]), "
            "jnp.where(big, s[2].at[top].set(jnp.stack([e[0], p[2], e[2] - 1]))"
            ".at[top + 1].set(jnp.stack([p[2], e[1], e[2] - 1])), s[2]), jnp.where(big, top + 2, top)))"
            "((e[1] - e[0] > 16) & (e[2] > 0), part(s[0], s[1], e[0], e[1])))(s[2][s[3] - 1], s[3] - 1)")
_INTROSORT = (f"lambda a, ix: jax.lax.while_loop(lambda s: s[3] > 0, {_SEGMENT}, "
              "(a, ix, jnp.zeros((a.shape[0] + 2, 3), jnp.int64)"
              ".at[0].set(jnp.array([0, a.shape[0], 2 * (a.shape[0].bit_length() - 1)])), 1))[:2] "
              "if a.shape[0] > 16 else (a, ix)")
_PLACE = ("(lambda v, w, p: (jnp.where(q < p, a, jnp.where(q == p, v, jnp.where(q <= i, jnp.roll(a, 1), a))), "
          "jnp.where(q < p, ix, jnp.where(q == p, w, jnp.where(q <= i, jnp.roll(ix, 1), ix)))))"
          "(a[i], ix[i], jnp.where((i < 16) & (a[i] < a[0]), 0, "
          "jax.lax.while_loop(lambda j: (j > 0) & (a[i] < a[j - 1]), lambda j: j - 1, i)))")
_INSERTION = (f"lambda a, ix: (lambda q: jax.lax.fori_loop(1, a.shape[0], lambda i, s: (lambda a, ix: {_PLACE})(*s), "
              "(a, ix)))(jnp.arange(a.shape[0]))")


def _std_sort() -> str:
    """``lambda a: (sorted values, their positions)`` as std::sort leaves them."""
    introsort = _let("med", [_MEDIAN_FIRST], _let("part", [_PARTITION], _INTROSORT))
    return _let("sw", [_SWAP], _let("introsort, insertion", [introsort, _INSERTION],
                                    "lambda a: insertion(*introsort(a, jnp.arange(a.shape[0])))"))


class SortedMode(_PositionAlongLastAxis):
    """The position of the most frequent value along the last axis of x where PyTorch's mode finds
    it: the pairs sorted as its kernel's std::sort sorts them, then the first run (of entries ``==``
    each other) longer than all before it, and the position its last entry came from.  (A slice
    that drives std::sort past 2 log2(n) levels of partitions makes it heapsort what is left; here
    the insertion sort sorts it, and among equal values the position may differ.)"""

    display = "sorted_mode"

    def _jax_source(self, printer):
        runs = ("(lambda a, ix: (lambda q, ends: (lambda starts: ix[jnp.argmax(jnp.where(ends, q - starts + 1, 0))])"
                "(jax.lax.cummax(jnp.where(jnp.concatenate([jnp.ones(1, bool), ends[:-1]]), q, 0))))"
                "(jnp.arange(a.shape[0]), jnp.concatenate([a[:-1] != a[1:], jnp.ones(1, bool)])))(*sorted_pairs(a))")
        return _each_slice(printer, self.args[0], _let("sorted_pairs", [_std_sort()], f"lambda a: {runs}"))
