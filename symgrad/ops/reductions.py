"""Reductions: sum, mean, prod, max and min (of a whole tensor, amax/amin, with indices),
argmax/argmin, var/std (with the mean), norms, any/all/count_nonzero, sums that skip NaN, and the
running reductions cummax, cummin and logcumsumexp.

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
from symgrad.ir import broadcast_shapes, ieee, reduced_shape
from symgrad.ir import indexing as IX
from symgrad.ops.dims import dim_index, normalize_dims
from symgrad.ops.elementwise import MAXIMUM, MINIMUM
from symgrad.ops.linalg import svdvals
from symgrad.ops.shape import cat, to_dtype
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply


def return_type(name: str):
    """PyTorch's ``torch.return_types.<name>``: a (values, indices) tuple that prints as PyTorch's."""
    pair = collections.namedtuple(name, ("values", "indices"))
    pair.__repr__ = lambda self: f"torch.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"
    return pair


MaxReturn, MinReturn = return_type("max"), return_type("min")
CummaxReturn, CumminReturn = return_type("cummax"), return_type("cummin")


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
                             f"point or complex dtype. Got: {dtypes.torch_name(dtype)}")
        if kind in ("max", "min") and name == f"{kind.capitalize()}Backward1" and 0 in x.shape:
            raise ValueError(f"{kind}(): Expected reduction dim to be specified for input.numel() == 0. "
                             "Specify the reduction dim with the 'dim' argument.")
        return reduced_shape(x.shape, axes, keepdim), dtype
    return infer


def _build_sum(p, node, x):
    axes, keepdim, _ = node.attrs
    return p.reduce_sum(p.astype(x, node.dtype.name), axes, keepdim, shape=node.inputs[0].shape)


def _build_mean(p, node, x):
    axes, keepdim, name = node.attrs
    shape = node.inputs[0].shape
    if name in ("StdMeanBackward0", "VarMeanBackward0"):
        return _paired_mean(p, node, x)
    total = p.reduce_sum(x, axes, keepdim, shape=shape)
    return p.assign(total / math.prod(shape[a] for a in axes), node.shape, node.dtype.name, "mean")


def _paired_mean(p, node, x):
    """The mean std_mean and var_mean give: their variance's, in float64 about a corrected mean (so
    not always ``mean()``'s last bit, as in PyTorch); its gradient is g / n."""
    axes, keepdim, _ = node.attrs
    shape, dtype = node.inputs[0].shape, node.dtype.name
    n = math.prod(shape[a] for a in axes)
    wide = mean_over(p, p.astype(p.materialize(x, shape, dtype), "float64"), axes, n, corrected=True)
    value = p.astype(p.reshape(wide, node.shape), dtype)
    slope = p.materialize(1 / sp.Integer(n) if n else sp.nan, shape, dtype)
    return p.reduced_with_slope(value, x, slope, axes, keepdim)


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


@SUM.publish(Names(method=("sum_to_size",)))
def sum_to_size(input, *size):
    """The sum over the dims a tensor of ``size`` would be broadcast along (the tensor itself if none):
    a keepdim sum, then a view dropping the leading dims, as PyTorch composes it."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    shape, lead = tuple(input.shape), input.ndim - len(size)
    if lead < 0 or [n for i, n in enumerate(size) if n != 1 and n != shape[lead + i]]:  # (``any`` is the op here)
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(size) if n == 1 and shape[lead + i] != 1)
    result = sum(input, dims, keepdim=True) if dims else input
    return result.view(size) if lead else result


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
    if grad_fn in ROOTS and dtype != "float64":  # the root taken before rounding, as PyTorch's
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
    return p.assign(ir.root(variance), node.shape, dtype, "std") if grad_fn in ROOTS else variance


ROOTS = ("StdBackward0", "StdMeanBackward0")  # the names of var's op taken as std (its square root)


def _torch_moment(t, x, axes, c, keepdim, grad_fn):
    call = {"VarBackward0": t.var, "StdBackward0": t.std, "VarMeanBackward0": t.var_mean,
            "StdMeanBackward0": t.std_mean}[grad_fn]
    result = call(x, axes, correction=c, keepdim=keepdim)
    return result[0] if isinstance(result, tuple) else result


VAR = register(Op("var", lambda nodes, axes, correction, keepdim, grad_fn: grad_fn, _infer_moment, _build_variance,
                  reference=lambda x, axes, c, keepdim, grad_fn: (jnp.std if grad_fn in ROOTS else jnp.var)(
                      x, axis=axes, ddof=c, keepdims=keepdim),
                  torch_fn=_torch_moment,
                  examples=(Example(((3, 4),), ((0, 1), 1, False, "VarBackward0")),
                            Example(((3, 4),), ((1,), 0, True, "VarBackward0")),
                            Example(((3, 4),), ((0, 1), 1, False, "StdBackward0")),
                            Example(((2, 3, 4),), ((0, 2), 2, False, "StdBackward0")),
                            Example(((3, 4),), ((1,), 1, True, "StdMeanBackward0")),
                            Example(((3, 4),), ((0, 1), 0, False, "VarMeanBackward0")))))


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


def _with_mean(input, dim, unbiased, keepdim, correction, grad_fn):
    """(std or var, mean), both recorded under PyTorch's one backward name for the pair."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{grad_fn.removesuffix('Backward0').replace('Mean', '_mean').lower()} only support "
                           f"floating point and complex dtypes")
    spread = _moment(input, *_moment_arguments(dim, unbiased), keepdim, correction, grad_fn)
    axes, keepdim = spread._node.attrs[0], spread._node.attrs[2]
    return spread, apply(MEAN, input, attrs=(axes, keepdim, grad_fn))


@VAR.publish(Names(function=("std_mean",)))
def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    return _with_mean(input, dim, unbiased, keepdim, correction, "StdMeanBackward0")


@VAR.publish(Names(function=("var_mean",)))
def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    return _with_mean(input, dim, unbiased, keepdim, correction, "VarMeanBackward0")


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
    return _norm(p, x, *node.attrs, node.inputs[0].shape, node.shape, node.dtype.name)


def _norm(p, x, ord, axes, keepdim, shape, out_shape, dtype):
    if ord == 2:
        total = p.reduce_sum(p.assign(x * x, shape, dtype, "square"), axes, keepdim)
        return p.assign(ir.root(total), out_shape, dtype, "norm")
    if ord == 0:
        return p.reduce_sum(p.astype(p.assign(ir.not_equal(x, 0), shape, "bool", "nonzero"), dtype), axes, keepdim)
    magnitude = p.assign(sp.Abs(x, evaluate=False), shape, dtype, "abs")
    if ord == 1:
        return p.reduce_sum(magnitude, axes, keepdim)
    if math.isinf(ord):
        return _extreme_norm(p, x, magnitude, ord, axes, keepdim, shape, dtype)
    return _p_norm(p, x, magnitude, ord, axes, keepdim, shape, out_shape, dtype)


def _extreme_norm(p, x, magnitude, ord, axes, keepdim, shape, dtype):
    """inf and -inf: the extreme |x|, with PyTorch's norm_backward as its slope: sign(x) times a mask of
    the entries that reach it (or are NaN) over their count.  The mask multiplies, so an infinite
    gradient is NaN at the other entries, as in PyTorch (a max's would be 0 there)."""
    norm = p.reduce_max(magnitude, axes, keepdim, whole=True, smallest=ord < 0)
    reaches = ir.logical_or(ir.equal(magnitude, p.expand_reduced(norm, shape, axes, keepdim)), ir.isnan(magnitude))
    mask = p.astype(p.assign(reaches, shape, "bool", "reaches"), dtype)
    count = p.expand_reduced(p.reduce_sum(mask, axes, keepdim), shape, axes, keepdim)
    return p.reduced_with_slope(norm, x, p.assign(ir.sign(x) * mask / count, shape, dtype, "slope"), axes, keepdim)


def _p_norm(p, x, magnitude, ord, axes, keepdim, shape, out_shape, dtype):
    """Any other p: sum(|x|^p)^(1/p), with PyTorch's norm_backward as its slope (zero where the
    norm is 0, or where x is 0 for p < 1), which stays differentiable for higher orders."""
    root = 1 / sp.Float(ord) if isinstance(ord, float) else sp.Rational(1, ord)
    total = p.reduce_sum(p.assign(magnitude ** ord, shape, dtype, "powered"), axes, keepdim)
    norm = p.assign(total ** root, out_shape, dtype, "norm")
    if ord < 1:
        scaled = ir.select(ir.equal(x, 0), sp.S.Zero, ir.sign(x) * magnitude ** (ord - 1))
        slope = scaled * p.expand_reduced(norm, shape, axes, keepdim) ** (1 - ord)
    else:  # the root of a zero total is taken of 1: its derivative must not be inf where it is masked
        zero = ir.equal(total, 0)
        guarded = p.assign(ir.select(zero, sp.S.One, total) ** (root * (1 - ord)), out_shape, dtype, "scale")
        scale = p.expand_reduced(p.assign(ir.select(zero, sp.S.Zero, guarded), out_shape, dtype, "scale"),
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
        result = apply(COUNT, input, attrs=(tuple(range(input.ndim)) if axes is None else axes, bool(keepdim), kind))
        return to_dtype(result, dtypes.uint8) if kind != "count_nonzero" and input.dtype is dtypes.uint8 else result
    reduce.__name__ = kind
    return reduce


any = COUNT.publish(Names(function=("any",), method=("any",)))(_counting("any"))
all = COUNT.publish(Names(function=("all",), method=("all",)))(_counting("all"))


count_nonzero = COUNT.publish(Names(function=("count_nonzero",), method=("count_nonzero",)))(
    _counting("count_nonzero"))



# ------------------------------------------------------------------ skipping NaN


def _infer_nansum(nodes, axes, keepdim, dtype):
    (x,) = nodes
    return reduced_shape(x.shape, axes, keepdim), dtype or (x.dtype if x.dtype.is_floating_point else dtypes.int64)


def _build_nansum(p, node, x):
    """The sum with NaN taken as 0: its gradient is 0 there, as PyTorch's ``grad * (x == x)``."""
    axes, keepdim, _ = node.attrs
    shape, dtype = node.inputs[0].shape, node.dtype.name
    x = p.astype(x, dtype)
    return p.reduce_sum(p.assign(ir.select(ir.isnan(x), sp.S.Zero, x), shape, dtype, "kept"), axes, keepdim)


NANSUM = register(Op("nansum", "NansumBackward0", _infer_nansum, _build_nansum,
                     reference=lambda x, axes, keepdim, dtype: jnp.nansum(x, axis=axes, keepdims=keepdim),
                     torch_fn=lambda t, x, axes, keepdim, dtype: t.nansum(x, axes, keepdim),
                     examples=(Example(((3, 4),), ((0, 1), False, None)), Example(((2, 3, 4),), ((1,), True, None)))))


@NANSUM.publish(Names(function=("nansum",), method=("nansum",)))
def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):
    axes = normalize_dims(dim, input.ndim, empty_means_all=True)
    axes = tuple(range(input.ndim)) if axes is None else axes
    return apply(NANSUM, input, attrs=(axes, bool(keepdim), dtype))


@NANSUM.publish(Names(function=("nanmean",), method=("nanmean",)))
def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """The sum of the entries that are not NaN over their count, as PyTorch composes it (DivBackward0)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{dtypes.torch_name(input.dtype).removesuffix('Tensor')}")
    count = input.isnan().logical_not().sum(dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


# ------------------------------------------------------------------ aminmax


AminmaxReturn = collections.namedtuple("aminmax", ("min", "max"))
AminmaxReturn.__repr__ = lambda self: f"torch.return_types.aminmax(\nmin={self.min!r},\nmax={self.max!r})"


@MIN.publish(Names(function=("aminmax",), method=("aminmax",)))
def aminmax(input, *, dim=None, keepdim: bool = False):
    """amin and amax in one call (PyTorch's backward of both is ``AminmaxBackward0``, amax's rule)."""
    if dim is not None and not isinstance(dim, int):
        raise TypeError(f"aminmax(): argument 'dim' must be int, not {type(dim).__name__}")
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.")
        axes = tuple(range(input.ndim))
    else:
        axes = (dim_index(dim, input.ndim),) if input.ndim else ()
        if axes and input.shape[axes[0]] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {axes[0]} to have non-zero size.")
    attrs = (axes, bool(keepdim), "AminmaxBackward0")
    return AminmaxReturn(apply(MIN, input, attrs=attrs), apply(MAX, input, attrs=attrs))


# ------------------------------------------------------------------ running reductions


def _prefixes(p, node, x, fill):
    """The input with its ``axis`` moved last and spread into a matrix: row i holds the entries up to i,
    ``fill`` after them (a function of the rows).  Quadratic in the axis' length, for an exact form."""
    axis = node.attrs[0]
    shape, dtype = node.inputs[0].shape or (1,), node.inputs[0].dtype.name
    x = p.reshape(x, shape)
    n, rest = shape[axis], tuple(d for d in range(len(shape)) if d != axis)
    lead = tuple(shape[d] for d in rest)
    rows = p.broadcast_to(p.reshape(p.permute(x, (*rest, axis)), (*lead, 1, n)), (*lead, n, n))
    ones = p.materialize(sp.S.One, (n, n), "int64")
    upto = p.assign(ir.equal(IX.triangle(p, ones, 0, False), sp.S.One), (n, n), "bool", "up_to")
    return rows, upto, p.assign(ir.select(upto, rows, fill(rows)), (*lead, n, n), dtype, "prefixes")


def _back(p, node, result):
    """A result laid out with the running axis last, in the input's layout again."""
    axis, shape = node.attrs[0], node.inputs[0].shape or (1,)
    rest = [d for d in range(len(shape)) if d != axis]
    order = (*rest, axis)
    return p.reshape(p.permute(result, [order.index(d) for d in range(len(shape))]), node.shape)


def _running_index(p, node, x, smallest):
    """The index cummax (cummin) reports: the last entry up to i equal to the running extreme, or NaN
    where that is NaN (PyTorch's kernel takes an entry that is >= the extreme so far, or NaN)."""
    rows, upto, prefixes = _prefixes(p, node, x, lambda rows: p.index(rows, [(1, 0, n, 1) for n in p.shape_of(rows)[:-1]]
                                                                          + [(1, 0, 1, 1)]))
    shape = p.shape_of(rows)
    extreme = p.reduce_max(prefixes, (len(shape) - 1,), True, smallest=smallest)
    same = ir.logical_or(ir.equal(rows, extreme), ir.logical_and(ir.isnan(rows), ir.isnan(extreme)))
    n = shape[-1]
    place = p.assign(p.cumulative(p.materialize(sp.S.One, (n,), "int64"), 0) - 1, (n,), "int64", "place")
    chosen = p.assign(ir.select(ir.logical_and(same, upto), place, sp.S.NegativeOne), shape, "int64", "chosen")
    return p.reduce_max(chosen, (len(shape) - 1,), False)


def _build_running_extreme(p, node, x):
    _, smallest, indices = node.attrs
    index = _running_index(p, node, x, smallest)
    if indices:
        return _back(p, node, index)
    shape = node.inputs[0].shape or (1,)
    axis = node.attrs[0]
    rest = tuple(d for d in range(len(shape)) if d != axis)
    return _back(p, node, IX.gather(p, p.permute(p.reshape(x, shape), (*rest, axis)), index, len(shape) - 1))


def _torch_running(t, x, axis, smallest, indices):
    return (t.cummin if smallest else t.cummax)(x, axis)[1 if indices else 0]


RUNNING_EXTREME = register(Op("cummax", lambda nodes, axis, smallest, indices: (
                                  None if indices else "CumminBackward0" if smallest else "CummaxBackward0"),
                              lambda nodes, axis, smallest, indices: (
                                  nodes[0].shape, dtypes.int64 if indices else nodes[0].dtype),
                              _build_running_extreme,
                              reference=lambda x, axis, smallest, indices: _reference_running(x, axis, smallest, indices),
                              torch_fn=_torch_running,
                              examples=(Example(((5,),), (0, False, False)), Example(((3, 4),), (1, True, False)),
                                        Example(((2, 3, 4),), (0, False, True)), Example(((4, 3),), (0, True, True))),
                              domain=("ties",)))


def _reference_running(x, axis, smallest, indices):
    """jax.lax's running extreme, and its index by the same rule as ``_running_index``."""
    shape = x.shape
    x = jnp.moveaxis(jnp.reshape(x, shape or (1,)), axis, -1)
    n = x.shape[-1]
    values = (jax.lax.cummin if smallest else jax.lax.cummax)(x, axis=x.ndim - 1)
    if indices:
        hits = (x[..., None, :] == values[..., :, None]) & (jnp.arange(n) <= jnp.arange(n)[:, None])
        values = jnp.max(jnp.where(hits, jnp.arange(n), -1), axis=-1)
    return jnp.reshape(jnp.moveaxis(values, -1, axis), shape)


def _running(name, smallest, pair):
    def running(input, dim: int):
        axis = dim_index(dim, input.ndim)
        if input.ndim and input.shape[axis] == 0:
            return pair(input.clone(), input.to(dtypes.int64).clone())
        return pair(*(apply(RUNNING_EXTREME, input, attrs=(axis, smallest, i)) for i in (False, True)))
    running.__name__ = name
    return running


cummax = RUNNING_EXTREME.publish(Names(function=("cummax",), method=("cummax",)))(
    _running("cummax", False, CummaxReturn))
cummin = RUNNING_EXTREME.publish(Names(function=("cummin",), method=("cummin",)))(
    _running("cummin", True, CumminReturn))


def _infer_logcumsumexp(nodes, axis):
    (x,) = nodes
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for "
                                  f"'{dtypes.torch_name(x.dtype).removesuffix('Tensor')}'")
    return x.shape, x.dtype


def _build_logcumsumexp(p, node, x):
    """Each row's logsumexp over the entries up to it (-inf after): stable, and its gradient
    exp(x_j - out_i) summed over i >= j is NaN where PyTorch's is (x_j = out_i = +-inf)."""
    _, _, prefixes = _prefixes(p, node, x, lambda rows: sp.S.NegativeInfinity)
    return _back(p, node, p.logsumexp(prefixes, (len(p.shape_of(prefixes)) - 1,), False))


LOGCUMSUMEXP = register(Op("logcumsumexp", "LogcumsumexpBackward0", _infer_logcumsumexp, _build_logcumsumexp,
                           reference=lambda x, axis: jnp.reshape(
                               jax.lax.cumlogsumexp(jnp.reshape(x, x.shape or (1,)), axis=axis), x.shape),
                           torch_fn=lambda t, x, axis: t.logcumsumexp(x, axis),
                           examples=(Example(((5,),), (0,)), Example(((3, 4),), (1,)), Example(((2, 3, 4),), (0,)),
                                     Example(((),), (0,)))))


@LOGCUMSUMEXP.publish(Names(function=("logcumsumexp",), method=("logcumsumexp",)))
def logcumsumexp(input, dim: int):
    return apply(LOGCUMSUMEXP, input, attrs=(dim_index(dim, input.ndim),))



# ------------------------------------------------------------------------------ cdist


def _infer_cdist(nodes, ord):
    a, b = nodes
    return (*broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-2]), a.dtype


def _build_cdist(p, node, a, b):
    """The ``ord``-norm of every row of ``a`` minus every row of ``b``: vector_norm's forms, so the
    gradient at a zero distance is 0, as PyTorch's; for inf PyTorch's backward gives each entry that
    reaches the distance the whole gradient (vector_norm shares it among them), by its mask
    ``1 - min(1, ceil(||d| - dist|))``: NaN where the difference or the distance is infinite or NaN;
    its distance passes a NaN difference over (vector_norm's is NaN)."""
    (ord,) = node.attrs
    (sa, sb), dtype = (n.shape for n in node.inputs), node.dtype.name
    rows = p.reshape(a, (*sa[:-1], 1, sa[-1]))
    columns = p.reshape(b, (*sb[:-2], 1, *sb[-2:]))
    shape = (*node.shape, sa[-1])
    difference = p.assign(rows - columns, shape, dtype, "difference")
    axes = (len(shape) - 1,)
    if not math.isinf(ord):
        return _norm(p, difference, ord, axes, False, shape, node.shape, dtype)
    if sa[-1] == 0:  # no coordinates: PyTorch's 0 (its max starts there; a max of nothing has no value)
        return p.reduce_sum(difference, axes, False)
    magnitude = p.assign(sp.Abs(difference, evaluate=False), shape, dtype, "abs")
    counted = ir.select(ir.isnan(magnitude), sp.S.Zero, magnitude)  # PyTorch's max(agg, |d|) from 0 passes NaN over
    distance = p.reduce_max(p.assign(counted, shape, dtype, "counted"), axes, False)
    gap = sp.Abs(magnitude - p.expand_reduced(distance, shape, axes, False), evaluate=False)
    reaches = 1 - ir.minimum(sp.S.One, ir.ceil(p.assign(gap, shape, dtype, "gap")))
    slope = p.assign(ir.sign(difference) * reaches, shape, dtype, "slope")
    return p.reduced_with_slope(distance, difference, slope, axes, False)  # every entry that reaches it, unshared


CDIST = register(Op("cdist", "CdistBackward0", _infer_cdist, _build_cdist,
                    reference=lambda a, b, ord: jnp.linalg.vector_norm(a[..., :, None, :] - b[..., None, :, :], ord=ord,
                                                                       axis=-1),
                    torch_fn=lambda t, a, b, ord: t.cdist(a, b, ord, compute_mode="donot_use_mm_for_euclid_dist"),
                    examples=(Example(((3, 4), (5, 4)), (2,)), Example(((2, 3, 4), (5, 4)), (1,)),
                              Example(((3, 2), (4, 2)), (math.inf,)), Example(((2, 1, 3, 2), (4, 5, 2)), (3,)),
                              Example(((3, 2), (2, 2)), (0.5,)))))


def _euclidean_by_products(x1, x2):
    """PyTorch's distances by matrix products for many rows: |a|^2 + |b|^2 - 2 a.b, clamped at 1e-30,
    its root (batches expanded and flattened, then viewed back, as PyTorch's)."""
    batch = broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    x1 = x1.expand(*batch, *x1.shape[-2:]).reshape(-1, *x1.shape[-2:])
    x2 = x2.expand(*batch, *x2.shape[-2:]).reshape(-1, *x2.shape[-2:])
    norms1, norms2 = x1.pow(2).sum(-1, keepdim=True), x2.pow(2).sum(-1, keepdim=True)
    left = cat((x1 * -2, norms1, norms1.new_ones(norms1.shape)), -1)
    right = cat((x2, norms2.new_ones(norms2.shape), norms2), -1)
    distances = left.matmul(right.mT).clamp_min(1e-30).sqrt()
    return distances.reshape(*batch, *distances.shape[-2:])


MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@CDIST.publish(Names(function=("cdist",)))
def cdist(x1, x2, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary"):
    """The distances between the rows of x1 and of x2 (batches broadcast).  For p = 2 with more than
    25 rows on a side (or when asked) PyTorch computes them by matrix products, whose rounding differs."""
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{dtypes.torch_name(x.dtype).removesuffix('Tensor')}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"expected scalar type {dtypes.torch_name(x1.dtype).removesuffix('Tensor')} but found "
                           f"{dtypes.torch_name(x2.dtype).removesuffix('Tensor')}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in MODES:
        raise RuntimeError(f"{compute_mode} is not a valid value for compute_mode")
    by_products = compute_mode == MODES[1] or (compute_mode == MODES[0] and (x1.shape[-2] > 25 or x2.shape[-2] > 25))
    if p == 2 and by_products:
        return _euclidean_by_products(x1, x2)
    ord = int(p) if float(p).is_integer() else float(p)
    return apply(CDIST, x1, x2, attrs=(ord,))
