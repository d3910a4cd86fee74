"""Reductions: sum, mean, prod, max and min (of a whole tensor, amax/amin, with indices),
argmax/argmin, var/std, norms, any/all/count_nonzero.

A reduction over several axes has attributes ``(axes, keepdim, grad_fn)``: the axes are always
explicit, and the name of PyTorch's backward node records how it was called (``x.sum()`` is
``SumBackward0``; ``x.sum(dim)``, even ``dim=()``, is ``SumBackward1``).  An op PyTorch returns
two tensors from (``max(x, dim)``) is two ops, values and indices, recorded side by side.
"""
from __future__ import annotations

import collections
import math

import jax
import jax.numpy as jnp
import sympy as sp

from symgrad import dtypes, ir
from symgrad.ir import ieee, reduced_shape
from symgrad.ops.dims import dim_index, normalize_dims
from symgrad.ops.elementwise import MAXIMUM, MINIMUM
from symgrad.ops.linalg import svdvals
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply


def return_type(name: str):
    """PyTorch's ``torch.return_types.<name>``: a (values, indices) tuple that prints as PyTorch's."""
    pair = collections.namedtuple(name, ("values", "indices"))
    pair.__repr__ = lambda self: f"torch.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"
    return pair


MaxReturn, MinReturn = return_type("max"), return_type("min")


def _reduction_attrs(input, dim, keepdim: bool, called_with_dim: str, called_without: str):
    axes = normalize_dims(dim, input.ndim, empty_means_all=True)
    name = called_without if axes is None and not keepdim else called_with_dim
    return (tuple(range(input.ndim)) if axes is None else axes), bool(keepdim), name


def _nonempty(input, name: str, axes, dim_given: bool = True):
    """PyTorch's refusal to reduce an empty dimension with no identity (max, min, argmax ...);
    without a ``dim`` argument its words differ."""
    if input.numel() == 0 and not dim_given:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    for axis in axes:
        if input.shape[axis] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")


def _infer(kind):
    def infer(nodes, axes, keepdim, name):
        (x,) = nodes
        dtype = x.dtype
        if kind == "sum" and not dtype.is_floating_point:
            dtype = dtypes.int64
        if kind == "logsumexp" and not dtype.is_floating_point:  # PyTorch computes it in floats
            dtype = dtypes.float32
        if kind == "mean" and not dtype.is_floating_point:
            raise ValueError(f"{kind}(): could not infer output dtype. Input dtype must be either a floating "
                             f"point or complex dtype. Got: {dtype.name.capitalize()}")
        if kind in ("max", "min") and name == f"{kind.capitalize()}Backward1" and 0 in x.shape:
            raise ValueError(f"{kind}(): Expected reduction dim to be specified for input.numel() == 0. "
                             "Specify the reduction dim with the 'dim' argument.")
        return reduced_shape(x.shape, axes, keepdim), dtype
    return infer


def _build_sum(p, node, x):
    axes, keepdim, _ = node.attrs
    return p.reduce_sum(p.astype(x, node.dtype.name), axes, keepdim, shape=node.inputs[0].shape)


def _build_mean(p, node, x):
    axes, keepdim, _ = node.attrs
    shape = node.inputs[0].shape
    total = p.reduce_sum(x, axes, keepdim, shape=shape)
    return p.assign(total / math.prod(shape[a] for a in axes), node.shape, node.dtype.name, "mean")


def _examples(backward0: str, backward1: str):
    return (Example(((3, 4),), ((0, 1), False, backward0)), Example(((3, 4),), ((1,), False, backward1)),
            Example(((2, 3, 4),), ((0, 2), True, backward1)), Example(((5,),), ((0,), False, backward1)))


def _reference(fn):
    return lambda x, axes, keepdim, name: fn(x, axis=axes, keepdims=keepdim)


def _torch(method):
    def call(t, x, axes, keepdim, name):
        return getattr(x, method)() if name.endswith("0") and method != "amax" else getattr(x, method)(axes, keepdim)
    return call


SUM = register(Op("sum", lambda nodes, axes, keepdim, name: name, _infer("sum"), _build_sum, saves=False,
                  reference=_reference(jnp.sum), torch_fn=_torch("sum"),
                  examples=_examples("SumBackward0", "SumBackward1")))
MEAN = register(Op("mean", lambda nodes, axes, keepdim, name: name, _infer("mean"), _build_mean, saves=False,
                   reference=_reference(jnp.mean), torch_fn=_torch("mean"),
                   examples=_examples("MeanBackward0", "MeanBackward1")))
LOGSUMEXP = register(Op("logsumexp", lambda nodes, axes, keepdim, name: name, _infer("logsumexp"),
                        lambda p, node, x: p.logsumexp(p.astype(x, node.dtype.name), node.attrs[0], node.attrs[1]),
                        reference=lambda x, axes, keepdim, name: jax.nn.logsumexp(x, axis=axes, keepdims=keepdim),
                        torch_fn=lambda t, x, axes, keepdim, name: t.logsumexp(x, axes, keepdim),
                        examples=_examples("LogsumexpBackward0", "LogsumexpBackward0")[1:]))


def _extreme(name: str, smallest: bool):
    """max or min over axes: ``x.max()`` (``MaxBackward1``: the gradient shared among the entries
    equal to the result) or ``amax`` (``AmaxBackward0``: PyTorch's other rule, ir.ReduceMax)."""
    whole, every = f"{name.capitalize()}Backward1", f"A{name}Backward0"
    return register(Op(name, lambda nodes, axes, keepdim, grad_fn: grad_fn, _infer(name),
                       lambda p, node, x: p.reduce_max(x, node.attrs[0], node.attrs[1], node.attrs[2] == whole,
                                                       smallest),
                       reference=_reference(jnp.min if smallest else jnp.max),
                       torch_fn=lambda t, x, axes, keepdim, grad_fn: (getattr(x, name)() if grad_fn == whole else
                                                                      getattr(x, f"a{name}")(axes, keepdim)),
                       examples=_examples(whole, every), domain=("ties",)))


MAX, MIN = _extreme("max", False), _extreme("min", True)


def _flat_axis(p, node, x, axis):
    """x and the axis to reduce: a 0-d x as one element along an axis, None as x flattened."""
    shape = node.inputs[0].shape
    if axis is None:
        return p.reshape(x, (math.prod(shape),)), 0
    return (p.reshape(x, (1,)), 0) if not shape else (x, axis)


def _selected(name: str, smallest: bool):
    """The values of ``max(x, dim)``: the entry at the index ``argmax`` gives, with the whole
    gradient there (``MaxBackward0``; ir.TakeAlong)."""
    def build(p, node, x):
        axis, keepdim = node.attrs
        x, axis = _flat_axis(p, node, x, axis)
        values = p.take_along(x, p.arg_reduce(x, axis, True, smallest), axis)
        return p.reshape(values, node.shape)

    def reference(x, axis, keepdim):
        pick = jnp.argmin if smallest else jnp.argmax
        return jnp.take_along_axis(x, pick(x, axis=axis, keepdims=True), axis=axis).squeeze(() if keepdim else axis)

    return register(Op(f"{name}_dim", f"{name.capitalize()}Backward0",
                       lambda nodes, axis, keepdim: (reduced_shape(nodes[0].shape, (axis,), keepdim), nodes[0].dtype),
                       build, reference=reference,
                       torch_fn=lambda t, x, axis, keepdim: getattr(x, name)(axis, keepdim)[0],
                       examples=(Example(((3, 4),), (1, False)), Example(((3, 4),), (0, True)),
                                 Example(((2, 3, 4),), (1, False))), domain=("ties",)))


def _infer_arg(nodes, axis, keepdim):
    (x,) = nodes
    if axis is None:
        return ((1,) * len(x.shape) if keepdim else ()), dtypes.int64
    return reduced_shape(x.shape, (axis,), keepdim), dtypes.int64


def _arg(name: str, smallest: bool):
    """argmax/argmin, and the indices of ``max(x, dim)``: the first extreme entry (ir.ArgMax)."""
    def build(p, node, x):
        x, axis = _flat_axis(p, node, x, node.attrs[0])
        return p.reshape(p.arg_reduce(x, axis, False, smallest), node.shape)

    pick = jnp.argmin if smallest else jnp.argmax
    return register(Op(name, None, _infer_arg, build, saves=False,
                       reference=lambda x, axis, keepdim: pick(x, axis=axis, keepdims=keepdim),
                       torch_fn=lambda t, x, axis, keepdim: getattr(x, name)(axis, keepdim),
                       examples=(Example(((3, 4),), (1, False)), Example(((3, 4),), (None, False)),
                                 Example(((2, 3, 4),), (0, True))), domain=("ties",)))


MAX_DIM, MIN_DIM = _selected("max", False), _selected("min", True)
ARGMAX, ARGMIN = _arg("argmax", False), _arg("argmin", True)


@SUM.publish(Names(function=("sum",), method=("sum",)))
def sum(input, dim=None, keepdim: bool = False, dtype=None):
    result = apply(SUM, input, attrs=_reduction_attrs(input, dim, keepdim, "SumBackward1", "SumBackward0"))
    return result if dtype is None else result.to(dtype)


@MEAN.publish(Names(function=("mean",), method=("mean",)))
def mean(input, dim=None, keepdim: bool = False):
    return apply(MEAN, input, attrs=_reduction_attrs(input, dim, keepdim, "MeanBackward1", "MeanBackward0"))


def _extreme_attrs(input, dim, keepdim: bool, name: str, grad_fn: str):
    """amax/amin refuse an empty reduced dim, looking for one before a repeated dim (as PyTorch)."""
    if dim in (None, (), []):
        attrs = _reduction_attrs(input, dim, keepdim, grad_fn, grad_fn)
        _nonempty(input, name, attrs[0], dim_given=False)
        return attrs
    axes = [dim_index(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
    _nonempty(input, name, axes if input.ndim else ())
    return _reduction_attrs(input, dim, keepdim, grad_fn, grad_fn)


@MAX.publish(Names(function=("amax",), method=("amax",)))
def amax(input, dim=(), keepdim: bool = False):
    attrs = _extreme_attrs(input, dim, keepdim, "amax", "AmaxBackward0")
    return apply(MAX, input, attrs=attrs)


@MIN.publish(Names(function=("amin",), method=("amin",)))
def amin(input, dim=(), keepdim: bool = False):
    attrs = _extreme_attrs(input, dim, keepdim, "amin", "AminBackward0")
    return apply(MIN, input, attrs=attrs)


def _with_indices(name, whole, elementwise, selected, arg, pair, input, dim, keepdim):
    """``max(x)``, ``max(x, y)`` (elementwise) or ``max(x, dim)``: values and indices."""
    if isinstance(dim, Tensor):
        return apply(elementwise, input, dim)
    if dim is None:
        return apply(whole, input, attrs=_reduction_attrs(input, None, False, "", f"{name.capitalize()}Backward1"))
    axis = dim_index(dim, input.ndim)
    if input.ndim:
        _nonempty(input, name, (axis,))
    attrs = (axis, bool(keepdim))
    return pair(apply(selected, input, attrs=attrs), apply(arg, input, attrs=attrs))


@MAX.publish(Names(function=("max",), method=("max",)))
def max(input, dim=None, keepdim: bool = False):
    return _with_indices("max", MAX, MAXIMUM, MAX_DIM, ARGMAX, MaxReturn, input, dim, keepdim)


@MIN.publish(Names(function=("min",), method=("min",)))
def min(input, dim=None, keepdim: bool = False):
    return _with_indices("min", MIN, MINIMUM, MIN_DIM, ARGMIN, MinReturn, input, dim, keepdim)


def _index_of(op, name):
    def index(input, dim=None, keepdim: bool = False):
        if input.dtype is dtypes.bool_:
            raise RuntimeError(f"{name}(): does not support bool input")
        if dim is None:
            if input.numel() == 0:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
            return apply(op, input, attrs=(None, bool(keepdim)))
        axis = dim_index(dim, input.ndim)
        if input.ndim:
            _nonempty(input, name, (axis,))
        return apply(op, input, attrs=(axis, bool(keepdim)))
    index.__name__ = name
    return index


argmax = ARGMAX.publish(Names(function=("argmax",), method=("argmax",)))(_index_of(ARGMAX, "argmax"))
argmin = ARGMIN.publish(Names(function=("argmin",), method=("argmin",)))(_index_of(ARGMIN, "argmin"))


@LOGSUMEXP.publish(Names(function=("logsumexp",), method=("logsumexp",)))
def logsumexp(input, dim, keepdim: bool = False):
    return apply(LOGSUMEXP, input,
                 attrs=_reduction_attrs(input, dim, keepdim, "LogsumexpBackward0", "LogsumexpBackward0"))


# ------------------------------------------------------------------------------ prod


def _infer_prod(nodes, axis, keepdim, dtype):
    (x,) = nodes
    if dtype is None:
        dtype = x.dtype if x.dtype.is_floating_point else dtypes.int64
    if axis is None:
        return ((1,) * len(x.shape) if keepdim else ()), dtype
    return reduced_shape(x.shape, (axis,), keepdim), dtype


def _build_prod(p, node, x):
    axis, keepdim, _ = node.attrs
    x = p.astype(x, node.dtype.name)
    if not node.inputs[0].shape:  # PyTorch's gradient of a 0-d product is g itself
        return x
    x, along = _flat_axis(p, node, x, axis)
    return p.reshape(p.reduce_prod(x, along, keepdim=False, whole=axis is None), node.shape)


PROD = register(Op("prod", lambda nodes, axis, keepdim, dtype: "ProdBackward0" if axis is None else "ProdBackward1",
                   _infer_prod, _build_prod,
                   reference=lambda x, axis, keepdim, dtype: jnp.prod(x, axis=axis, keepdims=keepdim),
                   torch_fn=lambda t, x, axis, keepdim, dtype: x.prod() if axis is None else x.prod(axis, keepdim),
                   examples=(Example(((3, 4),), (None, False, None)), Example(((3, 4),), (1, False, None)),
                             Example(((2, 3, 4),), (0, True, None)), Example(((),), (None, False, None)))))


@PROD.publish(Names(function=("prod",), method=("prod",)))
def prod(input, dim=None, keepdim: bool = False, *, dtype=None):
    axis = None if dim is None else dim_index(dim, input.ndim)
    return apply(PROD, input, attrs=(axis, bool(keepdim) and axis is not None, dtype))


# --------------------------------------------------------------------------- var, std


def _infer_moment(nodes, axes, correction, keepdim, grad_fn):
    (x,) = nodes
    if not x.dtype.is_floating_point:
        raise ValueError("std and var only support floating point and complex dtypes")
    return reduced_shape(x.shape, axes, keepdim), x.dtype


def mean_over(p, x, axes, n, corrected: bool):
    """The mean over ``axes`` (kept); ``corrected`` adds the mean of what is left, so a slice of
    equal values has exactly that value as its mean, as PyTorch's Welford reduction has."""
    shape, dtype = p.shape_of(x), p.dtype_of(x)
    total = p.reduce_sum(x, axes, True)
    mean = p.assign(total / n if n else ieee.mul(total, sp.nan), reduced_shape(shape, axes, True), dtype, "mean")
    if not (corrected and n):
        return mean
    rest = p.reduce_sum(p.assign(x - mean, shape, dtype, "deviation"), axes, True)
    return p.assign(mean + rest / n, p.shape_of(mean), dtype, "mean")


def _sum_of_squares(p, x, axes, keepdim, n):
    shape, dtype = p.shape_of(x), p.dtype_of(x)
    centered = p.assign(x - mean_over(p, x, axes, n, corrected=True), shape, dtype, "centered")
    return p.reduce_sum(p.assign(centered * centered, shape, dtype, "square"), axes, keepdim)


def _build_variance(p, node, x):
    """The value as PyTorch computes it: in float64, about a corrected mean, over max(0, n -
    correction) (a constant slice has variance exactly 0, and std's gradient there is 0).  The
    gradient is PyTorch's var_backward, 2 (x - mean) / (n - correction) g in x's dtype (negative
    where the correction exceeds n), given as the slope of a ``reduced_with_slope``: that form
    has no term through the mean at first order (NaN exactly where PyTorch's is), and is itself
    differentiated, mean included, at second order."""
    axes, correction, keepdim, grad_fn = node.attrs
    shape, dtype = node.inputs[0].shape, node.dtype.name
    if grad_fn == "StdBackward0" and dtype != "float64":  # the root taken before rounding, as PyTorch's
        wide = p.astype(x, "float64")  # kernel does: a float32 variance of 1e30s overflows, its root does not
        return p.astype(_spread(p, node, wide, "float64"), dtype)
    return _spread(p, node, x, dtype)


def _spread(p, node, x, dtype):
    axes, correction, keepdim, grad_fn = node.attrs
    shape = node.inputs[0].shape
    n = math.prod(shape[a] for a in axes)
    squares = _sum_of_squares(p, p.astype(x, "float64"), axes, keepdim, n)
    exact = ieee.mul(squares, 1 / sp.Integer(n - correction) if n > correction else sp.zoo)
    value = p.astype(p.assign(exact, node.shape, "float64", "var"), dtype)
    centered = p.assign(x - mean_over(p, x, axes, n, corrected=False), shape, dtype, "centered")
    slope = p.assign(ieee.mul(centered, sp.Integer(2) / (n - correction)), shape, dtype, "slope")
    variance = p.reduced_with_slope(value, x, slope, axes, keepdim)
    return p.assign(ir.root(variance), node.shape, dtype, "std") if grad_fn == "StdBackward0" else variance


VAR = register(Op("var", lambda nodes, axes, correction, keepdim, grad_fn: grad_fn, _infer_moment, _build_variance,
                  reference=lambda x, axes, c, keepdim, grad_fn: (jnp.std if grad_fn == "StdBackward0" else jnp.var)(
                      x, axis=axes, ddof=c, keepdims=keepdim),
                  torch_fn=lambda t, x, axes, c, keepdim, grad_fn: (x.std if grad_fn == "StdBackward0" else x.var)(
                      axes, correction=c, keepdim=keepdim),
                  examples=(Example(((3, 4),), ((0, 1), 1, False, "VarBackward0")),
                            Example(((3, 4),), ((1,), 0, True, "VarBackward0")),
                            Example(((3, 4),), ((0, 1), 1, False, "StdBackward0")),
                            Example(((2, 3, 4),), ((0, 2), 2, False, "StdBackward0")))))


def _moment(input, dim, unbiased, keepdim, correction, grad_fn):
    if unbiased is not None and correction is not None:
        raise TypeError(f"{grad_fn[:3].lower()}() received an invalid combination of arguments: "
                        "correction and unbiased cannot both be given")
    if correction is None:
        correction = 0 if unbiased is False else 1
    axes = normalize_dims(dim, input.ndim, empty_means_all=True)
    axes = tuple(range(input.ndim)) if axes is None else axes
    return apply(VAR, input, attrs=(axes, correction, bool(keepdim), grad_fn))


def _moment_arguments(dim, unbiased):
    """``x.var(True)``: a bool in dim's place is ``unbiased``, as PyTorch's overloads read it."""
    return (None, dim) if isinstance(dim, bool) else (dim, unbiased)


@VAR.publish(Names(function=("var",), method=("var",)))
def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    return _moment(input, *_moment_arguments(dim, unbiased), keepdim, correction, "VarBackward0")


@VAR.publish(Names(function=("std",), method=("std",)))
def std(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    return _moment(input, *_moment_arguments(dim, unbiased), keepdim, correction, "StdBackward0")


# ------------------------------------------------------------------------------ norms


def _float_only(x, name, error=ValueError):
    if not x.dtype.is_floating_point:
        raise error(f"linalg.{name}: Expected a floating point or complex tensor as input. "
                         f"Got {dtypes.torch_name(x.dtype)}")


def _infer_vector_norm(nodes, ord, axes, keepdim):
    (x,) = nodes
    _float_only(x, "vector_norm")
    if math.isinf(ord) and 0 in [x.shape[a] for a in axes]:
        raise ValueError(f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor because the "
                         "operation does not have an identity")
    return reduced_shape(x.shape, axes, keepdim), x.dtype


def _build_vector_norm(p, node, x):
    """2: the root of the sum of squares (ir.root: 0, not NaN, at the zero vector); 1: the sum of
    |x|; inf and -inf: the extreme |x|, the gradient shared among the entries that reach it (or
    are NaN), as PyTorch's norm_backward; 0: the count of nonzero entries, with zero gradient."""
    ord, axes, keepdim = node.attrs
    shape, dtype = node.inputs[0].shape, node.dtype.name
    if ord == 2:
        total = p.reduce_sum(p.assign(x * x, shape, dtype, "square"), axes, keepdim)
        return p.assign(ir.root(total), node.shape, dtype, "norm")
    if ord == 0:
        return p.reduce_sum(p.astype(p.assign(ir.not_equal(x, 0), shape, "bool", "nonzero"), dtype), axes, keepdim)
    magnitude = p.assign(sp.Abs(x, evaluate=False), shape, dtype, "abs")
    if ord == 1:
        return p.reduce_sum(magnitude, axes, keepdim)
    if math.isinf(ord):
        return p.reduce_max(magnitude, axes, keepdim, whole=True, smallest=ord < 0)
    return _p_norm(p, node, x, magnitude)


def _p_norm(p, node, x, magnitude):
    """Any other p: sum(|x|^p)^(1/p), with PyTorch's norm_backward as its slope (zero where the
    norm is 0, or where x is 0 for p < 1), which stays differentiable for higher orders."""
    ord, axes, keepdim = node.attrs
    shape, dtype = node.inputs[0].shape, node.dtype.name
    root = 1 / sp.Float(ord) if isinstance(ord, float) else sp.Rational(1, ord)
    total = p.reduce_sum(p.assign(magnitude ** ord, shape, dtype, "powered"), axes, keepdim)
    norm = p.assign(total ** root, node.shape, dtype, "norm")
    if ord < 1:
        scaled = ir.select(ir.equal(x, 0), sp.S.Zero, ir.sign(x) * magnitude ** (ord - 1))
        slope = scaled * p.expand_reduced(norm, shape, axes, keepdim) ** (1 - ord)
    else:  # the root of a zero total is taken of 1: its derivative must not be inf where it is masked
        zero = ir.equal(total, 0)
        guarded = p.assign(ir.select(zero, sp.S.One, total) ** (root * (1 - ord)), node.shape, dtype, "scale")
        scale = p.expand_reduced(p.assign(ir.select(zero, sp.S.Zero, guarded), node.shape, dtype, "scale"),
                                 shape, axes, keepdim)
        slope = (ir.sign(x) * magnitude ** (ord - 1) if ord < 2 else x * magnitude ** (ord - 2)) * scale
    return p.reduced_with_slope(norm, x, p.assign(slope, shape, dtype, "slope"), axes, keepdim)


VECTOR_NORM = register(Op("vector_norm", "LinalgVectorNormBackward0", _infer_vector_norm, _build_vector_norm,
                          reference=lambda x, ord, axes, keepdim: jnp.linalg.vector_norm(
                              x, ord=ord, axis=axes, keepdims=keepdim),
                          torch_fn=lambda t, x, ord, axes, keepdim: x.norm(ord, axes, keepdim),
                          examples=(Example(((3, 4),), (2, (0, 1), False)), Example(((3, 4),), (1, (1,), True)),
                                    Example(((3, 4),), (math.inf, (0,), False)),
                                    Example(((2, 3, 4),), (-math.inf, (0, 2), False)),
                                    Example(((3, 4),), (3, (1,), False)), Example(((3, 4),), (0.5, (0,), True))),
                          domain=("nonzero",)))


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):
    """``torch.linalg.vector_norm`` for any real ord (2, 1, inf, -inf and 0 have their own forms)."""
    if isinstance(ord, str):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not str")
    _float_only(x, "vector_norm", RuntimeError)  # before dim's checks and the cast to dtype, as PyTorch
    if dtype is not None:
        x = x.to(dtype)
    axes = normalize_dims(dim, x.ndim, empty_means_all=True)
    axes = tuple(range(x.ndim)) if axes is None else axes
    ord = int(ord) if float(ord).is_integer() else float(ord)
    return apply(VECTOR_NORM, x, attrs=(ord, axes, bool(keepdim)))


def _infer_matrix_norm(nodes, ord, dims, keepdim):
    (x,) = nodes
    _float_only(x, "matrix_norm")
    keep = reduced_shape(x.shape, dims, True)
    return (keep if keepdim else reduced_shape(x.shape, dims, False)), x.dtype


def _matrix_norm_reference(x, ord, dims, keepdim):
    norms = jnp.linalg.matrix_norm(jnp.moveaxis(x, dims, (-2, -1)), ord=ord)
    return jnp.expand_dims(norms, sorted(dims)) if keepdim else norms


def _matrix_norm_composed(x, ord, dims, keepdim):
    """``torch.linalg.matrix_norm(x, ord, dims, keepdim)`` as PyTorch composes it, spelled with
    what symgrad publishes too (symgrad has no ``linalg`` namespace)."""
    summed, extreme = dims if abs(ord) == 1 else reversed(dims)
    sums = x.abs().sum(summed, keepdim=True)
    return sums.amin(dims, keepdim) if ord < 0 else sums.amax(dims, keepdim)


def _build_matrix_norm(p, node, x):
    """1 and -1: the extreme column sum of |x| (rows summed); inf and -inf: the extreme row sum.
    PyTorch composes them of sum and amax/amin, whose gradient rules these are."""
    ord, (rows, columns), keepdim = node.attrs
    summed, extreme = (rows, columns) if abs(ord) == 1 else (columns, rows)
    magnitude = p.assign(sp.Abs(x, evaluate=False), node.inputs[0].shape, node.dtype.name, "abs")
    sums = p.reduce_sum(magnitude, (summed,), True)
    return p.reshape(p.reduce_max(sums, (extreme,), True, smallest=ord < 0), node.shape)


MATRIX_NORM = register(Op("matrix_norm",
                          lambda nodes, ord, dims, keepdim: "AminBackward0" if ord < 0 else "AmaxBackward0",
                          _infer_matrix_norm, _build_matrix_norm,
                          reference=lambda x, ord, dims, keepdim: _matrix_norm_reference(x, ord, dims, keepdim),
                          torch_fn=lambda t, x, ord, dims, keepdim: _matrix_norm_composed(x, ord, dims, keepdim),
                          examples=(Example(((3, 4),), (1, (0, 1), False)), Example(((3, 4),), (-1, (0, 1), True)),
                                    Example(((2, 3, 4),), (math.inf, (2, 0), False)),
                                    Example(((3, 4),), (-math.inf, (0, 1), False))),
                          domain=("ties",)))
MATRIX_ORDERS = ("fro", 1, -1, math.inf, -math.inf)
SPECTRAL_ORDERS = ("nuc", 2, -2)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):
    """``torch.linalg.matrix_norm``: 'fro', 1, -1, inf and -inf are sums and maxima of entries;
    the spectral norms (2, -2: the extreme singular values; 'nuc': their sum) are composed of
    ``svdvals`` as PyTorch composes them."""
    if ord not in MATRIX_ORDERS + SPECTRAL_ORDERS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    dims = tuple(dim_index(d, A.ndim) for d in dim)
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    if dims[0] == dims[1]:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return vector_norm(A, 2, dims, keepdim, dtype=dtype)
    if dtype is not None:
        A = A.to(dtype)
    if ord in SPECTRAL_ORDERS:
        return _spectral_norm(A, ord, dims, keepdim)
    return apply(MATRIX_NORM, A, attrs=(float(ord) if math.isinf(ord) else int(ord), dims, bool(keepdim)))


def _spectral_norm(A, ord, dims, keepdim: bool):
    others = [d for d in range(A.ndim) if d not in dims]
    values = svdvals(A.permute(*others, *dims))
    norms = values.sum(-1) if ord == "nuc" else values.amax(-1) if ord == 2 else values.amin(-1)
    if keepdim:
        norms = norms.reshape(tuple(1 if d in dims else n for d, n in enumerate(A.shape)))
    return norms


@VECTOR_NORM.publish(Names(function=("norm",), method=("norm",)))
def norm(input, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """``torch.norm``: 'fro' is the 2-norm (of the matrices at ``dim``, a pair); 'nuc' is the
    matrix norm over ``dim`` (the last two if None); a number p is ``vector_norm`` over ``dim``
    (every dimension if None)."""
    if isinstance(p, str) and p != "fro":  # 'nuc', or an order matrix_norm refuses
        return matrix_norm(input, p, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if p == "fro":
        if isinstance(dim, (tuple, list)) and len(dim) > 2:
            raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
        p = 2
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


# ------------------------------------------------------------------ any, all, count


def _build_count(p, node, x):
    """The count of nonzero entries (NaN is nonzero); any: a count above 0; all: every entry."""
    axes, keepdim, kind = node.attrs
    shape = node.inputs[0].shape
    nonzero = p.assign(ir.not_equal(x, 0), shape, "bool", "nonzero")
    count = p.reduce_sum(p.astype(nonzero, "int64"), axes, keepdim, shape=shape)
    if kind == "count_nonzero":
        return count
    if kind == "any":
        return p.assign(ir.greater(count, 0), node.shape, "bool", "any")
    return p.assign(ir.equal(count, math.prod(shape[a] for a in axes)), node.shape, "bool", "all")


COUNT = register(Op("count_nonzero", None,
                    lambda nodes, axes, keepdim, kind: (reduced_shape(nodes[0].shape, axes, keepdim),
                                                        dtypes.int64 if kind == "count_nonzero" else dtypes.bool_),
                    _build_count, saves=False,
                    reference=lambda x, axes, keepdim, kind: {"any": jnp.any, "all": jnp.all,
                                                              "count_nonzero": jnp.count_nonzero}[kind](
                        x, axis=axes, keepdims=keepdim),
                    torch_fn=lambda t, x, axes, keepdim, kind: (x.count_nonzero(axes) if kind == "count_nonzero"
                                                                else getattr(x, kind)(axes, keepdim)),
                    examples=(Example(((3, 4),), ((0, 1), False, "count_nonzero")),
                              Example(((3, 4),), ((1,), False, "any")), Example(((2, 3, 4),), ((0, 2), True, "all"))),
                    domain=("kinked",)))


def _counting(kind):
    def reduce(input, dim=None, keepdim: bool = False):
        axes = normalize_dims(dim, input.ndim, empty_means_all=True)
        return apply(COUNT, input, attrs=(tuple(range(input.ndim)) if axes is None else axes, bool(keepdim), kind))
    reduce.__name__ = kind
    return reduce


any = COUNT.publish(Names(function=("any",), method=("any",)))(_counting("any"))
all = COUNT.publish(Names(function=("all",), method=("all",)))(_counting("all"))


count_nonzero = COUNT.publish(Names(function=("count_nonzero",), method=("count_nonzero",)))(
    _counting("count_nonzero"))
