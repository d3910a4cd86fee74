"""Tests and logic with boolean results: isnan, isinf, isposinf, isneginf, isfinite, isreal, signbit and
logical_and/or/xor/not (the operators ``& | ^ ~`` are the bitwise ops, symgrad.ops.bitwise).  No gradient
flows through a boolean."""
from __future__ import annotations

import jax.numpy as jnp
import sympy as sp

from symgrad import dtypes, ir
from symgrad.ir import functions as ir_functions
from symgrad.ops.elementwise import BINARY, UNARY, computed_operands, infer_elementwise, public_function, public_names
from symgrad.ops.registry import Op, register


def _boolean(name, head, reference, arity):
    op = register(Op(name, None, lambda nodes: (infer_elementwise(nodes)[0], dtypes.bool_),
                     lambda p, node, *xs: p.assign(head(*computed_operands(p, node, xs)), node.shape, "bool", name),
                     saves=False, reference=reference, torch_fn=lambda t, *xs: getattr(t, name)(*xs),
                     examples=UNARY if arity == 1 else BINARY[:3], elementwise=True))
    op.publish(public_names(name, inplace=False))(public_function(op, arity))
    return op


ISNAN = _boolean("isnan", ir.isnan, jnp.isnan, 1)
ISINF = _boolean("isinf", ir.isinf, jnp.isinf, 1)
ISFINITE = _boolean("isfinite", ir.isfinite, jnp.isfinite, 1)
ISPOSINF = _boolean("isposinf", lambda x: ir.logical_and(ir.isinf(x), ir.greater(x, 0)), jnp.isposinf, 1)
ISNEGINF = _boolean("isneginf", lambda x: ir.logical_and(ir.isinf(x), ir.less(x, 0)), jnp.isneginf, 1)
ISREAL = _boolean("isreal", lambda x: sp.true, jnp.isreal, 1)  # every real tensor's entries are
SIGNBIT = _boolean("signbit", ir_functions.signbit, jnp.signbit, 1)
LOGICAL_NOT = _boolean("logical_not", ir.logical_not, jnp.logical_not, 1)
LOGICAL_AND = _boolean("logical_and", ir.logical_and, jnp.logical_and, 2)
LOGICAL_OR = _boolean("logical_or", ir.logical_or, jnp.logical_or, 2)
LOGICAL_XOR = _boolean("logical_xor", ir.logical_xor, jnp.logical_xor, 2)

