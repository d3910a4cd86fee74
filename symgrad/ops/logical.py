"""Tests and logic with boolean results: isnan, isinf, isfinite, signbit, logical_and/or/xor/not, and the
operators ``& | ^ ~`` on boolean tensors.  No gradient flows through a boolean."""
from __future__ import annotations

import jax.numpy as jnp

from symgrad import dtypes, ir
from symgrad.ir import functions as ir_functions
from symgrad.ops.elementwise import BINARY, UNARY, infer_elementwise, public_function, public_names
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import apply


def _boolean(name, head, reference, arity):
    op = register(Op(name, None, lambda nodes: (infer_elementwise(nodes)[0], dtypes.bool_),
                     lambda p, node, *xs: p.assign(head(*xs), node.shape, "bool", name),
                     saves=False, reference=reference, torch_fn=lambda t, *xs: getattr(t, name)(*xs),
                     examples=UNARY if arity == 1 else BINARY[:3], elementwise=True))
    op.publish(public_names(name, inplace=False))(public_function(op, arity))
    return op


ISNAN = _boolean("isnan", ir.isnan, jnp.isnan, 1)
ISINF = _boolean("isinf", ir.isinf, jnp.isinf, 1)
ISFINITE = _boolean("isfinite", ir.isfinite, jnp.isfinite, 1)
SIGNBIT = _boolean("signbit", ir_functions.signbit, jnp.signbit, 1)
LOGICAL_NOT = _boolean("logical_not", ir.logical_not, jnp.logical_not, 1)
LOGICAL_AND = _boolean("logical_and", ir.logical_and, jnp.logical_and, 2)
LOGICAL_OR = _boolean("logical_or", ir.logical_or, jnp.logical_or, 2)
LOGICAL_XOR = _boolean("logical_xor", ir.logical_xor, jnp.logical_xor, 2)


def _booleans_only(symbol, *tensors):
    for t in tensors:
        if getattr(t, "dtype", dtypes.bool_) is not dtypes.bool_:
            raise NotImplementedError(f"symgrad supports '{symbol}' on boolean tensors only (got {t.dtype}); "
                                      f"integer bitwise operations are not implemented")


@LOGICAL_AND.publish(Names(method=("__and__", "__rand__")))
def _and(input, other):
    _booleans_only("&", input, other)
    return apply(LOGICAL_AND, input, other)


@LOGICAL_OR.publish(Names(method=("__or__", "__ror__")))
def _or(input, other):
    _booleans_only("|", input, other)
    return apply(LOGICAL_OR, input, other)


@LOGICAL_XOR.publish(Names(method=("__xor__", "__rxor__")))
def _xor(input, other):
    _booleans_only("^", input, other)
    return apply(LOGICAL_XOR, input, other)


@LOGICAL_NOT.publish(Names(method=("__invert__",)))
def _invert(input):
    _booleans_only("~", input)
    return apply(LOGICAL_NOT, input)
