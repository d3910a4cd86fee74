"""The symbolic view: a tensor as a SymPy expression, a gradient as SymPy, the JAX source.

Tensors are named by the caller (``names={"w": w, "b": b}``); unnamed inputs are ``x``,
``x_1`` ...  The expressions are the IR program with its assignments substituted back in:
readable for small graphs (a deep shared DAG would print as a large tree, which is why
symgrad never computes with these inlined forms).
"""
from __future__ import annotations

import sympy as sp

from symgrad import engine
from symgrad.creation import as_tensor
from symgrad.tracing import BackwardPlan, Trace, forward_program, walk_of


def _inline(program, exprs):
    """Substitute every assignment back into ``exprs``."""
    env = {}
    for sym, expr in program.assignments:
        env[sym] = expr.xreplace(env)
    return [sp.sympify(e).xreplace(env) for e in exprs]


def _trace(root, names, name):
    """The Trace of ``root`` down to its leaves, named tensors first; ``root``'s position."""
    names = names or {}
    walk, (position,) = walk_of([root], [t._node for t in names.values()], to_leaves=True)
    return Trace(walk, name, {id(t._node): name for name, t in names.items()}), position


def expression(tensor, names=None) -> sp.Expr:
    """``tensor`` as a SymPy expression of its leaves."""
    with engine.building():
        trace, position = _trace(tensor._node, names, "expression")
        return _inline(trace.program, [trace.exprs[position]])[0]


def gradient(output, wrt, names=None):
    """The symbolic gradient of scalar ``output`` w.r.t. each tensor in ``wrt``.

    ``wrt`` is a dict name -> tensor (the result is a dict of SymPy expressions) or a list
    (the result is a list).  ``names`` names other leaves (the inputs, say).
    """
    as_dict = isinstance(wrt, dict)
    targets = dict(wrt) if as_dict else {f"w{i}": t for i, t in enumerate(wrt)}
    with engine.building():
        trace, position = _trace(output._node, {**(names or {}), **targets}, "gradient")
        grads = trace.gradients(position, [trace.walk.index[t._node] for t in targets.values()])
        grads = _inline(trace.program, grads)
    return dict(zip(targets, grads)) if as_dict else grads


def source(output, gradient=None, names=None) -> str:
    """The JAX source of the program ``output.backward(gradient)`` runs (forward and backward).

    With ``names`` (name -> tensor) the inputs carry those names; the program is the same.
    """
    seed = as_tensor(gradient, dtype=output.dtype)._node if gradient is not None else None
    plan = BackwardPlan(output._node, seed)
    if names:
        return engine.source(plan.program({id(t._node): name for name, t in names.items()}))
    return engine.program_for(plan.key, plan.program).source


def forward_source(output) -> str:
    """The JAX source of the program that computes ``output``'s value."""
    walk, positions = walk_of([output._node], to_leaves=True)
    key = ("value", tuple(walk.entries), tuple(positions))
    return engine.program_for(key, lambda: forward_program(walk, positions)).source
