"""``torch.nn.functional`` activations, one registry entry each: a SymPy form, from which SymPy
derives the gradient; at kinks the form's branches are PyTorch's (``select`` takes the branch
PyTorch's backward takes there: leaky_relu's slope at 0, hardswish's 0 at -3 and 1 at 3).
Activations that PyTorch itself composes (softsign, tanhshrink, softmin) are compositions here
too, so their ``grad_fn`` is PyTorch's."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import sympy as sp
from sympy.codegen.cfunctions import expm1

from symgrad import dtypes, ir
from symgrad.ir import ieee
from symgrad.inplace import apply_inplace
from symgrad.ops.elementwise import DIV, SOFTPLUS, SUB, elementwise, refuse_bool, refuse_kernel
from symgrad.ops.registry import Example, Names
from symgrad.tensor import apply

KINKED = ("kinked",)
NOT_FLOAT = (dtypes.BOOLEAN, dtypes.INTEGER)  # PyTorch's activation kernels take floats only
WITH_PARAMETER = (Example(((3, 4), ()), scalars={1: 0.2}), Example(((7,), ()), scalars={1: 1.5}))
SQRT_HALF, SQRT_2_OVER_PI = 1 / math.sqrt(2), math.sqrt(2 / math.pi)


def _functional(name, inplace=False):
    return Names(functional=(name,), functional_inplace=inplace)


def _elu_like(a, negative):
    """``negative`` at and below 0, else ``a``: NaN takes the positive side, as in PyTorch."""
    return ir.select(ir.less_equal(a, 0), negative, a)


LEAKY_RELU = elementwise("leaky_relu", "LeakyReluBackward0", lambda a, s: ir.select(ir.greater(a, 0), a, a * s),
                         reference=lambda a, s: jnp.where(a > 0, a, a * s),
                         torch_fn=lambda t, a, s: t.nn.functional.leaky_relu(a, s), examples=WITH_PARAMETER,
                         domain=("kinked", "real"), refuse=refuse_kernel("leaky_relu_cpu", *NOT_FLOAT))
ELU = elementwise("elu", "EluBackward0", lambda a, alpha: _elu_like(a, alpha * expm1(a)),
                  float_result=True, reference=lambda a, alpha: jnp.where(a > 0, a, alpha * jnp.expm1(a)),
                  torch_fn=lambda t, a, alpha: t.nn.functional.elu(a, alpha), examples=WITH_PARAMETER,
                  domain=("kinked", "real"), refuse=refuse_kernel("elu_cpu", *NOT_FLOAT))
CELU = elementwise("celu", "CeluBackward0",
                   lambda a, alpha: _elu_like(a, alpha * expm1(a / alpha)), float_result=True,
                   reference=lambda a, alpha: jnp.where(a > 0, a, alpha * jnp.expm1(a / alpha)),
                   torch_fn=lambda t, a, alpha: t.nn.functional.celu(a, alpha), examples=WITH_PARAMETER,
                   domain=("kinked", "positive"), refuse=refuse_kernel("elu_cpu", *NOT_FLOAT))
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
SELU = elementwise("selu", "EluBackward0",
                   lambda a: SELU_SCALE * _elu_like(a, SELU_ALPHA * expm1(a)),
                   float_result=True, reference=jax.nn.selu, torch_fn=lambda t, a: t.nn.functional.selu(a),
                   domain=KINKED, names=_functional("selu", inplace=True), refuse=refuse_kernel("elu_cpu", *NOT_FLOAT))
GELU = elementwise("gelu", "GeluBackward0", lambda a: a * (1 + sp.erf(a * SQRT_HALF)) / 2, float_result=True,
                   reference=lambda a: jax.nn.gelu(a, approximate=False),
                   torch_fn=lambda t, a: t.nn.functional.gelu(a), refuse=refuse_kernel("GeluKernelImpl", *NOT_FLOAT))
GELU_TANH = elementwise("gelu_tanh", "GeluBackward0",
                        lambda a: a * (1 + sp.tanh(SQRT_2_OVER_PI * (a + 0.044715 * a ** 3))) / 2, float_result=True,
                        reference=lambda a: jax.nn.gelu(a, approximate=True),
                        torch_fn=lambda t, a: t.nn.functional.gelu(a, approximate="tanh"),
                        refuse=refuse_kernel("GeluKernelImpl", *NOT_FLOAT))
MISH = elementwise("mish", "MishBackward0", lambda a: a * sp.tanh(ir.softplus(a)), float_result=True,
                   reference=lambda a: a * jnp.tanh(jax.nn.softplus(a)), torch_fn=lambda t, a: t.nn.functional.mish(a),
                   refuse=refuse_kernel("mish_cpu", *NOT_FLOAT), names=_functional("mish", inplace=True))
HARDTANH = elementwise("hardtanh", "HardtanhBackward0", ir.hardtanh, reference=lambda a, lo, hi: jnp.clip(a, lo, hi),
                       refuse=refuse_bool("Bool inputs not supported for hardtanh"),
                       torch_fn=lambda t, a, lo, hi: t.nn.functional.hardtanh(a, lo, hi), domain=("kinked", "real", "real"),
                       examples=(Example(((3, 4), (), ()), scalars={1: -1.0, 2: 1.0}),
                                 Example(((7,), (), ()), scalars={1: 0.0, 2: 0.5})))
SOFTPLUS_SCALED = elementwise(
    "softplus_scaled", "SoftplusBackward0",
    lambda a, beta, threshold: ir.select(ir.greater(ieee.mul(a, beta), threshold), a, ir.softplus_kernel(a, beta)),
    float_result=True, reference=lambda a, beta, t: jnp.where(a * beta > t, a, jnp.log1p(jnp.exp(a * beta)) / beta),
    torch_fn=lambda t, a, beta, threshold: t.nn.functional.softplus(a, beta, threshold),
    examples=(Example(((3, 4), (), ()), scalars={1: 2.0, 2: 1.0}), Example(((7,), (), ()), scalars={1: 0.5, 2: 20.0})),
    refuse=refuse_kernel("softplus_cpu", *NOT_FLOAT))


def _hardsigmoid(a):
    """x/6 + 1/2 strictly inside (-3, 3), 0 and 1 beyond; NaN stays NaN with a gradient of 0."""
    outside = ir.select(ir.less_equal(a, -3), 0, ir.select(ir.greater_equal(a, 3), 1, a - a))
    return ir.select(ir.greater(a, -3) * ir.less(a, 3), a / 6 + sp.Rational(1, 2), outside)


HARDSIGMOID = elementwise("hardsigmoid", "HardsigmoidBackward0", _hardsigmoid,
                          float_result=True, reference=lambda a: jnp.clip(a / 6 + 0.5, 0, 1),
                          torch_fn=lambda t, a: t.nn.functional.hardsigmoid(a), domain=KINKED,
                          refuse=refuse_kernel("hardsigmoid_cpu", *NOT_FLOAT),
                          names=_functional("hardsigmoid", inplace=True))
HARDSWISH = elementwise("hardswish", "HardswishBackward0", ir.hardswish, float_result=True,
                        reference=lambda a: a * jnp.clip(a + 3, 0, 6) / 6,
                        torch_fn=lambda t, a: t.nn.functional.hardswish(a), domain=KINKED,
                        refuse=refuse_kernel("hardswish_cpu", *NOT_FLOAT),
                        names=_functional("hardswish", inplace=True))


@LEAKY_RELU.publish(Names(functional=("leaky_relu",)))
def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _maybe_inplace(input, inplace, lambda: apply(LEAKY_RELU, input, float(negative_slope)))


@ELU.publish(Names(functional=("elu",)))
def elu(input, alpha=1.0, inplace=False):
    return _maybe_inplace(input, inplace, lambda: apply(ELU, input, float(alpha)))


@CELU.publish(Names(functional=("celu",)))
def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _maybe_inplace(input, inplace, lambda: apply(CELU, input, float(alpha)))


@GELU.publish(Names(functional=("gelu",)))
def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return apply(GELU if approximate == "none" else GELU_TANH, input)


@SOFTPLUS.publish(Names(function=("softplus",), functional=("softplus",)))
def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, and x itself where ``beta x > threshold`` (PyTorch's kernel)."""
    if beta == 1.0 and threshold == 20.0:
        return apply(SOFTPLUS, input)
    return apply(SOFTPLUS_SCALED, input, float(beta), float(threshold))


@HARDTANH.publish(Names(functional=("hardtanh",)))
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(input, inplace, lambda: apply(HARDTANH, input, float(min_val), float(max_val)))


@HARDTANH.publish(Names(functional=("relu6",)))
def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def _maybe_inplace(input, inplace, compute):
    """``inplace=True``: the result is written into ``input`` (as ``input.op_()`` would)."""
    return apply_inplace(input, "inplace activation", compute) if inplace else compute()


@DIV.publish(Names(functional=("softsign",)))
def softsign(input):
    """x / (1 + |x|), composed as PyTorch composes it (DivBackward0)."""
    return input / (1 + input.abs())


@SUB.publish(Names(functional=("tanhshrink",)))
def tanhshrink(input):
    """x - tanh(x), composed as PyTorch composes it (SubBackward0)."""
    return input - input.tanh()
