"""``torch.nn.functional`` activations, one registry entry each: a SymPy form, from which SymPy
derives the gradient; at kinks the form's branches are PyTorch's (``select`` takes the branch
PyTorch's backward takes there: leaky_relu's slope at 0, hardswish's 0 at -3 and 1 at 3, the
shrinks' 0 at exactly lambd).  Activations that PyTorch itself composes (softsign, tanhshrink,
softmin) are compositions here too, so their ``grad_fn`` is PyTorch's."""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp
from sympy.codegen.cfunctions import expm1

from symgrad import dtypes, engine, ir, random
from symgrad.ir import ieee
from symgrad.ir.functions import prelu as prelu_head
from symgrad.inplace import apply_inplace
from symgrad.nodes import leaf
from symgrad.ops.dims import dim_index
from symgrad.ops.elementwise import DIV, SOFTPLUS, SUB, elementwise, refuse_bool, refuse_kernel, softplus_form
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply
from symgrad.uploads import from_host

KINKED = ("kinked",)
NOT_FLOAT = (dtypes.BOOLEAN, dtypes.INTEGER)  # PyTorch's activation kernels take floats only
WITH_PARAMETER = (Example(((3, 4), ()), scalars={1: 0.2}), Example(((7,), ()), scalars={1: 1.5}))
SHRINK = (Example(((3, 4), ()), scalars={1: 0.5}), Example(((7,), ()), scalars={1: 1.5}))  # the kinks' values
SQRT_HALF, SQRT_2_OVER_PI = 1 / math.sqrt(2), math.sqrt(2 / math.pi)


def _functional(name, inplace=False):
    return Names(functional=(name,), functional_inplace=inplace)


def _leaky(a, slope):
    """x above 0, else x times the slope (NaN takes the slope's side, as in PyTorch's backward)."""
    return ir.select(ir.greater(a, 0), a, a * slope)


def _shrunk(a, lambd, between, above, below):
    """``between`` where -lambd <= x <= lambd (no gradient), else ``above`` where x > lambd and
    ``below`` elsewhere (NaN too, which passes the gradient): PyTorch's scalar CPU loop.  Its
    vectorized loop, which computes most of a large tensor, differs at NaN and in the sign of
    softshrink's zeros (docs/api.md)."""
    inside = ir.greater_equal(a, -lambd) * ir.less_equal(a, lambd)
    return ir.select(inside, between, ir.select(ir.greater(a, lambd), above, below))


def _elu_like(a, negative, slope_at_zero):
    """``negative`` below 0, else ``a`` (NaN and +-0 too, whatever alpha is); the gradient of
    ``negative`` at 0 (``slope_at_zero``), but no second derivative there: PyTorch's kernel, its
    backward (``x <= 0``) and its double backward (``x < 0``) split there in turn."""
    at_zero = ir.select(ir.less_equal(a, 0), slope_at_zero * a, a)
    return ir.rerouted(ir.select(ir.less(a, 0), negative, a), ir.select(ir.less(a, 0), negative, at_zero))


LEAKY_RELU = elementwise("leaky_relu", "LeakyReluBackward0", _leaky,
                         reference=lambda a, s: jnp.where(a > 0, a, a * s),
                         torch_fn=lambda t, a, s: t.nn.functional.leaky_relu(a, s), examples=WITH_PARAMETER,
                         domain=("kinked", "real"), refuse=refuse_kernel("leaky_relu_cpu", *NOT_FLOAT))
ELU = elementwise("elu", "EluBackward0", lambda a, alpha: _elu_like(a, alpha * expm1(a), alpha),
                  float_result=True, reference=lambda a, alpha: jnp.where(a > 0, a, alpha * jnp.expm1(a)),
                  torch_fn=lambda t, a, alpha: t.nn.functional.elu(a, alpha), examples=WITH_PARAMETER,
                  domain=("kinked", "real"), refuse=refuse_kernel("elu_cpu", *NOT_FLOAT))
CELU = elementwise("celu", "CeluBackward0",
                   lambda a, alpha: _elu_like(a, alpha * expm1(a / alpha), ieee.unevaluated(lambda c: c / c, alpha)),
                   float_result=True,
                   reference=lambda a, alpha: jnp.where(a > 0, a, alpha * jnp.expm1(a / alpha)),
                   torch_fn=lambda t, a, alpha: t.nn.functional.celu(a, alpha), examples=WITH_PARAMETER,
                   domain=("kinked", "positive"), refuse=refuse_kernel("elu_cpu", *NOT_FLOAT))
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
SELU = elementwise("selu", "EluBackward0",
                   lambda a: SELU_SCALE * _elu_like(a, SELU_ALPHA * expm1(a), SELU_ALPHA),
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
    "softplus_scaled", "SoftplusBackward0", softplus_form,
    float_result=True, reference=lambda a, beta, t: jnp.where(a * beta > t, a, jnp.log1p(jnp.exp(a * beta)) / beta),
    torch_fn=lambda t, a, beta, threshold: t.nn.functional.softplus(a, beta, threshold),
    examples=(Example(((3, 4), (), ()), scalars={1: 2.0, 2: 1.0}), Example(((7,), (), ()), scalars={1: 0.5, 2: 20.0})),
    refuse=refuse_kernel("softplus_cpu", *NOT_FLOAT))

HARDSHRINK = elementwise("hardshrink", "HardshrinkBackward0", lambda a, lambd: _shrunk(a, lambd, 0, a, a),
                         reference=lambda a, lambd: jnp.where(jnp.abs(a) <= lambd, 0.0, a),
                         torch_fn=lambda t, a, lambd: t.nn.functional.hardshrink(a, lambd), examples=SHRINK,
                         domain=("kinked", "real"), refuse=refuse_kernel("hardshrink_cpu", *NOT_FLOAT))
SOFTSHRINK = elementwise(
    "softshrink", "SoftshrinkBackward0",
    lambda a, lambd: _shrunk(a, lambd, a * 0, a - lambd, a + lambd),
    reference=lambda a, lambd: jnp.where(jnp.abs(a) <= lambd, 0.0, a - jnp.sign(a) * lambd),
    torch_fn=lambda t, a, lambd: t.nn.functional.softshrink(a, lambd), examples=SHRINK, domain=("kinked", "real"),
    refuse=refuse_kernel("softshrink_check", *NOT_FLOAT))
THRESHOLD = elementwise("threshold", "ThresholdBackward0",
                        lambda a, threshold, value: ir.select(ir.less_equal(a, threshold), value, a),
                        reference=lambda a, threshold, value: jnp.where(a <= threshold, value, a),
                        torch_fn=lambda t, a, threshold, value: t.threshold(a, threshold, value),
                        examples=(Example(((3, 4), (), ()), scalars={1: 0.5, 2: -2.0}),
                                  Example(((7,), (), ()), scalars={1: -1.5, 2: 3.0})),
                        domain=("kinked", "real", "real"), refuse=refuse_kernel("threshold_cpu", dtypes.BOOLEAN))
RRELU = elementwise("rrelu", "RreluWithNoiseBackward0", _leaky,  # evaluation: the bounds' mean as the slope
                    reference=lambda a, slope: jnp.where(a > 0, a, a * slope),
                    torch_fn=lambda t, a, slope: t.nn.functional.rrelu(a, slope, slope), examples=WITH_PARAMETER,
                    domain=("kinked", "real"), refuse=refuse_kernel("leaky_relu_cpu", *NOT_FLOAT))
# Training: the slopes drawn (symgrad.random.rrelu_noise), 1 above 0; the gradient is noise * cotangent,
# PyTorch's.  Its noise is drawn from the input's values, so no generic example: test_nn_activations.py.
RRELU_WITH_NOISE = elementwise("rrelu_with_noise", "RreluWithNoiseBackward0", lambda a, noise: a * noise,
                               examples=(), refuse=refuse_kernel("rrelu_with_noise_out_cpu", *NOT_FLOAT))


def _in_place(op: Op, grad_fn: str) -> Op:
    """PyTorch's in-place twin of ``op`` (``threshold_``): the same values and gradient, its own
    backward node, which may keep other tensors (the result: symgrad.storage)."""
    return register(dataclasses.replace(op, name=f"{op.name}_", grad_fn=grad_fn, examples=(), public=[]))


THRESHOLD_IN_PLACE = _in_place(THRESHOLD, "ThresholdBackward1")
RRELU_IN_PLACE = _in_place(RRELU, "RreluWithNoiseBackward1")
RRELU_WITH_NOISE_IN_PLACE = _in_place(RRELU_WITH_NOISE, "RreluWithNoiseBackward1")


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
    """Clamped to ``[min_val, max_val]``; an integer tensor stays integer, its bounds cast to its
    type (truncated), as PyTorch's kernel casts them."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    cast = float if input.dtype.is_floating_point else int
    return _maybe_inplace(input, inplace, lambda: apply(HARDTANH, input, cast(min_val), cast(max_val)))


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


def _in_dtype(value, input):
    """A number argument as PyTorch's kernel reads it: in the input's dtype (an integer tensor's
    truncated; refused beyond the dtype's range).  Bool inputs, which these kernels refuse, keep it."""
    return value if input.dtype is dtypes.bool_ else dtypes.number_in(value, input.dtype)


@HARDSHRINK.publish(Names(function=("hardshrink",), functional=("hardshrink",), method=("hardshrink",)))
def hardshrink(input, lambd=0.5):
    return apply(HARDSHRINK, input, _in_dtype(lambd, input))


@SOFTSHRINK.publish(Names(functional=("softshrink",)))
def softshrink(input, lambd=0.5):
    if input.dtype.is_floating_point:
        largest = float(np.finfo(input.dtype.numpy).max)
        if not 0 <= lambd <= largest:
            raise RuntimeError(f"lambda must be in range [0, {largest:g}] for input dtype "
                               f"{dtypes.torch_name(input.dtype)}, but found {lambd:g}")
    return apply(SOFTSHRINK, input, _in_dtype(lambd, input))


@THRESHOLD.publish(Names(function=("threshold",), functional=("threshold",)))
def threshold(input, threshold, value, inplace=False):
    """``value`` where x <= threshold, else x."""
    if inplace:
        return threshold_(input, threshold, value)
    return _thresholded(THRESHOLD, input, threshold, value)


@THRESHOLD_IN_PLACE.publish(Names(function=("threshold_",), functional=("threshold_",)))
def threshold_(input, threshold, value):
    return apply_inplace(input, "threshold_", lambda: _thresholded(THRESHOLD_IN_PLACE, input, threshold, value))


def _thresholded(op, input, threshold, value):
    return apply(op, input, _in_dtype(threshold, input), _in_dtype(value, input))


def _along_channels(ndim: int, weight_shape) -> tuple:
    """The shape PyTorch's prelu gives the weight for an input of ``ndim`` dims: its values along dim 1."""
    shape = [1] * ndim
    if ndim > 1:
        shape[1] = math.prod(weight_shape)
    return tuple(shape)


def _build_prelu(p, node, x, weight):
    """PyTorch's kernel, x above 0 and else weight * x, with the weight reshaped inside the op (a
    reshape recorded outside would be a view that a later write to the weight does not reach)."""
    a, w = node.inputs
    shape = _along_channels(len(a.shape), w.shape)
    if w.shape != shape:
        weight = p.reshape(weight, shape)
    return p.assign(prelu_head(x, weight), node.shape, node.dtype.name, "prelu")


def _infer_prelu(nodes):
    refuse_kernel("prelu_cpu", *NOT_FLOAT)(nodes)
    return nodes[0].shape, nodes[0].dtype


PRELU = register(Op("prelu", "PreluKernelBackward0", _infer_prelu, _build_prelu,
                    reference=lambda a, w: jnp.where(a > 0, a, jnp.reshape(w, _along_channels(a.ndim, w.shape)) * a),
                    torch_fn=lambda t, a, weight: t.prelu(a, weight),
                    examples=(Example(((3, 4), (4,))), Example(((2, 3, 2), (3,))), Example(((5,), ())),
                              Example(((2, 3), (1,)))),
                    domain=("kinked", "real")))


@PRELU.publish(Names(function=("prelu",), functional=("prelu",), method=("prelu",)))
def prelu(input, weight):
    """One weight per channel (dim 1), or one for all (PyTorch's checks, in its order)."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"prelu(): argument 'weight' (position 2) must be Tensor, not {type(weight).__name__}")
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {dtypes.torch_name(input.dtype)} and "
                           f"{dtypes.torch_name(weight.dtype)}")
    if weight.numel() != 1:
        if input.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input.shape[1] if input.ndim > 1 else 1
        if channels != weight.numel():
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {channels}.")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    return apply(PRELU, input, weight)


def _infer_glu(nodes, dim):
    (x,) = nodes
    if x.shape[dim] % 2:
        raise ValueError(f"Halving dimension must be even, but dimension {dim} is size {x.shape[dim]}")
    refuse_kernel("glu_cpu", *NOT_FLOAT)(nodes)
    return (*x.shape[:dim], x.shape[dim] // 2, *x.shape[dim + 1:]), x.dtype


def _build_glu(p, node, x):
    """The first half of ``dim`` times the sigmoid of the second, as PyTorch's kernel computes it."""
    (dim,) = node.attrs
    shape = node.inputs[0].shape
    half = shape[dim] // 2
    halves = []
    for start in (0, half):
        spec = [(1, 0, n, 1) for n in shape]
        spec[dim] = (1, start, start + half, 1)
        halves.append(p.index(x, spec))
    return p.assign(ieee.unevaluated(lambda a, b: a * ir.sigmoid(b), *halves), node.shape, node.dtype.name, "glu")


GLU = register(Op("glu", "GluBackward0", _infer_glu, _build_glu,
                  reference=lambda x, dim: jax.nn.glu(x, axis=dim),
                  torch_fn=lambda t, x, dim: t.nn.functional.glu(x, dim),
                  examples=(Example(((4, 6),), (1,)), Example(((4, 6),), (0,)), Example(((2, 3, 4),), (2,)))))


@GLU.publish(Names(functional=("glu",)))
def glu(input, dim=-1):
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    return apply(GLU, input, attrs=(dim_index(dim, input.ndim),))


@RRELU.publish(Names(functional=("rrelu",)))
def rrelu_functional(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """``F.rrelu``: torch.rrelu's arguments, with ``inplace`` where torch.rrelu takes a generator."""
    return (rrelu_ if inplace else rrelu)(input, lower, upper, training)


@RRELU.publish(Names(function=("rrelu",)))
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _rrelu(input, lower, upper, training, generator, (RRELU, RRELU_WITH_NOISE))


@RRELU_IN_PLACE.publish(Names(function=("rrelu_",), functional=("rrelu_",)))
def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return apply_inplace(input, "rrelu_", lambda: _rrelu(input, lower, upper, training, generator,
                                                         (RRELU_IN_PLACE, RRELU_WITH_NOISE_IN_PLACE)))


def _rrelu(input, lower, upper, training, generator, ops):
    """In training each value at or below 0 is multiplied by its own slope, drawn uniformly in
    [lower, upper) from ``generator`` as PyTorch draws it; in evaluation by (lower + upper) / 2.
    ``ops``: the evaluation's and the training's."""
    for name, bound in (("lower", lower), ("upper", upper)):
        if not math.isfinite(bound):
            raise RuntimeError(f"rrelu: {name} bound must be finite, got {float(bound)}")
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    evaluation, with_noise = ops
    if not training:
        return apply(evaluation, input, _in_dtype((lower + upper) / 2, input))
    refuse_kernel("rrelu_with_noise_out_cpu", *NOT_FLOAT)((input._node,))
    lower, upper = _in_dtype(lower, input), _in_dtype(upper, input)
    values = engine.concrete_array(input._node)
    if values is None:
        raise RuntimeError("rrelu in training draws a slope for each value at or below 0: it needs the input's "
                           "values now, and a JAX trace does not have them")
    noise = random.rrelu_noise(generator or random.default_generator, np.asarray(values), input.dtype, lower, upper)
    return apply(with_noise, input, Tensor(leaf(from_host(noise), input.dtype)))
