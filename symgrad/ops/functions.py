"""Elementwise functions beyond arithmetic, each one registry entry: special functions, rounding,
remainder, clamp, lerp and the fused multiply-adds.  SymPy derives every gradient from the form;
the heads whose derivative must be PyTorch's subgradient (rounding, clamp) carry it (symgrad.ir)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp
from sympy.codegen.cfunctions import exp2, expm1, log1p, log2, log10

from symgrad import dtypes, ir
from symgrad.ir import functions as ir_functions, ieee
from symgrad.ir.refused import Underivable, UnderivableInPlace
from symgrad.nodes import CONST
from symgrad.ops.elementwise import (BINARY, MUL, elementwise, infer_elementwise, public_names,
                                     refuse_integer_zero_division, refuse_kernel)
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply

POSITIVE = ("positive",)
ROUNDED = (Example(((3, 4),)), Example(((),)))

TAN = elementwise("tan", "TanBackward0", sp.tan, float_result=True, reference=jnp.tan,
                  torch_fn=lambda t, a: t.tan(a), names=public_names("tan"))
RSQRT = elementwise("rsqrt", "RsqrtBackward0", lambda a: 1 / sp.sqrt(a), float_result=True,
                    reference=lambda a: 1 / jnp.sqrt(a), torch_fn=lambda t, a: t.rsqrt(a), domain=POSITIVE,
                    names=public_names("rsqrt"))
RECIPROCAL = elementwise("reciprocal", "ReciprocalBackward0", lambda a: 1 / a, float_result=True,
                         reference=lambda a: 1 / a, torch_fn=lambda t, a: t.reciprocal(a), domain=POSITIVE,
                         names=public_names("reciprocal"))


@RECIPROCAL.publish(Names(method=("__rtruediv__",)))
def rdiv(input, other):
    """``number / x`` as PyTorch computes it, ``reciprocal(x) * number``: two roundings (the quotient
    rounded once differs by an ulp in about a quarter of float32 entries), ``MulBackward0``."""
    return apply(MUL, apply(RECIPROCAL, input), other)
LOG1P = elementwise("log1p", "Log1PBackward0", log1p, float_result=True, reference=jnp.log1p,
                    torch_fn=lambda t, a: t.log1p(a), domain=POSITIVE, names=public_names("log1p"))
EXPM1 = elementwise("expm1", "Expm1Backward0", expm1, float_result=True, reference=jnp.expm1,
                    torch_fn=lambda t, a: t.expm1(a), names=public_names("expm1"))
EXP2 = elementwise("exp2", "Exp2Backward0", exp2, float_result=True, reference=jnp.exp2,
                   torch_fn=lambda t, a: t.exp2(a), names=public_names("exp2"))
LOG2 = elementwise("log2", "Log2Backward0", log2, float_result=True, reference=jnp.log2,
                   torch_fn=lambda t, a: t.log2(a), domain=POSITIVE, names=public_names("log2"))
LOG10 = elementwise("log10", "Log10Backward0", log10, float_result=True, reference=jnp.log10,
                    torch_fn=lambda t, a: t.log10(a), domain=POSITIVE, names=public_names("log10"))
ERF = elementwise("erf", "ErfBackward0", sp.erf, float_result=True, reference=jax.scipy.special.erf,
                  torch_fn=lambda t, a: t.erf(a), names=public_names("erf"))


def _aliased(name, alias):
    """PyTorch's two spellings (``asin``, NumPy's ``arcsin``), each a function, method and in-place method."""
    return Names(function=(name, alias), method=(name, alias), inplace=(f"{name}_", f"{alias}_"))


UNIT = ("unit",)
ASIN = elementwise("asin", "AsinBackward0", sp.asin, float_result=True, reference=jnp.arcsin,
                   torch_fn=lambda t, a: t.asin(a), domain=UNIT, names=_aliased("asin", "arcsin"))
ACOS = elementwise("acos", "AcosBackward0", sp.acos, float_result=True, reference=jnp.arccos,
                   torch_fn=lambda t, a: t.acos(a), domain=UNIT, names=_aliased("acos", "arccos"))
ATAN = elementwise("atan", "AtanBackward0", sp.atan, float_result=True, reference=jnp.arctan,
                   torch_fn=lambda t, a: t.atan(a), names=_aliased("atan", "arctan"))
SINH = elementwise("sinh", "SinhBackward0", sp.sinh, float_result=True, reference=jnp.sinh,
                   torch_fn=lambda t, a: t.sinh(a), names=public_names("sinh"))
COSH = elementwise("cosh", "CoshBackward0", sp.cosh, float_result=True, reference=jnp.cosh,
                   torch_fn=lambda t, a: t.cosh(a), names=public_names("cosh"))


def _inverse_hyperbolic(name, alias, form, reference, domain=("real",)):
    """PyTorch records ``asinh_`` and its kin apart from ``asinh``, as AsinhBackward1, whose backward
    raises: the in-place spellings are an entry of their own, the same value with no derivative."""
    backward = f"{name.capitalize()}Backward"
    op = elementwise(name, f"{backward}0", form, float_result=True, reference=reference, domain=domain,
                     torch_fn=lambda t, a: getattr(t, name)(a),
                     names=Names(function=(name, alias), method=(name, alias)))

    def build(p, node, a):
        value = op.build(p, node, a)
        return p.assign(UnderivableInPlace(value, sp.Symbol(name)), node.shape, node.dtype.name, name)

    written = register(Op(f"{name}_", f"{backward}1", op.infer, build))
    written.publish(Names(inplace=(f"{name}_", f"{alias}_")))(lambda input: apply(written, input))
    return op, written


ASINH, ASINH_ = _inverse_hyperbolic("asinh", "arcsinh", sp.asinh, jnp.arcsinh)
ACOSH, ACOSH_ = _inverse_hyperbolic("acosh", "arccosh", ir_functions.acosh, jnp.arccosh, ("above_one",))
ATANH, ATANH_ = _inverse_hyperbolic("atanh", "arctanh", sp.atanh, jnp.arctanh, UNIT)
ATAN2 = elementwise("atan2", "Atan2Backward0", ir_functions.atan2, float_result=True, reference=jnp.arctan2,
                    torch_fn=lambda t, a, b: t.atan2(a, b), examples=BINARY[:4])


def _tensors_only(name, input, other):
    """PyTorch's binary functions that take no Python number on either side (atan2, hypot)."""
    for position, (role, value) in enumerate((("input", input), ("other", other))):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name}(): argument '{role}' (position {position + 1}) must be Tensor, "
                            f"not {type(value).__name__}")


@ATAN2.publish(_aliased("atan2", "arctan2"))
def atan2(input, other):
    _tensors_only("atan2", input, other)
    return apply(ATAN2, input, other)


def _refuse_non_float(kernel):
    """PyTorch's kernel runs on the promoted dtype and has loops for floats only."""
    def refuse(nodes):
        dtype = infer_elementwise(nodes)[1]
        if not dtype.is_floating_point:
            raise NotImplementedError(f'"{kernel}" not implemented for \'{dtypes.torch_name(dtype)}\'')
    return refuse


HYPOT = elementwise("hypot", "HypotBackward0", ir_functions.hypot, reference=jnp.hypot, examples=BINARY[:4],
                    refuse=_refuse_non_float("hypot_cpu"), torch_fn=lambda t, a, b: t.hypot(a, b))


@HYPOT.publish(public_names("hypot"))
def hypot(input, other):
    _tensors_only("hypot", input, other)
    return apply(HYPOT, input, other)


FMOD = elementwise("fmod", lambda nodes: "FmodBackward0" if nodes[1].op is CONST else "FmodBackward1",
                   ir_functions.fmod, reference=jnp.fmod, domain=("real", "nonzero"),
                   refuse=lambda nodes: _refuse_bool_kernel("fmod_cpu", nodes), torch_fn=lambda t, a, b: t.fmod(a, b),
                   examples=BINARY[:3] + (Example(((5,), ()), scalars={1: -1.5}),))


@FMOD.publish(public_names("fmod"))
def fmod(input, other):
    """C's remainder (the sign of input); an integer one by zero raises PyTorch's error."""
    return refuse_integer_zero_division(apply(FMOD, input, other), other)


COPYSIGN = elementwise("copysign", lambda nodes: "CopysignBackward1" if nodes[1].op is CONST else "CopysignBackward0",
                       ir_functions.copysign, float_result=True,
                       reference=jnp.copysign, torch_fn=lambda t, a, b: t.copysign(a, b), domain=("real", "nonzero"),
                       names=public_names("copysign"))


def _nan_ignoring(name, prefers):
    """``fmax``/``fmin``: ``input`` where it ``prefers`` over other or other is NaN (a tie goes to input,
    value and gradient, as PyTorch's), else ``other``: NaN only where both are."""
    op = elementwise(name, f"{name.capitalize()}Backward0",
                     lambda a, b: ir.select(ir.logical_or(prefers(a, b), ir.isnan(b)), a, b),
                     reference=getattr(jnp, name), torch_fn=lambda t, a, b: getattr(t, name)(a, b),
                     examples=BINARY[:4])

    @op.publish(Names(function=(name,), method=(name,)))
    def function(input, other):
        _tensors_only(name, input, other)
        return apply(op, input, other)

    function.__name__ = function.__qualname__ = name
    return op


FMAX = _nan_ignoring("fmax", ir.greater_equal)
FMIN = _nan_ignoring("fmin", ir.less_equal)


def _xlogy_name(nodes):
    x, y = nodes
    return "XlogyBackward1" if x.op is CONST else "XlogyBackward2" if y.op is CONST else "XlogyBackward0"


XLOGY = elementwise("xlogy", _xlogy_name, ir_functions.xlogy, float_result=True,
                    reference=jax.scipy.special.xlogy, torch_fn=lambda t, a, b: t.xlogy(a, b),
                    domain=("real", "positive"), examples=BINARY[:3] + (Example(((4,), ()), scalars={1: 2.5}),),
                    names=Names(function=("xlogy",), method=("xlogy",), inplace=("xlogy_",)))
XLOGY.reads_numbers = True  # its gradient's mask depends on a number y's value


SIGN = elementwise("sign", "SignBackward0", ir.sign, reference=jnp.sign, torch_fn=lambda t, a: t.sign(a),
                   examples=ROUNDED)
FLOOR = elementwise("floor", "FloorBackward0", ir.floor, reference=jnp.floor, torch_fn=lambda t, a: t.floor(a),
                    refuse=refuse_kernel("floor_vml_cpu", dtypes.BOOLEAN), examples=ROUNDED, names=public_names("floor"))
CEIL = elementwise("ceil", "CeilBackward0", ir.ceil, reference=jnp.ceil, torch_fn=lambda t, a: t.ceil(a),
                   refuse=refuse_kernel("ceil_vml_cpu", dtypes.BOOLEAN), examples=ROUNDED, names=public_names("ceil"))
ROUND = elementwise("round", "RoundBackward0", ir.rint, reference=jnp.round, torch_fn=lambda t, a: t.round(a),
                    refuse=refuse_kernel("round_vml_cpu", dtypes.BOOLEAN), examples=ROUNDED)
TRUNC = elementwise("trunc", "TruncBackward0", ir.trunc, reference=jnp.trunc, torch_fn=lambda t, a: t.trunc(a),
                    refuse=refuse_kernel("trunc_vml_cpu", dtypes.BOOLEAN), examples=ROUNDED, names=public_names("trunc"))
FRAC = elementwise("frac", "FracBackward0", lambda a: a - ir.trunc(a), reference=lambda a: a - jnp.trunc(a),
                   torch_fn=lambda t, a: t.frac(a), refuse=refuse_kernel("frac_cpu", dtypes.BOOLEAN, dtypes.INTEGER),
                   examples=ROUNDED, names=public_names("frac"))


def _scaled(x, decimals, rounded):
    """PyTorch's rounding to ``decimals``: ``rint(x * 10^d) / 10^d``, for negative d ``rint(x / 10^-d) * 10^-d``."""
    scale = 10.0 ** abs(decimals)
    return rounded(x * scale) / scale if decimals >= 0 else rounded(x / scale) * scale


def _infer_round_decimals(nodes, decimals):
    refuse_kernel("round_cpu", dtypes.BOOLEAN, dtypes.INTEGER)(nodes)
    return infer_elementwise(nodes)


ROUND_DECIMALS = register(Op(
    "round_decimals", "RoundBackward1", _infer_round_decimals,
    lambda p, node, a: p.assign(ieee.unevaluated(lambda x: _scaled(x, node.attrs[0], ir.rint), a), node.shape,
                                node.dtype.name, "round"),
    reference=lambda a, decimals: _scaled(a, decimals, jnp.round),
    torch_fn=lambda t, a, decimals: t.round(a, decimals=decimals),
    examples=(Example(((3, 4),), (1,)), Example(((5,),), (-1,)), Example(((),), (0,)))))


@ROUND.publish(public_names("round"))
def round(input, *, decimals=None):
    """``torch.round``: half to even; given ``decimals`` (even 0), PyTorch's scaled kernel (RoundBackward1)."""
    if decimals is None:
        return apply(ROUND, input)
    return apply(ROUND_DECIMALS, input, attrs=(int(decimals),))


@SIGN.publish(public_names("sign"))
def sign(input):
    """PyTorch's sign of a bool tensor is a copy of it (ir.sign subtracts two comparisons)."""
    return apply(SIGN, input) if input.dtype is not dtypes.bool_ else input.clone()


# examples=(): PyTorch's gradient here is a ZeroTensor, which the generic tests cannot read (tests/test_math_ops.py).
SGN = elementwise("sgn", "SgnBackward0", ir.sign, reference=jnp.sign, torch_fn=lambda t, a: t.sgn(a), examples=())


@SGN.publish(public_names("sgn"))
def sgn(input):
    """sign for real tensors (the complex sgn z/|z| is not symgrad's), recorded as SgnBackward0."""
    return apply(SGN, input) if input.dtype is not dtypes.bool_ else input.clone()


def _refuse_bool_kernel(kernel: str, nodes) -> None:
    """PyTorch's kernel runs on the common dtype: it is refused when every tensor is bool."""
    if all(n.dtype is dtypes.bool_ for n in nodes):
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')


def _remainder_name(nodes):
    return "RemainderBackward0" if nodes[1].op is CONST else "RemainderBackward1"


REMAINDER = elementwise("remainder", _remainder_name, ir.remainder, reference=jnp.remainder,
                        refuse=lambda nodes: _refuse_bool_kernel("remainder_cpu", nodes),
                        torch_fn=lambda t, a, b: t.remainder(a, b), domain=("real", "nonzero"),
                        examples=BINARY[:3] + (Example(((5,), ()), scalars={1: 1.5}),))


def _build_remainder_of_number(p, node, a, b):
    """A number's remainder by a tensor, whose derivative PyTorch does not implement (NotImplemented)."""
    value = REMAINDER.build(p, node, a, b)
    return p.assign(Underivable(value, sp.Symbol("remainder")), node.shape, node.dtype.name, "remainder")


REMAINDER_OF_NUMBER = register(Op("remainder_of_number", "NotImplemented", REMAINDER.infer, _build_remainder_of_number))


@REMAINDER.publish(Names(function=("remainder",), method=("remainder", "__mod__"), reflected=("__rmod__",),
                         inplace=("remainder_", "__imod__")))
def remainder(input, other):
    """An integer remainder by zero raises PyTorch's error (a float one is NaN)."""
    return refuse_integer_zero_division(apply(REMAINDER if isinstance(input, Tensor) else REMAINDER_OF_NUMBER,
                                              input, other), other)


@REMAINDER.publish(Names(function=("unravel_index",)))
def unravel_index(indices, shape) -> tuple:
    """The coordinates in ``shape`` of flat (row-major) indices, one int64 tensor per dim: each the
    floor quotient by the dims after it, modulo its own size (out-of-range indices wrap, as PyTorch's)."""
    if not isinstance(indices, Tensor):
        raise AttributeError(f"'{type(indices).__name__}' object has no attribute 'is_complex'")
    if not indices.dtype.is_integer:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    for size in shape:
        if not isinstance(size, int):
            raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(size)}")
    if [size for size in shape if size < 0]:
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    if 0 in shape:  # PyTorch's integer division by the zero size
        raise RuntimeError("ZeroDivisionError")
    flat, after = indices.to(dtypes.int64), math.prod(shape)
    coordinates = []
    for size in shape:
        after //= size
        coordinates.append(remainder(flat.div(after, rounding_mode="floor"), size))
    return tuple(coordinates)


def _clamp_name(nodes):
    return "ClampBackward1" if all(n.op is CONST for n in nodes[1:]) else "ClampBackward0"


def _absent(bound):
    """An infinite bound of the registry's examples is PyTorch's None."""
    return None if isinstance(bound, float) and math.isinf(bound) else bound


CLAMP = elementwise("clamp", _clamp_name, ir.clamp, reference=lambda x, lo, hi: jnp.minimum(jnp.maximum(x, lo), hi),
                    torch_fn=lambda t, x, lo, hi: t.clamp(x, _absent(lo), _absent(hi)),
                    domain=("real", "real", "real"),
                    examples=(Example(((3, 4), (), ()), scalars={1: -0.5, 2: 0.5}),
                              Example(((3, 4), (3, 4), (4,))), Example(((5,), (5,), ()), scalars={2: math.inf}),
                              Example(((5,), (), ()), scalars={1: -math.inf, 2: 0.25})))


@CLAMP.publish(Names(function=("clamp", "clip"), method=("clamp", "clip"), inplace=("clamp_", "clip_")))
def clamp(input, min=None, max=None):
    """``torch.clamp``: number or tensor bounds (not one of each); an absent bound is an infinity."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if sum(isinstance(b, Tensor) for b in (min, max)) == 1 and min is not None and max is not None:
        raise TypeError("clamp() received an invalid combination of arguments: bounds must be both tensors "
                        f"or both numbers, got {type(min).__name__} and {type(max).__name__}")
    lowest, highest = _absent_bounds(input.dtype)
    return apply(CLAMP, input, lowest if min is None else min, highest if max is None else max)


def _absent_bounds(dtype):
    """The bounds that clamp nothing: infinities for floats, the extremes of an integer (or bool's
    int64) dtype, which take no part in type promotion (an inf made an integer clamp float)."""
    if dtype.is_floating_point:
        return -math.inf, math.inf
    limits = np.iinfo(dtype.numpy if dtype.is_integer else np.int64)
    return int(limits.min), int(limits.max)


def _lerp_name(nodes):
    return "LerpBackward0" if nodes[2].op is CONST else "LerpBackward1"


def _lerp(a, b, w):
    """PyTorch's two-sided formula: exact at both ends (and NaN where its far side is inf - inf)."""
    return ir.select(ir.less(sp.Abs(w), sp.Rational(1, 2)), a + w * (b - a), b - (b - a) * (1 - w))


def _refuse_lerp_dtypes(nodes):
    start = nodes[0]
    if not start.dtype.is_floating_point:  # PyTorch's kernels interpolate floats only
        kernel = "lerp_kernel_scalar" if nodes[2].op is CONST else "lerp_kernel_tensor"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{dtypes.torch_name(start.dtype)}\'')
    for node, role in zip(nodes[1:], ("end", "weight")):
        if node.op is not CONST and node.dtype is not start.dtype and (role == "end" or node.shape):
            # a 0-d weight is taken as a number, whatever its dtype (PyTorch's)
            raise RuntimeError(f"expected dtype {dtypes.torch_name(start.dtype).lower()} for `{role}` but got "
                               f"dtype {dtypes.torch_name(node.dtype).lower()}")


LERP = elementwise("lerp", _lerp_name, _lerp, reference=lambda a, b, w: jnp.where(jnp.abs(w) < 0.5, a + w * (b - a),
                                                                                 b - (b - a) * (1 - w)),
                   torch_fn=lambda t, a, b, w: t.lerp(a, b, w), domain=("real", "real", "unit"),
                   examples=(Example(((3, 4), (3, 4), ()), scalars={2: 0.3}), Example(((3, 4), (4,), (3, 4)))),
                   names=public_names("lerp"), refuse=_refuse_lerp_dtypes)


def _fused(name, grad_fn, form, refuse=None):
    """``input + form(value * tensor1, tensor2)``, ``value`` a number (PyTorch's addcmul, addcdiv, whose
    kernels scale tensor1 first: 0 * 1e30 * 1e30 is 0 there, not 0 * inf)."""
    op = elementwise(name, grad_fn, lambda a, b, c, v: a + form(v * b, c), reference=lambda a, b, c, v: a + form(v * b, c),
                     torch_fn=lambda t, a, b, c, v: getattr(t, name)(a, b, c, value=v), refuse=refuse,
                     domain=("real", "real", "nonzero", "real"),
                     examples=(Example(((3, 4), (3, 4), (3, 4), ()), scalars={3: 0.5}),
                               Example(((3, 4), (4,), (3, 1), ()), scalars={3: -2.0})))

    @op.publish(Names(function=(name,), method=(name,), inplace=(f"{name}_",)))
    def function(input, tensor1, tensor2, *, value=1):
        if not any(isinstance(t, Tensor) and t.dtype.is_floating_point for t in (input, tensor1, tensor2)):
            value = int(value)  # PyTorch casts the factor to an integer result's type (truncated)
        return apply(op, input, tensor1, tensor2, value)

    function.__name__ = function.__qualname__ = name
    return op


ADDCMUL = _fused("addcmul", "AddcmulBackward0", lambda b, c: b * c,
                 lambda nodes: _refuse_bool_kernel("addcmul_cpu_out", nodes[:3]))
INTEGER_ADDCDIV = ("Integer division with addcdiv is no longer supported, and in a future  release addcdiv will "
                   "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
                   "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                   "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the "
                   "latter implementation: (input + value * tensor1 / tensor2), for all dtypes.")


def _refuse_integer_division(nodes):
    if not nodes[1].dtype.is_floating_point and not nodes[2].dtype.is_floating_point:
        raise RuntimeError(INTEGER_ADDCDIV)


ADDCDIV = _fused("addcdiv", "AddcdivBackward0", lambda b, c: b / c, _refuse_integer_division)
