"""The symbolic view: a tensor as a SymPy expression, a gradient as SymPy, the JAX source.

Tensors are named by the caller (``names={"w": w, "b": b}``); unnamed inputs are ``x``,
``x_1`` ...  Each name is a plain ``sympy.Symbol``, so ``sympy.Symbol("b")`` is the ``b`` of
the expression and ``sympy.diff``, ``subs`` and ``lambdify`` (``modules="numpy"`` or ``"jax"``)
work on what these functions return.  The expressions are the IR program with its assignments
substituted back in: readable for small graphs (a deep shared DAG would print as a large tree,
which is why symgrad never computes with these inlined forms).  ``elementwise=True`` expands
small tensors entry by entry (symgrad.ir.entries), as a textbook writes ``w_{ij}``.
"""
from __future__ import annotations

import sympy as sp

from symgrad import engine
from symgrad.creation import as_tensor
from symgrad.ir.entries import entries
from symgrad.ir.functions import BroadcastTo
from symgrad.tracing import BackwardPlan, Trace, forward_program, walk_of


def _shaped(expr, shape):
    """A number standing for an array keeps its shape: ``broadcast_to(1, (2, 2))``, not ``1``."""
    expr = sp.sympify(expr)
    return BroadcastTo(expr, sp.Tuple(*shape)) if expr.is_Number and shape else expr


def _inline(program, exprs):
    """Substitute every assignment back into ``exprs``; inputs become plain symbols."""
    env = {s: sp.Symbol(s.name) for s in program.inputs}
    for sym, expr in program.assignments:
        env[sym] = _shaped(expr, program.shapes[sym]).xreplace(env)
    return [sp.sympify(e).xreplace(env) for e in exprs]


def _view(program, exprs, elementwise: bool):
    return entries(program, exprs) if elementwise else _inline(program, exprs)


def _node_names(names) -> dict:
    """``id(node) -> name``; one tensor under two names is a mistake, not a choice to make here."""
    named = {}
    for name, tensor in (names or {}).items():
        other = named.setdefault(id(tensor._node), name)
        if other != name:
            raise ValueError(f"one tensor is named both {other!r} and {name!r}")
    return named


def _trace(root, names, name):
    """The Trace of ``root`` down to its leaves, named tensors first; ``root``'s position."""
    names = names or {}
    walk, (position,) = walk_of([root], [t._node for t in names.values()], to_leaves=True)
    return Trace(walk, name, _node_names(names)), position


def expression(tensor, names=None, elementwise: bool = False):
    """``tensor`` as a SymPy expression of its leaves; with ``elementwise`` a ``sympy.Array`` of
    one expression per entry, over one symbol per leaf entry (``w_0_1``), for small tensors."""
    with engine.building():
        trace, position = _trace(tensor._node, names, "expression")
        return _view(trace.program, [trace.exprs[position]], elementwise)[0]


class Gradients(dict):
    """name -> SymPy gradient, shown in Jupyter as the partial derivatives they are."""

    def _repr_latex_(self):
        rows = [rf"\frac{{\partial f}}{{\partial {sp.latex(sp.Symbol(name))}}} &= {sp.latex(g)}"
                for name, g in self.items()]
        return r"$\displaystyle \begin{aligned}" + r" \\ ".join(rows) + r"\end{aligned}$"


def gradient(output, wrt, names=None, elementwise: bool = False):
    """The symbolic gradient of scalar ``output`` w.r.t. each tensor in ``wrt``.

    ``wrt`` is a dict name -> tensor (the result is a ``Gradients`` dict of SymPy expressions)
    or a list (the result is a list).  ``names`` names other leaves (the inputs, say).
    ``elementwise``: each gradient as a ``sympy.Array`` of entries (see ``expression``).
    """
    as_dict = isinstance(wrt, dict)
    targets = dict(wrt) if as_dict else {f"w{i}": t for i, t in enumerate(wrt)}
    with engine.building():
        trace, position = _trace(output._node, {**(names or {}), **targets}, "gradient")
        grads = trace.gradients(position, [trace.walk.index[t._node] for t in targets.values()])
        grads = _view(trace.program, [_shaped(g, t.shape) for g, t in zip(grads, targets.values())], elementwise)
    return Gradients(zip(targets, grads)) if as_dict else grads


def source(output, gradient=None, names=None) -> str:
    """The JAX source of the program ``output.backward(gradient)`` runs (forward and backward).

    With ``names`` (name -> tensor) the inputs carry those names; the program is the same.
    """
    seed = as_tensor(gradient, dtype=output.dtype)._node if gradient is not None else None
    plan = BackwardPlan(output._node, seed)
    if names:
        return engine.source(plan.program(_node_names(names)))
    return engine.program_for(plan.key, plan.program).source


def forward_source(output, names=None) -> str:
    """The JAX source of the program that computes ``output``'s value, named ``forward``; with
    ``names`` (name -> tensor) its inputs carry those names."""
    with engine.building():
        walk, positions = walk_of([output._node], [t._node for t in (names or {}).values()], to_leaves=True)
        return engine.source(forward_program(walk, positions, labels=["value"], names=_node_names(names)))
