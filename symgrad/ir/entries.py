"""A Program evaluated entry by entry: every array becomes a NumPy array of SymPy scalars.

The symbolic view's ``elementwise=True``.  An input ``w`` of shape (5, 3) becomes the symbols
``w_0_0`` ... ``w_4_2``; elementwise assignments are substituted entry by entry (broadcasting as
NumPy does) and the structural heads that are sums and rearrangements run as NumPy on object
arrays, so ``matmul(x, w)`` becomes ``x_0*w_0_j + ... + x_4*w_4_j``: the textbook's formula,
which plain ``sympy.diff`` differentiates.  Each expression grows with the tensors' sizes, so
this is for small ones (``MAX_ENTRIES``).
"""
from __future__ import annotations

import math

import numpy as np
import sympy as sp

from symgrad.ir import functions as F

MAX_ENTRIES = 1024  # entries of any one array: beyond that the expressions are too big to read


def _exp(a):
    return np.vectorize(sp.exp, otypes=[object])(a)


def _log(a):
    return np.vectorize(sp.log, otypes=[object])(a)


def _axes(arg):
    return tuple(int(v) for v in arg)


def _index_add(g, spec, shape):
    out = np.full(_axes(shape), sp.S.Zero, dtype=object)
    out[F.python_index(spec)] += g
    return out


# Structural head -> its NumPy form on object arrays (the arguments as the head holds them).
STRUCTURAL = {
    F.Matmul: lambda a, b: np.matmul(a, b),
    F.ReduceSum: lambda x, axes, keep: np.sum(x, axis=_axes(axes), keepdims=bool(keep)),
    F.Reshape: lambda x, shape: np.reshape(x, _axes(shape)),
    F.BroadcastTo: lambda x, shape: np.broadcast_to(x, _axes(shape)),
    F.Permute: lambda x, perm: np.transpose(x, _axes(perm)),
    F.Index: lambda x, spec: x[F.python_index(spec)],
    F.IndexAdd: _index_add,
    F.AsType: lambda x, dtype: x,
    F.ReducedWithSlope: lambda value, x, slope, axes, keep: value,  # the slope is a derivative SymPy finds too
    F.Concatenate: lambda *args: np.concatenate(args[:-1], axis=int(args[-1])),
    F.LogSumExp: lambda x, axes, keep: _log(np.sum(_exp(x), axis=_axes(axes), keepdims=bool(keep))),
    F.LogSoftmax: lambda x, axis: x - _log(np.sum(_exp(x), axis=int(axis), keepdims=True)),
    F.Softmax: lambda x, axis: _exp(x) / np.sum(_exp(x), axis=int(axis), keepdims=True),
    F.CumSum: lambda x, axis, reverse: (np.flip(np.cumsum(np.flip(x, int(axis)), int(axis)), int(axis))
                                        if reverse else np.cumsum(x, int(axis))),
}


def _input(sym, shape):
    """One plain symbol per entry (``w_0_1``); a 0-d input is the plain symbol ``w``."""
    if not shape:
        return np.array(sp.Symbol(sym.name), dtype=object)
    out = np.empty(shape, dtype=object)
    for index in np.ndindex(*shape):
        out[index] = sp.Symbol(f"{sym.name}_{'_'.join(map(str, index))}")
    return out


def _elementwise(expr, env):
    """``expr`` substituted entry by entry, its symbols' arrays broadcast against each other."""
    symbols = sorted(expr.free_symbols, key=str)
    arrays = np.broadcast_arrays(*(env[s] for s in symbols)) if symbols else []
    shape = arrays[0].shape if arrays else ()
    out = np.empty(shape, dtype=object)
    for index in np.ndindex(*shape):
        out[index] = expr.xreplace({s: a[index] for s, a in zip(symbols, arrays)})
    return out


def _value(expr, env):
    if isinstance(expr, F.Structural):
        form = STRUCTURAL.get(type(expr))
        if form is None:
            raise ValueError(f"the elementwise view does not expand {type(expr).__name__.lower()}: "
                             "use elementwise=False")
        arrays = [env[a] if isinstance(a, sp.Symbol) else np.array(a, dtype=object) for a in expr.arrays]
        return np.asarray(form(*arrays, *expr.args[expr.arity:]), dtype=object)
    return _elementwise(sp.sympify(expr), env)


def entries(program, exprs) -> list:
    """``exprs`` of ``program``, each a ``sympy.Array`` of its entries (a 0-d one: the entry)."""
    for sym in (*program.inputs, *(s for s, _ in program.assignments)):
        if math.prod(program.shapes[sym]) > MAX_ENTRIES:
            raise ValueError(f"the elementwise view is for small tensors: {sym} has "
                             f"{math.prod(program.shapes[sym])} entries (at most {MAX_ENTRIES})")
    env = {s: _input(s, program.shapes[s]) for s in program.inputs}
    for sym, expr in program.assignments:
        env[sym] = _value(expr, env)
    results = []
    for expr in exprs:
        value = _value(sp.sympify(expr), env)
        results.append(value[()] if value.ndim == 0 else sp.Array(value.tolist()))
    return results
