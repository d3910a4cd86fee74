"""Elementwise ops: a SymPy form each; SymPy derives every gradient from it.

Python numbers enter as constant nodes, so ``x + 2`` and ``x + y`` are one op; the variants
that PyTorch names differently (``2 - x`` is ``RsubBackward1``) are entries of their own.
"""
from __future__ import annotations

import jax.numpy as jnp
import sympy as sp

from symgrad import dtypes
from symgrad.graph import CONST
from symgrad import ir
from symgrad.ir import broadcast_shapes, ieee
from symgrad.ops.registry import Example, Op, register
from symgrad.tensor import apply

UNARY = (Example(((3, 4),)), Example(((),)), Example(((7,),)))
BINARY = (Example(((3, 4), (3, 4))), Example(((3, 4), (4,))), Example(((2, 1, 3), (4, 1))),
          Example(((5,), ()), ), Example(((3,), (3,)), scalars={1: 1.5}))
REFLECTED = (Example(((3, 4), ()), scalars={1: 2.5}), Example(((5,), ()), scalars={1: 3}))


def priority(node) -> int:
    """PyTorch's promotion priority: 0 for a Python number, 1 for a 0-dim tensor, 2 otherwise."""
    if not node.shape:
        return 0 if node.op is CONST else 1
    return 2


def infer_elementwise(nodes, float_result=False):
    """Broadcast shape and promoted dtype, with the common cases (equal shapes, a scalar
    operand, equal dtypes) decided without the general rules: this runs on every op."""
    first = nodes[0]
    shape, dtype = first.shape, first.dtype
    for n in nodes[1:]:
        if n.shape != shape:
            if not n.shape:
                continue
            shape = n.shape if not shape else broadcast_shapes(shape, n.shape)
    for n in nodes[1:]:
        if n.dtype is not dtype:
            dtype = dtypes.promote([(n.dtype, priority(n)) for n in nodes])
            break
    if float_result and dtype.kind != 2:
        dtype = dtypes.float32
    return shape, dtype


def elementwise(name, grad_fn, form, *, float_result=False, saves=True, reference=None, torch_fn=None,
                examples=None, domain=None) -> Op:
    """Register an op whose value is ``form`` applied to its inputs' symbols."""
    arity = form.__code__.co_argcount if hasattr(form, "__code__") else 1  # SymPy heads are unary here

    def build(p, node, *xs):
        if float_result:  # jax.nn's functions take floats only: cast integer inputs as PyTorch does
            xs = [p.astype(x, node.dtype.name) if i.dtype.kind < 2 else x for x, i in zip(xs, node.inputs)]
        # Unevaluated (IEEE: x*0 is NaN at inf, symgrad.ir.ieee).  This is also the cheap way:
        # SymPy's evaluation (sin's looks for multiples of pi and of i) costs more than the node,
        # and its cost per op grew with the program once its bounded cache overflowed.
        return p.assign(ieee.unevaluated(form, *xs), node.shape, node.dtype.name, name)

    return register(Op(name, grad_fn, lambda nodes: infer_elementwise(nodes, float_result), build,
                       saves=saves, reference=reference, torch_fn=torch_fn,
                       examples=examples or (UNARY if arity == 1 else BINARY),
                       domain=domain or ("real",) * arity, elementwise=True))


def _pow_name(nodes):
    base, exponent = nodes
    if exponent.op is CONST:
        return "PowBackward0"
    return "PowBackward2" if base.op is CONST else "PowBackward1"


ADD = elementwise("add", "AddBackward0", lambda a, b: a + b, saves=False, reference=jnp.add,
                  torch_fn=lambda t, a, b: t.add(a, b))
SUB = elementwise("sub", "SubBackward0", lambda a, b: a - b, saves=False, reference=jnp.subtract,
                  torch_fn=lambda t, a, b: t.sub(a, b))
RSUB = elementwise("rsub", "RsubBackward1", lambda a, b: b - a, saves=False,
                   reference=lambda a, b: b - a, torch_fn=lambda t, a, b: b - a, examples=REFLECTED)
MUL = elementwise("mul", "MulBackward0", lambda a, b: a * b, reference=jnp.multiply,
                  torch_fn=lambda t, a, b: t.mul(a, b))
DIV = elementwise("div", "DivBackward0", lambda a, b: a / b, float_result=True, reference=jnp.true_divide,
                  torch_fn=lambda t, a, b: t.div(a, b), domain=("real", "nonzero"))
RDIV = elementwise("rdiv", "MulBackward0", lambda a, b: b / a, float_result=True,
                   reference=lambda a, b: b / a, torch_fn=lambda t, a, b: b / a, domain=("nonzero", "real"),
                   examples=REFLECTED)
def _infer_pow(nodes):
    base, exponent = nodes
    if base.dtype.kind < 2 and exponent.dtype.kind < 2 and exponent.op is CONST and exponent.attrs[0] < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    return infer_elementwise(nodes)


POW = register(Op("pow", _pow_name, _infer_pow,
                  lambda p, node, a, b: p.assign(ieee.unevaluated(sp.Pow, a, b), node.shape, node.dtype.name, "pow"),
                  reference=jnp.power, torch_fn=lambda t, a, b: t.pow(a, b),
                  examples=(Example(((3, 4), ()), scalars={1: 2}), Example(((5,), ()), scalars={1: 3.5}),
                            Example(((3, 4), (3, 4))), Example(((), (4,)), scalars={0: 2.0})),
                  domain=("positive", "real"), elementwise=True))
MAXIMUM = elementwise("maximum", "MaximumBackward0", lambda a, b: sp.Max(a, b), reference=jnp.maximum,
                      torch_fn=lambda t, a, b: t.maximum(a, b), examples=BINARY[:3])
MINIMUM = elementwise("minimum", "MinimumBackward0", lambda a, b: sp.Min(a, b), reference=jnp.minimum,
                      torch_fn=lambda t, a, b: t.minimum(a, b), examples=BINARY[:3])

NEG = elementwise("neg", "NegBackward0", lambda a: -a, saves=False, reference=jnp.negative,
                  torch_fn=lambda t, a: t.neg(a))
EXP = elementwise("exp", "ExpBackward0", sp.exp, float_result=True, reference=jnp.exp,
                  torch_fn=lambda t, a: t.exp(a))
LOG = elementwise("log", "LogBackward0", sp.log, float_result=True, reference=jnp.log,
                  torch_fn=lambda t, a: t.log(a), domain=("positive",))
SQRT = elementwise("sqrt", "SqrtBackward0", sp.sqrt, float_result=True, reference=jnp.sqrt,
                   torch_fn=lambda t, a: t.sqrt(a), domain=("positive",))
SIN = elementwise("sin", "SinBackward0", sp.sin, float_result=True, reference=jnp.sin,
                  torch_fn=lambda t, a: t.sin(a))
COS = elementwise("cos", "CosBackward0", sp.cos, float_result=True, reference=jnp.cos,
                  torch_fn=lambda t, a: t.cos(a))
TANH = elementwise("tanh", "TanhBackward0", sp.tanh, float_result=True, reference=jnp.tanh,
                   torch_fn=lambda t, a: t.tanh(a))
SIGMOID = elementwise("sigmoid", "SigmoidBackward0", ir.sigmoid, float_result=True,
                      reference=lambda a: 1 / (1 + jnp.exp(-a)), torch_fn=lambda t, a: t.sigmoid(a))
RELU = elementwise("relu", "ReluBackward0", ir.relu, reference=lambda a: jnp.maximum(a, 0),
                   torch_fn=lambda t, a: t.relu(a), domain=("kinked",))
ABS = elementwise("abs", "AbsBackward0", sp.Abs, reference=jnp.abs, torch_fn=lambda t, a: t.abs(a),
                  domain=("kinked",))
SOFTPLUS = elementwise("softplus", "SoftplusBackward0", ir.softplus, float_result=True,
                       reference=lambda a: jnp.logaddexp(a, 0.0),
                       torch_fn=lambda t, a: t.nn.functional.softplus(a))
LOGSIGMOID = elementwise("log_sigmoid", "LogSigmoidBackward0", lambda a: -ir.softplus(-a), float_result=True,
                         reference=lambda a: -jnp.logaddexp(-a, 0.0),
                         torch_fn=lambda t, a: t.nn.functional.logsigmoid(a))


def add(input, other, alpha=1):
    return apply(ADD, input, other if alpha == 1 else apply(MUL, other, alpha))


def sub(input, other, alpha=1):
    return apply(SUB, input, other if alpha == 1 else apply(MUL, other, alpha))


def mul(input, other):
    return apply(MUL, input, other)


def div(input, other):
    return apply(DIV, input, other)


def pow(input, exponent):
    return apply(POW, input, exponent)


def maximum(input, other):
    return apply(MAXIMUM, input, other)


def minimum(input, other):
    return apply(MINIMUM, input, other)


def _infer_comparison(nodes):
    return infer_elementwise(nodes)[0], dtypes.bool_


def _comparison(name, head, torch_name, reference):
    return register(Op(name, None, _infer_comparison,
                       lambda p, node, a, b: p.assign(head(a, b), node.shape, "bool", name),
                       saves=False, reference=reference, torch_fn=lambda t, a, b: getattr(t, torch_name)(a, b),
                       examples=BINARY[:3] + (Example(((4,), ()), scalars={1: 0}),), elementwise=True))


GT = _comparison("gt", ir.greater, "gt", jnp.greater)
GE = _comparison("ge", ir.greater_equal, "ge", jnp.greater_equal)
LT = _comparison("lt", ir.less, "lt", jnp.less)
LE = _comparison("le", ir.less_equal, "le", jnp.less_equal)
EQ = _comparison("eq", ir.equal, "eq", jnp.equal)
NE = _comparison("ne", ir.not_equal, "ne", jnp.not_equal)


def _binary_function(op):
    """The public function of a two-input op: ``torch.gt(input, other)`` and friends."""

    def function(input, other):
        return apply(op, input, other)

    function.__name__ = function.__qualname__ = op.name
    return function


gt, ge, lt, le, eq, ne = (_binary_function(op) for op in (GT, GE, LT, LE, EQ, NE))


def _infer_where(nodes):
    condition, a, b = nodes
    if condition.dtype is not dtypes.bool_:
        raise ValueError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                         f"{condition.dtype.name.capitalize()}")
    shape = broadcast_shapes(condition.shape, a.shape, b.shape)
    return shape, infer_elementwise((a, b))[1]


WHERE = register(Op("where", "WhereBackward0", _infer_where,
                    lambda p, node, c, a, b: p.assign(ir.select(c, a, b), node.shape, node.dtype.name, "where"),
                    saves=False, reference=jnp.where, torch_fn=lambda t, c, a, b: t.where(c, a, b),
                    examples=(Example(((3, 4), (3, 4), (3, 4))), Example(((3, 4), (4,), ())),
                              Example(((2, 1), (1, 3), (2, 3)))),
                    domain=("bool", "real", "real"), elementwise=True))


def where(condition, input, other):
    return apply(WHERE, condition, input, other)


def _unary(op):
    """The public function of a one-input op: ``torch.exp(input)`` and friends."""

    def function(input):
        return apply(op, input)

    function.__name__ = function.__qualname__ = op.name
    function.__doc__ = f"``torch.{op.name}``: recorded as {op.grad_fn}."
    return function


neg, exp, log, sqrt, sin, cos, tanh = (_unary(op) for op in (NEG, EXP, LOG, SQRT, SIN, COS, TANH))
sigmoid, relu, abs, logsigmoid, softplus = (_unary(op) for op in (SIGMOID, RELU, ABS, LOGSIGMOID, SOFTPLUS))


FILL = register(Op("fill", lambda nodes, value, name: name, lambda nodes, value, name: (nodes[0].shape, nodes[0].dtype),
                   lambda p, node, x: sp.sympify(node.attrs[0]), saves=False, elementwise=True))


def _keep_history_name(nodes):
    old = nodes[0]
    return old.op.backward_name(old.inputs, old.attrs)


# ``y.add_(1)`` under no_grad on a y that has history: y takes the new values, and its gradient
# is still y's (PyTorch does not record the update).  The form is exactly the new value plus a
# zero, ``y - stop_gradient(y)``, whose derivative routes the gradient through the old y.
KEEP_HISTORY = register(Op("keep_history", _keep_history_name, lambda nodes: (nodes[0].shape, nodes[0].dtype),
                           lambda p, node, old, new: p.assign(new + (old - p.stop_gradient(old)), node.shape,
                                                              node.dtype.name, "updated"),
                           saves=False))


def square(input):
    return apply(POW, input, 2)
