"""The symbolic view: a tensor as a SymPy expression, a gradient as SymPy, the JAX source.

Tensors are named by the caller (``names={"w": w, "b": b}``); unnamed inputs are ``x``,
``x_1`` ...  The expressions are the IR program with its assignments substituted back in:
readable for small graphs (a deep shared DAG would print as a large tree, which is why
symgrad never computes with these inlined forms).
"""
from __future__ import annotations

import sympy as sp

import codegen.compile as programs  # a module import: codegen imports symgrad.ir
import codegen.emit as emitter
from symgrad.autodiff import reverse_mode
from symgrad.engine import BackwardPlan, Walk
from symgrad.ir import Program


def _inline(program: Program, exprs):
    """Substitute every assignment back into ``exprs``."""
    env = {}
    for sym, expr in program.assignments:
        env[sym] = expr.xreplace(env)
    return [sp.sympify(e).xreplace(env) for e in exprs]


def _walk(root, names):
    walk = Walk()
    for tensor in (names or {}).values():
        walk.add(tensor._node, False, to_leaves=True)
    position = walk.add(root, False, to_leaves=True)
    ids = {id(t._node): name for name, t in (names or {}).items()}
    return walk, position, ids


def expression(tensor, names=None) -> sp.Expr:
    """``tensor`` as a SymPy expression of its leaves."""
    walk, position, ids = _walk(tensor._node, names)
    with programs.building:
        program = Program("expression")
        exprs = walk.lower(program, ids)
        return _inline(program, [exprs[position]])[0]


def gradient(output, wrt, names=None):
    """The symbolic gradient of scalar ``output`` w.r.t. each tensor in ``wrt``.

    ``wrt`` is a dict name -> tensor (the result is a dict of SymPy expressions) or a list
    (the result is a list).  ``names`` names other leaves (the inputs, say).
    """
    as_dict = isinstance(wrt, dict)
    targets = dict(wrt) if as_dict else {f"w{i}": t for i, t in enumerate(wrt)}
    walk, position, ids = _walk(output._node, {**(names or {}), **targets})
    with programs.building:
        program = Program("gradient")
        exprs = walk.lower(program, ids)
        symbols = [exprs[walk.index[t._node]] for t in targets.values()]
        grads = _inline(program, reverse_mode(program, exprs[position], sp.S.One, symbols))
    return dict(zip(targets, grads)) if as_dict else grads


def source(output, gradient=None, names=None) -> str:
    """The JAX source of the program ``output.backward(gradient)`` runs (forward and backward).

    With ``names`` (name -> tensor) the inputs carry those names; the program is the same.
    """
    from symgrad.creation import as_tensor
    seed = as_tensor(gradient, dtype=output.dtype)._node if gradient is not None else None
    plan = BackwardPlan(output._node, seed)
    if names:
        with programs.building:
            return emitter.emit(plan.program({id(t._node): name for name, t in names.items()}))
    return programs.cache.get(plan.key, plan.program).source


def forward_source(output) -> str:
    """The JAX source of the program that computes ``output``'s value."""
    from symgrad.engine import _value_program
    walk = Walk()
    position = walk.add(output._node, False, to_leaves=True)
    return programs.cache.get(("value", tuple(walk.entries), (position,)), lambda: _value_program(walk, (position,))).source
