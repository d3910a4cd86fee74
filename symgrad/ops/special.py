"""Special functions (``torch.lgamma``, ``torch.erfinv``, ``torch.special.*``) and the elementwise
odds and ends PyTorch users reach for beside them: nan_to_num, logit, logaddexp, deg2rad, ldexp,
frexp, heaviside, float_power, and the other spellings of neg, trunc and abs.

Each op is one registry entry whose form is a head of symgrad.ir.special (its value PyTorch's
kernel, its derivative PyTorch's backward) or a composition of registered ops; integer and bool
inputs give the default float, as PyTorch's special functions do.
"""
from __future__ import annotations

import math
import operator

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes, ir
from symgrad.ir import ieee
from symgrad.ir import special as S
from symgrad.ir.refused import Underivable
from symgrad.nodes import CONST
from symgrad.ops.elementwise import ABS, NEG, POW, elementwise, infer_elementwise, public_function, public_names
from symgrad.ops.elementwise import pow as power
from symgrad.ops.functions import TRUNC, _refuse_non_float, _tensors_only
from symgrad.ops.linalg import return_type
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.ops.shape import to_dtype
from symgrad.tensor import Tensor, apply

JSP = jax.scipy.special
ONE = (Example(((3, 4),)),)  # the generic tests' example of a unary special function
TWO = (Example(((3, 4), (4,))),)


def _special(name, grad_fn, head, reference, domain=None, torch_fn=None, examples=ONE, refuse=None, saves=True):
    """An elementwise special function: ``head`` on the inputs made float.  (What PyTorch's backward
    keeps beyond its inputs is symgrad.storage's: the result, for some.)"""
    return elementwise(name, grad_fn, head, float_result=True, reference=reference, domain=domain, saves=saves,
                       torch_fn=torch_fn or (lambda t, *xs: getattr(t, name)(*xs)), examples=examples, refuse=refuse)


def _torch_function(op):
    """``torch.<op>(input)``, also a method and an in-place method."""
    return op.publish(public_names(op.name))(public_function(op, 1))


def _special_only(name, grad_fn, head, reference, domain=None):
    """A unary function of ``torch.special`` alone (symgrad.special names it): the op and the function."""
    op = _special(f"special_{name}", grad_fn, head, reference, domain,
                  torch_fn=lambda t, *xs: getattr(t.special, name)(*xs))

    @op.publish(Names())
    def function(input):
        return apply(op, input)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``torch.special.{name}``: recorded as {grad_fn}."
    return op, function


def _float_inputs(p, node, xs):
    """Integer and bool inputs cast to the op's float dtype, as PyTorch's special functions take them."""
    return [x if i.dtype.is_floating_point else p.astype(x, node.dtype.name) for x, i in zip(xs, node.inputs)]


def _infer_float(nodes, *attrs):
    return infer_elementwise(nodes, float_result=True)


POSITIVE, UNIT = ("positive",), ("unit",)

# ------------------------------------------------------------------------ gamma and polygamma

LGAMMA = _special("lgamma", "LgammaBackward0", S.lgamma, JSP.gammaln, POSITIVE)
lgamma = _torch_function(LGAMMA)
DIGAMMA = _special("digamma", "DigammaBackward0", S.digamma, JSP.digamma, POSITIVE)
digamma = _torch_function(DIGAMMA)


def _build_polygamma(p, node, x):
    (x,) = _float_inputs(p, node, (x,))
    n = node.attrs[0]
    return p.assign(ieee.unevaluated(lambda x: S.polygamma(n, x), x), node.shape, node.dtype.name, "polygamma")


def _polygamma_name(nodes, n, in_place=False):
    return "PolygammaBackward1" if in_place else "PolygammaBackward0"  # PyTorch's polygamma_ has an entry of its own


POLYGAMMA = register(Op("polygamma", _polygamma_name, _infer_float, _build_polygamma, elementwise=True,
                        reference=lambda x, n: JSP.polygamma(n, x), torch_fn=lambda t, x, n: t.polygamma(n, x),
                        domain=POSITIVE, examples=(Example(((3, 4),), (3,)),)))


def _order(n) -> int:
    n = operator.index(n)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return n


@POLYGAMMA.publish(Names(function=("polygamma",)))
def polygamma(n, input):
    """``torch.polygamma(n, input)``: the n-th derivative of digamma (n = 0: digamma itself)."""
    return apply(POLYGAMMA, input, attrs=(_order(n),))


@POLYGAMMA.publish(Names(method=("polygamma",)))
def _polygamma_method(input, n):
    """``input.polygamma(n)``: the tensor first, as PyTorch's method takes it."""
    return polygamma(n, input)


@POLYGAMMA.publish(Names(inplace=("polygamma_",)))
def _polygamma_in_place(input, n):
    return apply(POLYGAMMA, input, attrs=(_order(n), True))


def _build_mvlgamma(p, node, x):
    """PyTorch's sum of lgamma(x + o) for o = -(p-1)/2, ..., -1/2, 0 (0.0 + x is +0.0 at -0.0), plus
    p (p-1) log(pi) / 4."""
    (x,) = _float_inputs(p, node, (x,))
    dims = node.attrs[0]
    offsets = [-(dims - 1 - j) / 2 for j in range(dims)]
    constant = dims * (dims - 1) * math.log(math.pi) / 4

    def form(x):
        return ieee.add(*[S.lgamma(ieee.add(x, ieee.constant(o)) if o else S.plus_zero(x)) for o in offsets],
                        sp.Float(constant))
    return p.assign(ieee.unevaluated(form, x), node.shape, node.dtype.name, "mvlgamma")


MVLGAMMA = register(Op("mvlgamma", "MvlgammaBackward0", _infer_float, _build_mvlgamma, elementwise=True,
                       reference=lambda x, p: JSP.multigammaln(x, p), torch_fn=lambda t, x, p: t.mvlgamma(x, p),
                       domain=("above_one",), examples=(Example(((3, 4),), (3,)),)))


@MVLGAMMA.publish(Names(function=("mvlgamma",), method=("mvlgamma",), inplace=("mvlgamma_",)))
def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension ``p`` (PyTorch checks p, not the domain:
    below (p - 1) / 2 it is inf or NaN)."""
    p = operator.index(p)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if input.dtype is dtypes.bool_:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    return apply(MVLGAMMA, input, attrs=(p,))


# ------------------------------------------------------------------------------ error functions

ERFC = _special("erfc", "ErfcBackward0", S.erfc, JSP.erfc)
erfc = _torch_function(ERFC)
ERFINV = _special("erfinv", "ErfinvBackward0", S.erfinv, JSP.erfinv, UNIT)
erfinv = _torch_function(ERFINV)
ERFCX, erfcx = _special_only("erfcx", "SpecialErfcxBackward0", S.erfcx, lambda x: jnp.exp(x * x) * JSP.erfc(x))
NDTRI, ndtri = _special_only("ndtri", "SpecialNdtriBackward0", S.ndtri, JSP.ndtri, UNIT)
LOG_NDTR, log_ndtr = _special_only("log_ndtr", "SpecialLogNdtrBackward0", S.log_ndtr, JSP.log_ndtr)

# ---------------------------------------------------------------------- modified Bessel functions

I0 = _special("i0", "I0Backward0", S.i0, JSP.i0)
i0 = _torch_function(I0)
I0E, i0e = _special_only("i0e", "SpecialI0EBackward0", S.i0e, JSP.i0e)
I1, i1 = _special_only("i1", "SpecialI1Backward0", S.i1, JSP.i1)
I1E, i1e = _special_only("i1e", "SpecialI1EBackward0", S.i1e, JSP.i1e)

# --------------------------------------------------------------------- entropy, sinc, xlog1py, zeta

ENTR, entr = _special_only("entr", "SpecialEntrBackward0", S.entr, JSP.entr, POSITIVE)
SINC = _special("sinc", "SincBackward0", S.sinc, jnp.sinc)
sinc = _torch_function(SINC)


def _scalar_variant(name):
    """PyTorch's backward node of a binary special function: 0 for two tensors, 1 for a number
    first, 2 for a number second."""
    return lambda nodes: f"{name}{1 if nodes[0].op is CONST else 2 if nodes[1].op is CONST else 0}"


def _build_xlog1py(p, node, x, y):
    head = S.xlog1py_of_number if node.inputs[1].op is CONST else S.xlog1py
    return p.assign(ieee.unevaluated(head, *_float_inputs(p, node, (x, y))), node.shape, node.dtype.name, "xlog1py")


XLOG1PY = register(Op("special_xlog1py", _scalar_variant("SpecialXlog1PyBackward"), _infer_float, _build_xlog1py,
                      elementwise=True, reference=JSP.xlog1py, domain=("real", "positive"), examples=TWO,
                      torch_fn=lambda t, a, b: t.special.xlog1py(a, b)))
ZETA = _special("special_zeta", _scalar_variant("SpecialZetaBackward"), S.zeta, JSP.zeta, ("above_one", "positive"),
                torch_fn=lambda t, x, q: t.special.zeta(x, q), examples=(Example(((), (3, 4)), scalars={0: 2.5}),))


@XLOG1PY.publish(Names())
def xlog1py(input, other):
    """``torch.special.xlog1py``: x log1p(y), 0 where x is 0 (unless y is NaN)."""
    return apply(XLOG1PY, input, other)


@ZETA.publish(Names())
def zeta(input, other):
    """``torch.special.zeta``: the Hurwitz zeta function zeta(x, q), differentiable in q only."""
    return apply(ZETA, input, other)


# ------------------------------------------------------------------------------------- logit


def _build_logit(p, node, x):
    (x,) = _float_inputs(p, node, (x,))
    eps = node.attrs[0]
    if eps is None or eps < 0:  # PyTorch's eps of None
        form = S.logit
    else:  # the bounds as PyTorch's kernel holds them: eps and 1 - eps in the tensor's dtype
        lo = node.dtype.numpy.type(eps)
        hi = node.dtype.numpy.type(1) - lo
        form = lambda x: S.logit_clamped(x, sp.Float(float(lo)), sp.Float(float(hi)))  # noqa: E731
    return p.assign(ieee.unevaluated(form, x), node.shape, node.dtype.name, "logit")


LOGIT = register(Op("logit", "LogitBackward0", _infer_float, _build_logit, elementwise=True, domain=UNIT,
                    reference=lambda x, eps: JSP.logit(x if eps is None else jnp.clip(x, eps, 1 - eps)),
                    torch_fn=lambda t, x, eps: t.logit(x, eps),
                    examples=(Example(((3, 4),), (None,)), Example(((5,),), (0.25,)))))


@LOGIT.publish(Names(function=("logit",), method=("logit",), inplace=("logit_",)))
def logit(input, eps=None):
    """log(x / (1 - x)), with ``eps`` of x clamped to [eps, 1 - eps] first (its gradient 0 outside)."""
    return apply(LOGIT, input, attrs=(None if eps is None else float(eps),))


# ------------------------------------------------------------------------------------ logaddexp

LOGADDEXP = _special("logaddexp", "LogaddexpBackward0", S.logaddexp, jnp.logaddexp, examples=TWO,
                     refuse=_refuse_non_float("logaddexp_cpu"))
LOGADDEXP2 = _special("logaddexp2", "Logaddexp2Backward0", S.logaddexp2, jnp.logaddexp2, examples=TWO,
                      refuse=_refuse_non_float("logaddexp2_cpu"))


@LOGADDEXP.publish(Names(function=("logaddexp",), method=("logaddexp",)))
def logaddexp(input, other):
    _tensors_only("logaddexp", input, other)
    return apply(LOGADDEXP, input, other)


@LOGADDEXP2.publish(Names(function=("logaddexp2",), method=("logaddexp2",)))
def logaddexp2(input, other):
    _tensors_only("logaddexp2", input, other)
    return apply(LOGADDEXP2, input, other)


# ---------------------------------------------------------------- angles, ldexp, frexp, float_power

DEG2RAD = _special("deg2rad", "Deg2RadBackward0", lambda a: a * (math.pi / 180), jnp.deg2rad, saves=False)
deg2rad = _torch_function(DEG2RAD)
RAD2DEG = _special("rad2deg", "Rad2DegBackward0", lambda a: a * (180 / math.pi), jnp.rad2deg, saves=False)
rad2deg = _torch_function(RAD2DEG)


def _infer_ldexp(nodes):
    if nodes[1].dtype is dtypes.bool_:
        raise NotImplementedError("\"ldexp_cpu_exp\" not implemented for 'Bool'")
    return infer_elementwise(nodes, float_result=True)


def _build_ldexp(p, node, x, exponent):
    """x 2^e in the result's dtype: an integer e exactly (S.ldexp, with PyTorch's integer gradient),
    a float one through pow(2, e)."""
    x = p.astype(x, node.dtype.name)
    if node.inputs[1].dtype.is_integer:
        return p.assign(ieee.unevaluated(S.ldexp, x, exponent), node.shape, node.dtype.name, "ldexp")
    exponent = p.astype(exponent, node.dtype.name)
    return p.assign(ieee.unevaluated(lambda x, e: x * sp.Pow(2, e), x, exponent), node.shape, node.dtype.name, "ldexp")


LDEXP = register(Op("ldexp", "LdexpBackward0", _infer_ldexp, _build_ldexp, elementwise=True,
                    reference=lambda x, e: x * 2.0 ** e, torch_fn=lambda t, x, e: t.ldexp(x, e), examples=TWO,
                    domain=("real", "real")))


@LDEXP.publish(public_names("ldexp"))
def ldexp(input, other):
    """input * 2^other, a float."""
    _tensors_only("ldexp", input, other)
    return apply(LDEXP, input, other)


def _infer_frexp(nodes, part):
    return nodes[0].shape, nodes[0].dtype if part == "mantissa" else dtypes.int32


def _build_frexp(p, node, x):
    head = S.frexp_mantissa if node.attrs[0] == "mantissa" else S.frexp_exponent
    return p.assign(ieee.unevaluated(head, x), node.shape, node.dtype.name, f"frexp_{node.attrs[0]}")


FREXP = register(Op("frexp", "FrexpBackward0", _infer_frexp, _build_frexp, elementwise=True))
FrexpReturn = return_type("frexp", ("mantissa", "exponent"))


@FREXP.publish(Names(function=("frexp",), method=("frexp",)))
def frexp(input):
    """``input = mantissa * 2 ** exponent``, |mantissa| in [0.5, 1) (an int32 exponent)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return FrexpReturn(apply(FREXP, input, attrs=("mantissa",)), apply(FREXP, input, attrs=("exponent",)))


def _as_double(value):
    return to_dtype(value, dtypes.float64) if isinstance(value, Tensor) else float(value)


@POW.publish(Names(function=("float_power",), method=("float_power",)))
def float_power(input, exponent):
    """pow computed in float64 whatever the inputs' dtypes (PyTorch's PowBackward nodes after a cast)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"float_power() received an invalid combination of arguments - got "
                        f"({type(input).__name__}, {type(exponent).__name__})")
    return power(_as_double(input), _as_double(exponent))


@POW.publish(Names(inplace=("float_power_",)))
def _float_power_in_place(input, exponent):
    if input.dtype is not dtypes.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {dtypes.torch_name(input.dtype)} but the "
                           f"operation's result requires dtype Double")
    return float_power(input, exponent)


# ------------------------------------------------------------------------------ nan_to_num


def _build_nan_to_num(p, node, x):
    """Integers and bools have nothing to replace (the same values); a float's absent bounds are
    its dtype's largest finite numbers."""
    if not node.dtype.is_floating_point:
        return x
    nan, posinf, neginf = node.attrs
    info = np.finfo(node.dtype.numpy)
    values = [ieee.constant(float(v)) for v in (nan, info.max if posinf is None else posinf,
                                                info.min if neginf is None else neginf)]
    return p.assign(ieee.unevaluated(S.nan_to_num, x, *values), node.shape, node.dtype.name, "nan_to_num")


NAN_TO_NUM = register(Op("nan_to_num", "NanToNumBackward0", lambda nodes, *attrs: (nodes[0].shape, nodes[0].dtype),
                         _build_nan_to_num, elementwise=True,
                         reference=lambda x, nan, posinf, neginf: jnp.nan_to_num(x, nan=nan, posinf=posinf,
                                                                                 neginf=neginf),
                         torch_fn=lambda t, x, *attrs: t.nan_to_num(x, *attrs),
                         examples=(Example(((3, 4),), (0.0, None, None)),)))


@NAN_TO_NUM.publish(Names(function=("nan_to_num",), method=("nan_to_num",), inplace=("nan_to_num_",)))
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and the dtype's
    largest finite numbers); the gradient is zero where a value was replaced."""
    return apply(NAN_TO_NUM, input, attrs=tuple(None if v is None else float(v) for v in (nan, posinf, neginf)))


# ------------------------------------------------------------------------------ heaviside


def _infer_heaviside(nodes):
    x, values = nodes
    if x.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return infer_elementwise(nodes)


def _build_heaviside(p, node, x, values):
    """PyTorch's kernel: values where x is 0, else whether x > 0 (0 at NaN); no derivative."""
    step = ir.select(ir.equal(x, 0), values, ir.select(ir.greater(x, 0), sp.S.One, sp.S.Zero))
    value = p.assign(step, node.shape, node.dtype.name, "heaviside")
    return p.assign(Underivable(value, sp.Symbol("heaviside")), node.shape, node.dtype.name, "heaviside")


HEAVISIDE = register(Op("heaviside", "NotImplemented", _infer_heaviside, _build_heaviside, saves=False))


@HEAVISIDE.publish(Names(function=("heaviside",), method=("heaviside",), inplace=("heaviside_",)))
def heaviside(input, values):
    if not isinstance(values, Tensor):
        raise TypeError(f"heaviside(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    return apply(HEAVISIDE, input, values)


# ------------------------------------------------------------------- other spellings, positive


@NEG.publish(public_names("negative"))
def negative(input):
    return apply(NEG, input)


@TRUNC.publish(public_names("fix"))
def fix(input):
    return apply(TRUNC, input)


@ABS.publish(public_names("absolute"))
def absolute(input):
    return apply(ABS, input)


def positive(input):
    """``torch.positive`` and unary ``+``: the tensor itself (refused for bool, as PyTorch does)."""
    if input.dtype is dtypes.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input
