"""Elementwise ops: a SymPy form each; SymPy derives every gradient from it.

Python numbers enter as constant nodes, so ``x + 2`` and ``x + y`` are one op; the variants
that PyTorch names differently (``2 - x`` is ``RsubBackward1``) are entries of their own.
"""
from __future__ import annotations

import warnings

import jax.numpy as jnp
import sympy as sp

from symgrad import dtypes, engine, ir
from symgrad.ir import broadcast_shapes, ieee
from symgrad.ir import functions as F
from symgrad.ir.refused import Underivable
from symgrad.nodes import CONST, priority
from symgrad.ops.positions import nonzero
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply

UNARY = (Example(((3, 4),)), Example(((),)), Example(((7,),)))
BINARY = (Example(((3, 4), (3, 4))), Example(((3, 4), (4,))), Example(((2, 1, 3), (4, 1))),
          Example(((5,), ()), ), Example(((3,), (3,)), scalars={1: 1.5}))
REFLECTED = (Example(((3, 4), ()), scalars={1: 2.5}), Example(((5,), ()), scalars={1: 3}))


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
    if float_result and not dtype.is_floating_point:
        dtype = dtypes.get_default_dtype()
    return shape, dtype


def computed_operands(p, node, xs) -> list:
    """The operands cast to the dtype PyTorch computes in, as its TensorIterator casts them: the
    result's, or for a comparison the inputs' promoted dtype.  A float64 0-dim tensor meeting float32
    is rounded first (``tensor(16777217.) - x`` is 0 at x = 16777216, a tie of ``fmax`` goes to the
    first operand); a mask meets numbers as numbers (``Program.astype``: NaN * False is NaN)."""
    computed = node.dtype if node.dtype is not dtypes.bool_ else infer_elementwise(node.inputs)[1]
    return [x if i.dtype is computed else p.astype(x, computed.name) for x, i in zip(xs, node.inputs)]


def refuse_kernel(kernel: str, *categories):
    """PyTorch's refusal where its CPU kernel has no loop for the input's dtype category:
    ``NotImplementedError: "abs_cpu" not implemented for 'Bool'``."""
    def refuse(nodes):
        dtype = nodes[0].dtype
        if dtype.category in categories:
            raise NotImplementedError(f'"{kernel}" not implemented for \'{dtypes.torch_name(dtype)}\'')
    return refuse


def refuse_bool(message: str):
    """PyTorch's own RuntimeError for a bool input."""
    def refuse(nodes):
        if nodes[0].dtype is dtypes.bool_:
            raise RuntimeError(message)
    return refuse


def _refuse_bool_subtraction(nodes):
    bools = sum(n.dtype is dtypes.bool_ for n in nodes)
    if bools == 2:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if bools:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")


NEGATION = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead.")


def elementwise(name, grad_fn, form, *, float_result=False, saves=True, reference=None, torch_fn=None,
                examples=None, domain=None, names: Names | None = None, refuse=None) -> Op:
    """Register an op whose value is ``form`` applied to its inputs' symbols; with ``names``, its
    public function ``name(input, ...)`` goes by them.  ``refuse(nodes)`` raises PyTorch's error
    for inputs PyTorch has no kernel for (``refuse_kernel``, ``refuse_bool``).  ``examples=()``: an op
    the generic tests cannot drive (its own test file checks it)."""
    code = getattr(form, "__code__", None)  # a lambda or sympy.sqrt(arg, evaluate=None); else a SymPy head
    arity = code.co_argcount - len(form.__defaults__ or ()) if code else min(form.nargs)

    def build(p, node, *xs):
        xs = computed_operands(p, node, xs)
        # Unevaluated (IEEE: x*0 is NaN at inf, symgrad.ir.ieee).  This is also the cheap way:
        # SymPy's evaluation (sin's looks for multiples of pi and of i) costs more than the node,
        # and its cost per op grew with the program once its bounded cache overflowed.
        return p.assign(ieee.unevaluated(form, *xs), node.shape, node.dtype.name, name)

    def infer(nodes):
        if refuse is not None:
            refuse(nodes)
        return infer_elementwise(nodes, float_result)

    op = register(Op(name, grad_fn, infer, build,
                     saves=saves, reference=reference, torch_fn=torch_fn,
                     examples=(UNARY if arity == 1 else BINARY) if examples is None else examples,
                     domain=domain or ("real",) * arity, elementwise=True))
    if names is not None:
        op.publish(names)(public_function(op, arity))
    return op


def public_function(op: Op, arity: int):
    """``torch.<op>(input, ...)``: the op applied to its inputs, nothing else."""
    if arity == 1:
        def function(input):
            return apply(op, input)
    elif arity == 2:
        def function(input, other):
            return apply(op, input, other)
    else:
        def function(*inputs):
            if len(inputs) != arity:
                raise TypeError(f"{op.name}() takes {arity} arguments ({len(inputs)} given)")
            return apply(op, *inputs)
    function.__name__ = function.__qualname__ = op.name
    function.__doc__ = f"``torch.{op.name}``: recorded as {op.grad_fn}." if isinstance(op.grad_fn, str) else None
    return function


def public_names(name, *more, inplace=True):
    """A function that is also a Tensor method (``torch.exp``, ``x.exp()``) and, as most are in
    PyTorch, an in-place method (``x.exp_()``)."""
    return Names(function=(name,), method=(name, *more), inplace=(f"{name}_",) if inplace else ())


def _pow_name(nodes):
    base, exponent = nodes
    if exponent.op is CONST:
        return "PowBackward0"
    return "PowBackward2" if base.op is CONST else "PowBackward1"


ADD = elementwise("add", "AddBackward0", lambda a, b: a + b, saves=False, reference=jnp.add,
                  torch_fn=lambda t, a, b: t.add(a, b))
SUB = elementwise("sub", "SubBackward0", lambda a, b: a - b, saves=False, reference=jnp.subtract,
                  refuse=_refuse_bool_subtraction,
                  torch_fn=lambda t, a, b: t.sub(a, b))
RSUB = elementwise("rsub", "RsubBackward1", lambda a, b: b - a, saves=False, refuse=_refuse_bool_subtraction,
                   reference=lambda a, b: b - a, torch_fn=lambda t, a, b: b - a, examples=REFLECTED,
                   names=Names(function=("rsub",), method=("__rsub__",)))
MUL = elementwise("mul", "MulBackward0", lambda a, b: a * b, reference=jnp.multiply,
                  torch_fn=lambda t, a, b: t.mul(a, b))
DIV = elementwise("div", "DivBackward0", lambda a, b: a / b, float_result=True, reference=jnp.true_divide,
                  torch_fn=lambda t, a, b: t.div(a, b), domain=("real", "nonzero"))
def _infer_pow(nodes):
    base, exponent = nodes
    if not base.dtype.is_floating_point and not exponent.dtype.is_floating_point and exponent.op is CONST and exponent.attrs[0] < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    return infer_elementwise(nodes)


POW = register(Op("pow", _pow_name, _infer_pow,
                  lambda p, node, a, b: p.assign(ieee.unevaluated(sp.Pow, a, b), node.shape, node.dtype.name, "pow"),
                  reference=jnp.power, torch_fn=lambda t, a, b: t.pow(a, b),
                  examples=(Example(((3, 4), ()), scalars={1: 2}), Example(((5,), ()), scalars={1: 3.5}),
                            Example(((3, 4), (3, 4))), Example(((), (4,)), scalars={0: 2.0})),
                  domain=("positive", "real"), elementwise=True, reads_numbers=True))
MAXIMUM = elementwise("maximum", "MaximumBackward0", ir.maximum, reference=jnp.maximum,
                      torch_fn=lambda t, a, b: t.maximum(a, b), examples=BINARY[:3], names=public_names("maximum", inplace=False))
MINIMUM = elementwise("minimum", "MinimumBackward0", ir.minimum, reference=jnp.minimum,
                      torch_fn=lambda t, a, b: t.minimum(a, b), examples=BINARY[:3], names=public_names("minimum", inplace=False))

NEG = elementwise("neg", "NegBackward0", lambda a: -a, saves=False, reference=jnp.negative, refuse=refuse_bool(NEGATION),
                  torch_fn=lambda t, a: t.neg(a), names=public_names("neg", "__neg__"))
EXP = elementwise("exp", "ExpBackward0", sp.exp, float_result=True, reference=jnp.exp,
                  torch_fn=lambda t, a: t.exp(a), names=public_names("exp"))
LOG = elementwise("log", "LogBackward0", sp.log, float_result=True, reference=jnp.log,
                  torch_fn=lambda t, a: t.log(a), domain=("positive",), names=public_names("log"))
SQRT = elementwise("sqrt", "SqrtBackward0", F.square_root, float_result=True, reference=jnp.sqrt,
                   torch_fn=lambda t, a: t.sqrt(a), domain=("positive",), names=public_names("sqrt"))
SIN = elementwise("sin", "SinBackward0", sp.sin, float_result=True, reference=jnp.sin,
                  torch_fn=lambda t, a: t.sin(a), names=public_names("sin"))
COS = elementwise("cos", "CosBackward0", sp.cos, float_result=True, reference=jnp.cos,
                  torch_fn=lambda t, a: t.cos(a), names=public_names("cos"))
TANH = elementwise("tanh", "TanhBackward0", sp.tanh, float_result=True, reference=jnp.tanh,
                   torch_fn=lambda t, a: t.tanh(a), names=Names(("tanh",), ("tanh",), ("tanh",), inplace=("tanh_",)))
SIGMOID = elementwise("sigmoid", "SigmoidBackward0", ir.sigmoid, float_result=True,
                      reference=lambda a: 1 / (1 + jnp.exp(-a)), torch_fn=lambda t, a: t.sigmoid(a),
                      names=Names(("sigmoid",), ("sigmoid",), ("sigmoid",), inplace=("sigmoid_",)))
RELU = elementwise("relu", "ReluBackward0", ir.relu, reference=lambda a: jnp.maximum(a, 0),
                   refuse=refuse_bool("Boolean inputs not supported for relu"),
                   torch_fn=lambda t, a: t.relu(a), domain=("kinked",), names=Names(("relu",), ("relu",), ("relu",), inplace=("relu_",), functional_inplace=True))
ABS = elementwise("abs", "AbsBackward0", sp.Abs, reference=jnp.abs, torch_fn=lambda t, a: t.abs(a),
                  refuse=refuse_kernel("abs_cpu", dtypes.BOOLEAN),
                  domain=("kinked",), names=public_names("abs", "__abs__"))
def softplus_form(a, beta, threshold):
    """PyTorch's kernel: x where beta x > threshold, else log1p(exp(beta x)) / beta.  Its backward
    takes the kernel's slope at the threshold, its double backward none there (it keeps
    beta x < threshold): at the threshold the gradient's carrier is linear, its slope not
    differentiated."""
    scaled, kernel = ieee.mul(a, beta), ir.softplus_kernel(a, beta)
    value = ir.select(ir.greater(scaled, threshold), a, kernel)
    at_threshold = ir.select(F.equal(scaled, threshold), ieee.mul(ir.rerouted(kernel.fdiff(1), sp.S.Zero), a), kernel)
    return ir.rerouted(value, ir.select(ir.greater(scaled, threshold), a, at_threshold))


SOFTPLUS = elementwise("softplus", "SoftplusBackward0", lambda a: softplus_form(a, sp.S.One, sp.Integer(20)),
                       float_result=True,
                       refuse=refuse_kernel("softplus_cpu", dtypes.BOOLEAN, dtypes.INTEGER),
                       reference=lambda a: jnp.logaddexp(a, 0.0),
                       torch_fn=lambda t, a: t.nn.functional.softplus(a))  # published with beta: ops/activations.py
SILU = elementwise("silu", "SiluBackward0", lambda a: a * ir.sigmoid(a), float_result=True,
                   refuse=refuse_kernel("silu_cpu", dtypes.BOOLEAN, dtypes.INTEGER),
                   reference=lambda a: a / (1 + jnp.exp(-a)), torch_fn=lambda t, a: t.nn.functional.silu(a),
                   names=Names(functional=("silu",), functional_inplace=True))
LOGSIGMOID = elementwise("log_sigmoid", "LogSigmoidBackward0", lambda a: -ir.softplus(-a), float_result=True,
                         refuse=refuse_kernel("log_sigmoid_cpu", dtypes.BOOLEAN, dtypes.INTEGER),
                         reference=lambda a: -jnp.logaddexp(-a, 0.0),
                         torch_fn=lambda t, a: t.nn.functional.logsigmoid(a), names=Names(functional=("logsigmoid",)))


@ADD.publish(Names(function=("add",), method=("add", "__add__", "__radd__"), inplace=("add_", "__iadd__"),
                   plain=True))
def add(input, other, alpha=1):
    return apply(ADD, input, other if alpha.__class__ is int and alpha == 1 else _scaled(input, other, alpha))


@SUB.publish(Names(function=("sub", "subtract"), method=("sub", "subtract", "__sub__"),
                   inplace=("sub_", "subtract_", "__isub__"), plain=True))
def sub(input, other, alpha=1):
    return apply(SUB, input, other if alpha.__class__ is int and alpha == 1 else _scaled(input, other, alpha))


def _scaled(input, other, alpha):
    """``alpha * other``, with PyTorch's checks of ``alpha`` against the result's kind."""
    floating = any(isinstance(t, float) or isinstance(t, Tensor) and t.dtype.is_floating_point for t in (input, other))
    if isinstance(alpha, float) and not floating:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    boolean = all(t.__class__ is bool or isinstance(t, Tensor) and t.dtype is dtypes.bool_ for t in (input, other))
    if isinstance(alpha, bool) and not boolean:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if boolean:  # a bool result takes alpha as a bool (``a + 2 * b`` is ``a or b``)
        alpha = bool(alpha)
    return other if alpha == 1 else apply(MUL, other, alpha)


@MUL.publish(Names(function=("mul", "multiply"), method=("mul", "multiply", "__mul__", "__rmul__"),
                   inplace=("mul_", "multiply_", "__imul__"), plain=True))
def mul(input, other):
    return apply(MUL, input, other)


ROUNDING_MODES = (None, "trunc", "floor")


def _rounded_quotient(p, node, a, b, mode):
    """``a / b`` rounded as PyTorch's kernels do: floats divide, then round (floor: Python's //);
    integers divide exactly (floor_divide, trunc_divide), in the result's dtype."""
    a, b = (p.astype(x, node.dtype.name) for x in (a, b))
    if node.dtype.is_floating_point:
        head = F.div_floor if mode == "floor" else lambda a, b: F.trunc(a / b)
    else:
        head = F.floor_divide if mode == "floor" else F.trunc_divide
    return p.assign(ieee.unevaluated(head, a, b), node.shape, node.dtype.name, f"div_{mode}")


def _infer_rounded_division(nodes, mode):
    if mode is None:
        return infer_elementwise(nodes, float_result=True)
    if all(n.dtype is dtypes.bool_ for n in nodes):
        raise NotImplementedError(f'"div_{mode}_cpu" not implemented for \'Bool\'')
    return infer_elementwise(nodes)


def _build_rounded_division(p, node, a, b):
    mode = node.attrs[0]
    if mode is None:
        return DIV.build(p, node, a, b)
    return _rounded_quotient(p, node, a, b, mode)


def _rounded_reference(a, b, mode):
    if mode is None:
        return jnp.true_divide(a, b)
    return jnp.floor_divide(a, b) if mode == "floor" else jnp.trunc(a / b)


# ``torch.div(a, b, rounding_mode=...)``, even None: PyTorch's overload with the argument (DivBackward2),
# whose gradient is zero when the quotient is rounded.
DIV_ROUNDED = register(Op("div_rounded", "DivBackward2", _infer_rounded_division, _build_rounded_division,
                          reference=_rounded_reference, elementwise=True, domain=("real", "nonzero"),
                          torch_fn=lambda t, a, b, mode: t.div(a, b, rounding_mode=mode),
                          examples=(Example(((3, 4), (3, 4)), ("floor",)), Example(((3, 4), (4,)), ("trunc",)),
                                    Example(((5,), ()), (None,)), Example(((5,), ()), ("floor",), scalars={1: -0.7}))))
_ABSENT = object()  # rounding_mode not given: torch.div(a, b) is DivBackward0, rounding_mode=None DivBackward2


@DIV.publish(Names(function=("div", "divide"), method=("div", "divide", "__truediv__"),
                   inplace=("div_", "divide_", "__itruediv__"), plain=True))
def div(input, other, *, rounding_mode=_ABSENT):
    """True division, or with ``rounding_mode`` 'trunc' or 'floor' the quotient rounded (an integer
    stays an integer, and integer division by zero raises PyTorch's error)."""
    if rounding_mode is _ABSENT:
        return apply(DIV, input, other)
    if rounding_mode not in ROUNDING_MODES:
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    return refuse_integer_zero_division(apply(DIV_ROUNDED, input, other, attrs=(rounding_mode,)), other)


@DIV.publish(Names(function=("true_divide",), method=("true_divide",), inplace=("true_divide_",), plain=True))
def true_divide(input, other):
    return apply(DIV, input, other)


def _infer_floor_divide(nodes):
    return _infer_rounded_division(nodes, "floor")


def _build_floor_divide(p, node, a, b):
    """Python's ``//`` (the floor of the quotient), whose gradient PyTorch refuses (Underivable)."""
    quotient = _rounded_quotient(p, node, a, b, "floor")
    return p.assign(Underivable(quotient, sp.Symbol("floor_divide")), node.shape, node.dtype.name, "floor_divide")


FLOOR_DIVIDE = register(Op("floor_divide", "NotImplemented", _infer_floor_divide, _build_floor_divide))


@FLOOR_DIVIDE.publish(Names(function=("floor_divide",), method=("floor_divide", "__floordiv__"),
                            reflected=("__rfloordiv__",), inplace=("floor_divide_", "__ifloordiv__")))
def floor_divide(input, other):
    return refuse_integer_zero_division(apply(FLOOR_DIVIDE, input, other), other)


def refuse_integer_zero_division(result, divisor):
    """``result``, unless it is an integer division (``//``, ``%``) by a zero somewhere in
    ``divisor``: PyTorch's error then (a float division gives inf or NaN)."""
    if not result.dtype.is_floating_point:
        divisor = engine.concrete_array(divisor._node) if hasattr(divisor, "_node") else divisor
        if divisor is not None and (jnp.asarray(divisor) == 0).any():
            raise RuntimeError("ZeroDivisionError")
    return result


@POW.publish(Names(function=("pow",), method=("pow", "__pow__"), reflected=("__rpow__",), inplace=("pow_", "__ipow__")))
def pow(input, exponent):
    return apply(POW, input, exponent)


@POW.publish(public_names("square"))
def square(input):
    return apply(POW, input, 2)


def _infer_comparison(nodes):
    return infer_elementwise(nodes)[0], dtypes.bool_


def _comparison(name, head, reference, alias=None):
    """``gt`` and its kin, each also under NumPy's long name (``greater``) where PyTorch has one."""
    op = register(Op(name, None, _infer_comparison,
                     lambda p, node, *xs: p.assign(head(*computed_operands(p, node, xs)), node.shape, "bool", name),
                     saves=False, reference=reference, torch_fn=lambda t, a, b: getattr(t, name)(a, b),
                     examples=BINARY[:3] + (Example(((4,), ()), scalars={1: 0}),), elementwise=True))
    op.publish(public_names(name, f"__{name}__"))(public_function(op, 2))
    if alias is not None:
        op.publish(public_names(alias))(public_function(op, 2))
    return op


GT = _comparison("gt", ir.greater, jnp.greater, "greater")
GE = _comparison("ge", ir.greater_equal, jnp.greater_equal, "greater_equal")
LT = _comparison("lt", ir.less, jnp.less, "less")
LE = _comparison("le", ir.less_equal, jnp.less_equal, "less_equal")
EQ = _comparison("eq", ir.equal, jnp.equal)
NE = _comparison("ne", ir.not_equal, jnp.not_equal, "not_equal")


def _infer_where(nodes):
    condition, a, b = nodes
    if condition.dtype is not dtypes.bool_:
        raise ValueError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                         f"{dtypes.torch_name(condition.dtype)}")
    shape = broadcast_shapes(condition.shape, a.shape, b.shape)
    return shape, infer_elementwise((a, b))[1]


WHERE = register(Op("where", "WhereBackward0", _infer_where,
                    lambda p, node, c, a, b: p.assign(ir.select(c, a, b), node.shape, node.dtype.name, "where"),
                    saves=False, reference=jnp.where, torch_fn=lambda t, c, a, b: t.where(c, a, b),
                    examples=(Example(((3, 4), (3, 4), (3, 4))), Example(((3, 4), (4,), ())),
                              Example(((2, 1), (1, 3), (2, 3)))),
                    domain=("bool", "real", "real"), elementwise=True))


@WHERE.publish(Names(function=("where",)))
def where(condition, input=None, other=None):
    """``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``, as PyTorch's."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() received an invalid combination of arguments: expected (condition) or "
                        "(condition, input, other)")
    return apply(WHERE, _condition(condition, stacklevel=4), input, other)  # (under out_argument's wrapper)


@WHERE.publish(Names(method=("where",)))
def _where_method(input, condition, other):
    """``input.where(condition, other)``: the tensor is the values taken where condition holds."""
    return apply(WHERE, _condition(condition, stacklevel=3), input, other)


def _condition(condition, stacklevel: int):
    """A uint8 condition: PyTorch's deprecated spelling of a bool one."""
    if isinstance(condition, Tensor) and condition.dtype is dtypes.uint8:
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and will be removed in a "
                      "future version of PyTorch. Use a boolean condition instead.", UserWarning, stacklevel=stacklevel)
        return condition != 0
    return condition


FILL = register(Op("fill", lambda nodes, value, name: name, lambda nodes, value, name: (nodes[0].shape, nodes[0].dtype),
                   lambda p, node, x: ieee.constant(node.attrs[0][0]), saves=False, elementwise=True))


def _keep_history_name(nodes):
    old = nodes[0]
    return old.op.backward_name(old.inputs, old.attrs)


# ``y.add_(1)`` under no_grad on a y that has history: y takes the new values, and its gradient
# is still y's (PyTorch does not record the update): exactly the new value (even where y is inf),
# with y's derivative (ir.rerouted).
KEEP_HISTORY = register(Op("keep_history", _keep_history_name, lambda nodes: (nodes[0].shape, nodes[0].dtype),
                           lambda p, node, old, new: p.assign(ir.rerouted(new, old), node.shape,
                                                              node.dtype.name, "updated"),
                           saves=False))
