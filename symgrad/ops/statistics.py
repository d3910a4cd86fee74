"""Order statistics and moments: kthvalue and mode (values and positions, the positions PyTorch's
CPU kernels pick among equal values: symgrad.ir.order_kernels), msort, quantile and nanquantile
(PyTorch's composite: sort, ranks, gather, lerp, so its gradient), cov and corrcoef."""
from __future__ import annotations

import numbers
import warnings

import sympy as sp

from symgrad import dtypes
from symgrad.creation import tensor
from symgrad.ir.order_kernels import QuickSelect, SortedMode
from symgrad.ops.dims import dim_index
from symgrad.ops.indexing import _values
from symgrad.ops.reductions import return_type
from symgrad.ops.registry import Names, Op, register
from symgrad.ops.shape import reshape
from symgrad.ops.sorting import SORTED, sort
from symgrad.tensor import Tensor, apply

KthvalueReturn, ModeReturn = return_type("kthvalue"), return_type("mode")

# ------------------------------------------------------------------ kthvalue and mode


def _infer_selected(dtype):
    def infer(nodes, kernel, axis, k, keepdim):
        shape = nodes[0].shape
        if shape:
            shape = (*shape[:axis], *((1,) if keepdim else ()), *shape[axis + 1:])
        return shape, dtype or nodes[0].dtype
    return infer


def _selected(p, node, x):
    """x (a 0-d one as one entry) and the position along the axis, keepdim'd, its kernel picks."""
    kernel, axis, k, _ = node.attrs
    if not node.inputs[0].shape:
        x = p.reshape(x, (1,))
    rank = len(p.shape_of(x))
    last = p.permute(x, [d for d in range(rank) if d != axis] + [axis])
    head = QuickSelect(last, sp.Integer(k - 1)) if kernel == "kthvalue" else SortedMode(last)
    position = p.assign(head, head.shape(p.shape_of), "int64", kernel)
    kept = (*p.shape_of(x)[:axis], 1, *p.shape_of(x)[axis + 1:])
    return x, p.reshape(position, kept)


def _build_selected_value(p, node, x):
    x, position = _selected(p, node, x)
    return p.reshape(p.take_along(x, position, node.attrs[1]), node.shape)


def _grad_fn(nodes, kernel, axis, k, keepdim):
    return "KthvalueBackward0" if kernel == "kthvalue" else "ModeBackward0"


SELECTED = register(Op("selected", _grad_fn, _infer_selected(None), _build_selected_value, selects=True))
SELECTED_INDEX = register(Op("selected_index", None, _infer_selected(dtypes.int64),
                             lambda p, node, x: p.reshape(_selected(p, node, x)[1], node.shape), saves=False))


def _select(kernel, input, k, dim, keepdim, pair):
    axis = dim_index(dim, input.ndim)
    size = input.shape[axis] if input.ndim else 1
    if not size:
        raise IndexError(f"{kernel}(): Expected reduction dim {axis} to have non-zero size.")
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {axis}")
    attrs = (kernel, axis, int(k), bool(keepdim))
    return pair(apply(SELECTED, input, attrs=attrs), apply(SELECTED_INDEX, input, attrs=attrs))


@SELECTED.publish(Names(function=("kthvalue",), method=("kthvalue",)))
def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):
    """The k-th smallest entry along ``dim`` (NaN largest) and its position: among equal values the
    one PyTorch's quickselect stops at.  The gradient goes to that entry."""
    return _select("kthvalue", input, k, dim, keepdim, KthvalueReturn)


@SELECTED.publish(Names(function=("mode",), method=("mode",)))
def mode(input, dim: int = -1, keepdim: bool = False):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the position
    of it PyTorch's kernel reports (the last of them after its std::sort)."""
    return _select("mode", input, 1, dim, keepdim, ModeReturn)


@SORTED.publish(Names(function=("msort",), method=("msort",)))
def msort(input):
    """The values sorted along the first dim."""
    return sort(input, 0)[0]


# ------------------------------------------------------------------------------ quantile

INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _q_tensor(input, q):
    """q as a tensor of the input's dtype, with PyTorch's checks (its values read at once)."""
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if not input.dtype.is_floating_point or input.dtype is dtypes.float16:
            raise RuntimeError("quantile() input tensor must be either float or double dtype")
        if q.dtype is not input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        values = _values(q)
        if values is not None and ((values < 0) | (values > 1)).any():
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        return q
    if not isinstance(q, numbers.Real) or not 0 <= q <= 1:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
    if not input.dtype.is_floating_point or input.dtype is dtypes.float16:
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    return tensor(float(q), dtype=input.dtype)


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    """PyTorch's quantile_compute: the sorted values along the dim (last), the ranks q * (n - 1)
    (n: the values that are not NaN, for nanquantile; a slice with a NaN is NaN for quantile) as
    the interpolation rounds them, and the values at the ranks below and above, lerped."""
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    q = _q_tensor(input, q)
    if interpolation not in INTERPOLATIONS:
        raise RuntimeError(f"quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    axis = None if dim is None else dim_index(dim, input.ndim)
    x = reshape(input, -1) if axis is None else input.movedim(axis, -1) if input.ndim else reshape(input, 1)
    ordered = sort(x, -1)[0]
    last = ordered.shape[-1] - 1
    q_row = reshape(q, -1)
    if ignore_nan:
        ranks = q_row * (ordered.isnan().logical_not().sum(-1, keepdim=True) - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        ranks = (q_row * last).masked_fill(ordered.isnan().any(-1, keepdim=True), last)
    ranks = {"lower": ranks.floor, "higher": ranks.ceil, "nearest": ranks.round}.get(interpolation, lambda: ranks)()
    below = ranks.long()
    result = ordered.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weights = ranks.new_full(ranks.shape, 0.5) if interpolation == "midpoint" else ranks - below
        result = result.lerp(ordered.gather(-1, ranks.ceil().long()), weights)
    return _quantile_shape(result, input, q, axis, keepdim)


def _quantile_shape(result, input, q, axis, keepdim):
    """(q's entries,) + the reduced shape: the dim kept as 1 (every dim, without one) if keepdim."""
    kept = list(input.shape)
    if keepdim:
        kept = [1] * len(kept) if axis is None else kept[:axis] + [1] + kept[axis + 1:]
    else:
        kept = [] if axis is None else kept[:axis] + kept[axis + 1:]
    if q.ndim:
        result, kept = result.movedim(-1, 0), [q.shape[0], *kept]
    return apply(QUANTILE_SHAPE, result, attrs=(tuple(kept),))


# PyTorch's quantile ends with an in-place squeeze_ of its result (SqueezeBackward4)
QUANTILE_SHAPE = register(Op("quantile_shape", "SqueezeBackward4", lambda nodes, shape: (shape, nodes[0].dtype),
                             lambda p, node, x: p.reshape(x, node.shape), saves=False))


@SORTED.publish(Names(function=("quantile",), method=("quantile",)))
def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The q-th quantiles along ``dim`` (of all entries without one), NaN where a slice has a NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


@SORTED.publish(Names(function=("nanquantile",), method=("nanquantile",)))
def nanquantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """quantile of the entries that are not NaN (NaN where a slice has none)."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


# ---------------------------------------------------------------------- cov and corrcoef


def _weights(name: str, weights, observations: int, integral: bool):
    if weights.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                           f"{weights.ndim} dimensions")
    if weights.dtype.is_floating_point == integral:
        kind = "integral" if integral else "floating point"
        raise RuntimeError(f"cov(): expected {name} to have {kind} dtype but got {name} with "
                           f"{dtypes.torch_name(weights.dtype)} dtype")
    if weights.numel() != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input but "
                           f"got {weights.numel()} != {observations}")
    values = _values(weights)
    if values is not None and values.size and values.min() < 0:
        raise RuntimeError(f"cov(): {name} cannot be negative")


def _degrees(x, correction, w, aweights):
    """PyTorch's normalization: the weights' sum less the correction (for aweights, the correction
    times sum(w * aweights) / sum(w)), zero, with a warning, where that is not positive."""
    total = w.sum() if w is not None else x.shape[1]
    if w is not None and aweights is not None and correction != 0:
        factor = total - correction * (w * aweights).sum() / total
    else:
        factor = total - correction
    if (factor <= 0 if not isinstance(factor, Tensor) else bool((factor <= 0).item())):
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=4)
        factor = factor * 0
    return total, factor


@SORTED.publish(Names(function=("cov",), method=("cov",)))
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the rows (variables) over the columns (observations), weighted by frequency
    and importance: PyTorch's formula, so its gradient."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = reshape(input, 1, -1) if input.ndim < 2 else input
    observations = x.shape[1]
    if fweights is not None:
        _weights("fweights", fweights, observations, True)
    if aweights is not None:
        _weights("aweights", aweights, observations, False)
    w = fweights if aweights is None else aweights if fweights is None else fweights * aweights
    total, factor = _degrees(x, correction, w, aweights)
    mean = (x if w is None else x * w).sum(1) / total
    centered = x - mean.unsqueeze(1)
    return (centered.matmul((centered if w is None else centered * w).t()) / factor).squeeze()


@SORTED.publish(Names(function=("corrcoef",), method=("corrcoef",)))
def corrcoef(input):
    """cov scaled by the standard deviations on both sides, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    spread = c.diagonal().sqrt()
    return ((c / spread.reshape(-1, 1)) / spread.reshape(1, -1)).clip(-1, 1)

