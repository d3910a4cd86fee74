"""Advanced indexing and its relatives: ``x[key]`` and ``x[key] = v`` with integer tensors, lists, ranges
and masks, gather, scatter, scatter_add, index_select, masked_fill and masked_select.

Index arrays are inputs of the op, not attributes: a loop that indexes with new values each step
records one node per call and reuses one compiled program.  PyTorch checks index values eagerly,
so they are read when the op is recorded (a computed index is computed for it, except inside a
JAX trace) and an out-of-range index raises there, recording nothing.  A mask's result shape
depends on its values: its positions (symgrad.ops.positions) are computed then and become the
index arrays.
"""
from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes, engine, selection
from symgrad.inplace import OVERLAP, apply_inplace
from symgrad.storage import partly_shared
from symgrad.grad_mode import is_grad_enabled
from symgrad.ir import broadcast_shapes, ieee, index_shape, python_index, select
from symgrad.ir import indexing as IX
from symgrad.nodes import CONST, LEAF, leaf
from symgrad.ops.dims import dim_index
from symgrad.ops.moving_starts import SpecStarts
from symgrad.ops.positions import positions
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.ops.shape import INDEX, refuse_expand
from symgrad.tensor import Tensor, apply
from symgrad.uploads import from_host

# ----------------------------------------------------------------------- reading keys

SEQUENCE_AS_TUPLE = ("Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed "
                     "in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be interpreted "
                     "as tensor index, x[torch.tensor(seq)], which will result either in an error or a different "
                     "result")
UINT8_MASK = "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead."


def _as_tuple(key) -> tuple:
    """PyTorch's reading of a key: a short list holding sequences, slices, None, ... or tensors is
    (deprecated) a tuple of indices; any other list is one index."""
    if isinstance(key, tuple):
        return key
    if isinstance(key, list) and len(key) < 32 and any(
            isinstance(k, (Tensor, list, tuple, range, slice)) or k is None or k is Ellipsis for k in key):
        warnings.warn(SEQUENCE_AS_TUPLE, UserWarning, stacklevel=4)
        return tuple(key)
    return (key,)


def _values(tensor: Tensor):
    """A tensor's values for an eager check: None inside a JAX trace."""
    values = engine.concrete_array(tensor._node)
    return None if values is None else np.asarray(values)


def _array_index(values: np.ndarray):
    """An index given as a list or NumPy array: booleans are a mask, numbers are truncated to int64."""
    if values.dtype == bool:
        return Tensor(leaf(from_host(values), dtypes.bool_))
    if values.dtype.kind not in "iuf" and values.size:
        raise TypeError(f"new(): invalid data type '{values.dtype.name}'")
    return Tensor(leaf(from_host(values.astype(np.int64)), dtypes.int64))


def _item(k):
    """One index as ("int", i), ("bool", b), ("tensor", t), ("mask", t), None, Ellipsis or a slice."""
    if k is None or k is Ellipsis or isinstance(k, slice):
        return k
    if isinstance(k, (bool, np.bool_)):
        return ("bool", bool(k))
    if isinstance(k, (int, np.integer)):
        return ("int", int(k))
    if isinstance(k, (list, tuple, range, np.ndarray)):
        k = _array_index(np.asarray(k))
    if not isinstance(k, Tensor):
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                         f"indices (got {type(k).__name__})")
    if k.dtype.is_floating_point or k.ndim and k.dtype in (dtypes.int8, dtypes.int16):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if k.ndim == 0:
        values = _values(k)
        if values is None:
            raise NotImplementedError("symgrad: a 0-d index tensor inside a traced function; index with an int")
        return ("bool", bool(values)) if k.dtype in (dtypes.bool_, dtypes.uint8) else ("int", int(values))
    if k.dtype is dtypes.uint8:  # PyTorch's deprecated spelling of a mask
        warnings.warn(UINT8_MASK, UserWarning, stacklevel=5)  # (the list comprehension is a frame)
        k = k != 0
    return ("mask" if k.dtype is dtypes.bool_ else "tensor", k)


_SKIPPED = slice(None)  # an axis an ellipsis stands for (a second ellipsis may run past the last axis)


class Key:
    """A key read as PyTorch applies it: basic indexing first (``spec``, an ir index spec over the
    tensor), then integer arrays ``indices`` at ``axes`` of that result (masks become their
    positions, Python booleans a new axis indexed by [0] or [])."""

    def __init__(self, shape, key):
        items = [_item(k) for k in _as_tuple(key)]
        consuming = sum(1 if not isinstance(k, tuple) or k[0] != "mask" else k[1].ndim
                        for k in items if k is not None and k is not Ellipsis and not (
                            isinstance(k, tuple) and k[0] == "bool"))
        if consuming > len(shape):
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        while Ellipsis in items:  # each one skips the axes the others leave (PyTorch reads a second one so too)
            at = items.index(Ellipsis)
            items[at:at + 1] = [_SKIPPED] * (len(shape) - consuming)
        self.spec, self.indices, self.axes, self.sizes = [], [], [], []
        self.overrun = 0  # axes a second ellipsis skipped past the last one
        d = 0
        for item in items:
            d = self._read(shape, d, item)
        self.viewed = any(item[0] != 1 or item[1:] != (0, n, 1) for item, n in zip(self.spec, self._sizes(shape)))
        if not self.viewed:  # full slices only: the tensor itself, as PyTorch skips them
            self.spec = []
        self.view_shape = index_shape(shape, self.spec)

    def _sizes(self, shape):
        """The size of the tensor's axis each spec item reads (None for a new axis)."""
        d = 0
        for item in self.spec:
            if item[0] == 2:
                yield None
            else:
                yield shape[d]
                d += 1

    def _read(self, shape, d, item):
        """Add one index; ``d`` is the tensor's next axis, the result's axis is len(spec) minus ints."""
        out_axis = sum(1 for s in self.spec if s[0] != 0)
        if item is _SKIPPED:
            if d < len(shape):
                return self._read(shape, d, slice(None))
            self.overrun += 1
            return d + 1
        if self.overrun and (item is None or item[0] == "bool"):  # PyTorch's unsqueeze past the end
            raise IndexError(f"Dimension out of range (expected to be in range of [{-out_axis - 1}, {out_axis}], but "
                             f"got {out_axis + self.overrun})")
        if item is None:
            self.spec.append((2,))
            return d
        if d >= len(shape) and (isinstance(item, slice) or item[0] in ("tensor", "mask")):  # past a second ellipsis
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        if isinstance(item, slice):
            if item.step is not None and item.step <= 0:
                raise ValueError("step must be greater than zero")
            self.spec.append((1, *item.indices(shape[d])))
            return d + 1
        kind, value = item
        if kind == "int":
            size = shape[d] if d < len(shape) else 0
            if not -size <= value < size:
                raise IndexError(f"index {value} is out of bounds for dimension {d} with size {size}")
            self.spec.append((0, value % size))
            return d + 1
        if kind == "bool":
            self.spec.append((2,))
            self._add(Tensor(leaf(jnp.zeros(1 if value else 0, jnp.int64), dtypes.int64)), out_axis, 1)
            return d
        if kind == "tensor":
            self.spec.append((1, 0, shape[d], 1))
            self._add(value, out_axis, shape[d])
            return d + 1
        return self._mask(shape, d, out_axis, value)

    def _mask(self, shape, d, out_axis, mask):
        """A mask over axes d.. of the tensor: its positions index them."""
        view = index_shape(shape, self.spec)
        for j, n in enumerate(mask.shape):
            if n != shape[d + j]:
                raise IndexError(f"The shape of the mask {list(mask.shape)} at index {j} does not match the shape of "
                                 f"the indexed tensor {list(view)} at index {out_axis + j}")
        for j, found in enumerate(positions(mask, "indexing with a mask")):
            self.spec.append((1, 0, shape[d + j], 1))
            self.indices.append(found)
            self.axes.append(out_axis + j)
            self.sizes.append(shape[d + j])
        return d + mask.ndim

    def _add(self, index, axis, size):
        self.indices.append(index)
        self.axes.append(axis)
        self.sizes.append(size)

    def check(self):
        """PyTorch's checks of the index arrays: broadcastable together, every value in range."""
        return self.check_shapes().check_values()

    def check_shapes(self):
        shapes = [tuple(i.shape) for i in self.indices]
        try:
            broadcast_shapes(*shapes)
        except ValueError:
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                             + ", ".join(str(list(s)) for s in shapes)) from None
        return self

    def check_values(self):
        for number, (index, size) in enumerate(zip(self.indices, self.sizes)):
            if selection.all_within(index, -size, size):  # drawn from indices all in bounds (a shuffled batch)
                continue
            values = _values(index)
            bad = None if values is None else selection.outside(values, -size, size)
            if bad is not None and bad.size:
                raise IndexError(f"index {int(bad.flat[0])} is out of bounds for dimension {number} with size {size}")
        return self

    def taken_shape(self):
        return IX.advanced_shape(self.view_shape, [tuple(i.shape) for i in self.indices], self.axes)


# ------------------------------------------------------------------------- x[key]


def _infer_take(nodes, spec, axes):
    view = index_shape(nodes[0].shape, spec)
    return IX.advanced_shape(view, [n.shape for n in nodes[1:]], axes), nodes[0].dtype


def _build_take(p, node, x, *indices):
    spec, axes = node.attrs
    return IX.take(p, p.index(x, spec) if spec else x, indices, axes)


def _reference_take(x, *args):
    """x[spec] then the index arrays at their axes, for NumPy, JAX and PyTorch alike."""
    *indices, spec, axes = args
    view = x[python_index(spec)] if spec else x
    return view[_advanced_key(indices, axes)]


TAKE = register(Op("take", "IndexBackward0", _infer_take, _build_take, saves=False, selects=True,
                   reference=_reference_take, torch_fn=lambda t, x, *args: x[_torch_key(args[-2], args[:-2], args[-1])],
                   examples=(Example(((5, 5), (4,), (4,)), ((), (0, 1))),
                             Example(((2, 5, 5), (2, 3), (3,)), ((), (1, 2))),
                             Example(((5, 3, 5), (2, 1), (3,)), ((), (0, 2))),
                             Example(((3, 5, 5), (2, 2), (2,)), (((0, 1), (2,)), (1, 2)))),
                   domain=("real", "label", "label")))


@TAKE.publish(Names(method=("__getitem__",)))
def getitem(input, key):
    """``x[key]``: PyTorch's basic indexing, and its advanced indexing with integer tensors, lists and
    masks (one node either way)."""
    read = Key(tuple(input.shape), key).check()
    if not read.indices:
        return apply(INDEX, input, attrs=(tuple(read.spec),))
    return apply(TAKE, input, *read.indices, attrs=(tuple(read.spec), tuple(read.axes)))


# --------------------------------------------------------------------- x[key] = v


def _infer_put(nodes, spec, axes, name):
    return nodes[0].shape, nodes[0].dtype


def _fit(p, v, shape, dtype):
    """The written value in the shape it is written to (a number stays one)."""
    v = p.astype(v, dtype)
    if v.is_Number:
        return v
    have = p.shape_of(v)
    while len(have) > len(shape) and have[0] == 1:
        have = have[1:]
    return p.materialize(p.reshape(v, have), shape, dtype)


def _build_put(p, node, x, v, *indices):
    """Basic indexing's view written with index_set, the arrays' positions in it with put."""
    spec, axes, name = node.attrs
    dtype, view_shape = node.dtype.name, index_shape(node.shape, spec)
    if not axes:
        return IX.index_set(p, x, _fit(p, v, view_shape, dtype), spec)
    view = p.index(x, spec) if spec else x
    taken = IX.advanced_shape(view_shape, [n.shape for n in node.inputs[2:]], axes)
    new = IX.put(p, view, _fit(p, v, taken, dtype), indices, axes)
    return IX.index_set(p, x, new, spec) if spec else new


def _advanced_key(indices, axes) -> tuple:
    key = [slice(None)] * (max(axes) + 1)
    for index, axis in zip(indices, axes):
        key[axis] = index
    return tuple(key)


def _torch_key(spec, indices, axes) -> tuple:
    """The key a user writes: the spec's integers and slices, the arrays at their axes of the result."""
    key, axis, at = [], 0, dict(zip(axes, indices))
    for item in python_index(spec):
        if not isinstance(item, int):
            item = at.get(axis, item)
            axis += 1
        key.append(item)
    return (*key, *(at.get(a, slice(None)) for a in range(axis, max(axes, default=-1) + 1)))


def _torch_put(t, x, v, *args):
    """``x[key] = v`` on a copy of x, for the generic tests."""
    *indices, spec, axes, name = args
    out = x * 1
    out[_torch_key(spec, indices, axes)] = v
    return out


def _reference_put(x, v, *args):
    """The JAX reference: the arrays' positions set in the view, the view set in x."""
    *indices, spec, axes, name = args
    x, basic = jnp.asarray(x), python_index(spec)
    view = x[basic].at[_advanced_key(indices, axes)].set(v)
    return x.at[basic].set(view)


PUT = register(Op("put", lambda nodes, spec, axes, name: name, _infer_put, _build_put, saves=False, starts=SpecStarts,
                  reference=_reference_put, torch_fn=_torch_put,
                  examples=(Example(((5, 3), (1, 3), (1,)), ((), (0,), "IndexPutBackward0")),
                            Example(((3, 5), (1,), (1,)), (((0, 1),), (0,), "CopySlices")),
                            Example(((4, 5), (2, 1), (1,)), (((1, 1, 4, 2),), (1,), "CopySlices"))),
                  domain=("real", "real", "label")))


def _check_value_shape(value_shape, dtype, target, advanced: bool):
    """PyTorch's errors for a value that does not broadcast to where it is written."""
    have = tuple(value_shape)
    while have and have[0] == 1:  # PyTorch drops every leading 1 first (and names the value without them)
        have = have[1:]
    fits = len(have) <= len(target) and all(a in (1, b) for a, b in zip(reversed(have), reversed(target)))
    if fits:
        return
    if advanced:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value_shape)} cannot be broadcast to indexing "
                           f"result of shape {list(target)}")
    refuse_expand(have, target, dtype, RuntimeError)


@PUT.publish(Names(method=("__setitem__",)))
def setitem(tensor, key, value):
    """``x[key] = value``, in place: PyTorch's copy into a view (CopySlices), index_put_
    (IndexPutBackward0), or a fill or copy of the whole tensor (FillBackward3, CopyBackwards)."""
    read = Key(tuple(tensor.shape), key).check_shapes()
    target = read.taken_shape() if read.indices else read.view_shape
    if not isinstance(value, Tensor):
        if isinstance(value, int) and not -2 ** 63 <= value < 2 ** 63:  # PyTorch's indexing unpacks it first
            raise ValueError("Overflow when unpacking long long")
        value = dtypes.number_in(value, tensor.dtype)
    else:
        _check_value_shape(value.shape, value.dtype, target, bool(read.indices))
        if read.indices and value.dtype is not tensor.dtype:
            raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                               f"{dtypes.torch_name(tensor.dtype)} for the destination and "
                               f"{dtypes.torch_name(value.dtype)} for the source.")
    read.check_values()  # last, as PyTorch's kernel checks them
    name = _setitem_name(read, value, tensor.ndim)
    node = tensor._node
    if is_grad_enabled() and node.requires_grad and node.op is LEAF:
        view = "a view of " if name == "CopySlices" else ""
        raise RuntimeError(f"{view}a leaf Variable that requires grad is being used in an in-place operation.")
    if isinstance(value, Tensor) and not read.indices and partly_shared(tensor, value, python_index(read.spec)):
        raise RuntimeError(OVERLAP)
    return apply_inplace(tensor, "__setitem__", lambda: apply(PUT, tensor, value, *read.indices,
                                                              attrs=(tuple(read.spec), tuple(read.axes), name)))


def _setitem_name(read, value, ndim) -> str:
    """PyTorch's backward for the way it writes: into a view, index_put_, or fill_ or copy_ of the whole."""
    if read.viewed:
        return "CopySlices"
    if read.indices:
        return "IndexPutBackward0"
    filled = ndim and (not isinstance(value, Tensor) or value.ndim == 0)
    return "FillBackward3" if filled else "CopyBackwards"


# ------------------------------------------------------------------ along one axis


def _check_index_dtype(index, name, allowed="int32/int64"):
    if index.dtype not in (dtypes.int32, dtypes.int64):
        raise RuntimeError(f"{name}(): Expected dtype {allowed} for index")


def _check_in_range(index, dim, size):
    values = _values(index)
    bad = None if values is None else values[(values < 0) | (values >= size)]
    if bad is not None and bad.size:
        raise RuntimeError(f"index {int(bad.flat[0])} is out of bounds for dimension {dim} with size {size}")


def _cut_spec(have, shape, axis=None):
    """Basic indexing that cuts ``have`` to ``shape`` on every axis but ``axis``: PyTorch's gather
    reads, and scatter writes, only the index's extent."""
    return tuple((1, 0, m if d == axis else n, 1) for d, (m, n) in enumerate(zip(have, shape)))


def _cut(x, shape, axis=None):
    return x[python_index(_cut_spec(x.shape, shape, axis))]


def _cut_to(p, x, shape, axis=None):
    have = p.shape_of(x)
    spec = _cut_spec(have, shape, axis)
    return x if index_shape(have, spec) == tuple(have) else p.index(x, spec)


def _as_1d(p, a):
    """A 0-dim operand of gather or scatter as 1-dim (PyTorch's ``ensure_nonempty_dim``): a 1-dim
    input takes a 0-dim index, and a 0-dim input a 1-dim index."""
    return a if a.is_Number or p.shape_of(a) else p.reshape(a, (1,))


def _build_gather(p, node, x, index):
    (axis,) = node.attrs
    if len(node.inputs[0].shape) != len(node.shape) or not node.shape:
        return p.reshape(IX.gather(p, _as_1d(p, x), _as_1d(p, index), 0), node.shape)
    return IX.gather(p, _cut_to(p, x, node.shape, axis), index, axis)


GATHER = register(Op("gather", "GatherBackward0", lambda nodes, axis: (nodes[1].shape, nodes[0].dtype), _build_gather,
                    selects=True,
                     reference=lambda x, index, axis: jnp.take_along_axis(_cut(x, index.shape, axis), index, axis),
                     torch_fn=lambda t, x, index, axis: t.gather(x, axis, index),
                     examples=(Example(((3, 5), (2, 4)), (1,)), Example(((5, 3), (4, 3)), (0,)),
                               Example(((5, 4), (6, 2)), (0,))),
                     domain=("real", "label")))


def _check_along(name, input, dim, index, src=None):
    """PyTorch's gather/scatter checks: index dtype and rank, extents, and values in range."""
    _check_index_dtype(index, name)
    if max(index.ndim, 1) != max(input.ndim, 1):
        raise RuntimeError(f"Index tensor must have the same number of dimensions as "
                           f"{'input' if name == 'gather' else 'self'} tensor")
    axis = dim_index(dim, input.ndim)
    too_big = any(i > n for d, (i, n) in enumerate(zip(index.shape, input.shape)) if d != axis)
    if src is not None:
        if too_big or any(i > n for i, n in zip(index.shape or (1,), src.shape or (1,))):
            raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(input.shape)} "
                               f"apart from dimension {axis} and to be no larger size than src {list(src.shape)}")
    elif too_big:
        at = next(d for d, (i, n) in enumerate(zip(index.shape, input.shape)) if d != axis and i > n)
        raise RuntimeError(f"Size does not match at dimension {at} expected index {list(index.shape)} to be no larger "
                           f"than self {list(input.shape)} apart from dimension {axis}")
    _check_in_range(index, axis, input.shape[axis] if input.ndim else 1)
    return axis


@GATHER.publish(Names(function=("gather",), method=("gather",)))
def gather(input, dim, index, *, sparse_grad=False):
    return apply(GATHER, input, index, attrs=(_check_along("gather", input, dim, index),))


@GATHER.publish(Names(function=("take_along_dim",), method=("take_along_dim",)))
def take_along_dim(input, indices, dim=None):
    """NumPy's ``take_along_axis``: a gather whose input and indices broadcast (expanded) in every dim
    but ``dim``; without ``dim``, a gather from the flattened input."""
    if indices.dtype is not dtypes.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{dtypes.torch_name(indices.dtype)}")
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    axis = dim_index(dim, input.ndim)
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    others = [list(t.shape[:axis]) + [1] + list(t.shape[axis + 1:]) for t in (input, indices)]
    try:
        common = list(broadcast_shapes(*others))
    except ValueError as error:
        raise RuntimeError(str(error)) from None
    input, indices = (t if list(t.shape) == common[:axis] + [t.shape[axis]] + common[axis + 1:]
                      else t.expand(*common[:axis], t.shape[axis], *common[axis + 1:]) for t in (input, indices))
    return gather(input, axis, indices)


def _build_scatter(p, node, x, index, src):
    axis, how = node.attrs
    x, index, src = (_as_1d(p, a) for a in (x, index, src))
    if not src.is_Number:
        src = _cut_to(p, src, p.shape_of(index))
    return p.reshape(IX.scatter_along(p, x, index, src, axis, how), node.shape)


def _scatter_name(nodes, axis, how):
    if how == "add":
        return "ScatterAddBackward0"
    return "ScatterBackward1" if nodes[2].op is CONST else "ScatterBackward0"


SCATTER = register(Op("scatter", _scatter_name, lambda nodes, axis, how: (nodes[0].shape, nodes[0].dtype),
                      _build_scatter, saves=False,
                      reference=lambda x, index, src, axis, how: _reference_scatter(x, index, src, axis, how),
                      torch_fn=lambda t, x, index, src, axis, how: (
                          t.scatter_add(x, axis, index, src) if how == "add" else t.scatter(x, axis, index, src)),
                      examples=(Example(((3, 5), (2, 3), (2, 3)), (1, "add")),
                                Example(((5, 3), (4, 2), (4, 2)), (0, "add")),
                                Example(((3, 5), (3, 1), (3, 1)), (1, "set"))),
                      domain=("real", "label", "real")))


def _reference_scatter(x, index, src, axis, how):
    x = jnp.asarray(x)
    coordinates = tuple(index if d == axis else jnp.indices(index.shape, sparse=True)[d] for d in range(index.ndim))
    src = _cut(src, index.shape)
    return x.at[coordinates].add(src) if how == "add" else x.at[coordinates].set(src)


@SCATTER.publish(Names(function=("scatter",), method=("scatter",), inplace=("scatter_",)))
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    if reduce is not None:
        raise NotImplementedError("scatter(reduce=...) is not supported by symgrad; use scatter_add")
    src = value if src is None else src
    if isinstance(src, Tensor) and src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    axis = _check_along("scatter", input, dim, index, src if isinstance(src, Tensor) else None)
    if not isinstance(src, Tensor):
        src = dtypes.number_in(src, input.dtype)
    return apply(SCATTER, input, index, src, attrs=(axis, "set"))


@SCATTER.publish(Names(function=("scatter_add",), method=("scatter_add",), inplace=("scatter_add_",)))
def scatter_add(input, dim, index, src):
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_add(): argument 'src' (position 3) must be Tensor, not {type(src).__name__}")
    if src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    return apply(SCATTER, input, index, src, attrs=(_check_along("scatter_add", input, dim, index, src), "add"))


def _build_index_select(p, node, x, index):
    (axis,) = node.attrs
    x_shape = node.inputs[0].shape
    if not x_shape:
        return p.reshape(IX.take(p, p.reshape(x, (1,)), [p.reshape(index, (1,))], (0,)), ())
    return IX.take(p, x, [p.reshape(index, (node.shape[axis],))], (axis,))


def _infer_index_select(nodes, axis):
    x, index = nodes
    if not x.shape:
        return (), x.dtype
    count = int(np.prod(index.shape))
    return (*x.shape[:axis], count, *x.shape[axis + 1:]), x.dtype


INDEX_SELECT = register(Op("index_select", "IndexSelectBackward0", _infer_index_select, _build_index_select,
                          selects=True,
                           saves=False, reference=lambda x, index, axis: jnp.take(x, index, axis),
                           torch_fn=lambda t, x, index, axis: t.index_select(x, axis, index),
                           examples=(Example(((5, 3), (4,)), (0,)), Example(((2, 5), (7,)), (1,))),
                           domain=("real", "label")))


@INDEX_SELECT.publish(Names(function=("index_select",), method=("index_select",)))
def index_select(input, dim, index):
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index.dtype not in (dtypes.int32, dtypes.int64):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    axis = dim_index(dim, input.ndim)
    if input.ndim == 0 and index.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s)")
    size = input.shape[axis] if input.ndim else 1
    values = _values(index)
    bad = None if values is None else values[(values < 0) | (values >= size)]
    if bad is not None and bad.size:
        if axis == 1:  # PyTorch's CPU kernel for dim 1 words it otherwise
            raise RuntimeError(f"INDICES element is out of DATA bounds, id={int(bad.flat[0])} axis_dim={size}")
        raise IndexError("index out of range in self")
    return apply(INDEX_SELECT, input, index, attrs=(axis,))


# ------------------------------------------------------------------------------ masks

def _infer_masked_fill(nodes):
    x, mask, value = nodes
    if mask.dtype is not dtypes.bool_:
        raise ValueError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                         f"{dtypes.type_id(mask.dtype)}")
    if value.shape:
        raise ValueError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                         f"{len(value.shape)} dimension(s).")
    return broadcast_shapes(mask.shape, x.shape), x.dtype


def _build_masked_fill(p, node, x, mask, value):
    value = p.astype(value, node.dtype.name) if not value.is_Number else value
    return p.assign(select(mask, value, x), node.shape, node.dtype.name, "masked_fill")


MASKED_FILL = register(Op("masked_fill", lambda nodes: "MaskedFillBackward0" if nodes[2].op is CONST
                          else "MaskedFillBackward1", _infer_masked_fill, _build_masked_fill, saves=False,
                          reference=lambda x, mask, value: jnp.where(mask, value, x),
                          torch_fn=lambda t, x, mask, value: x.masked_fill(mask, value),
                          examples=(Example(((3, 4), (3, 4), ()), scalars={2: -1.5}), Example(((3, 4), (4,), ())),
                                    Example(((4,), (3, 4), ()))),
                          domain=("real", "bool", "real"), elementwise=True))


@MASKED_FILL.publish(Names(function=("masked_fill",), method=("masked_fill",), inplace=("masked_fill_",)))
def masked_fill(input, mask, value):
    if not isinstance(value, Tensor):
        value = dtypes.number_in(value, input.dtype)
    return apply(MASKED_FILL, input, mask, value)


def _infer_masked_select(nodes, shape):
    return (nodes[1].shape[0],), nodes[0].dtype


def _build_masked_select(p, node, x, *positions):
    (shape,) = node.attrs
    wide = p.materialize(p.reshape(x, (1,)) if not shape else x, shape or (1,), node.dtype.name)
    return IX.take(p, wide, positions, tuple(range(len(positions))))


MASKED_SELECT = register(Op("masked_select", "MaskedSelectBackward0", _infer_masked_select, _build_masked_select,
                            saves=False))


@MASKED_SELECT.publish(Names(function=("masked_select",), method=("masked_select",)))
def masked_select(input, mask):
    if mask.dtype is not dtypes.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    try:
        shape = broadcast_shapes(tuple(mask.shape), tuple(input.shape))
    except ValueError as error:
        raise RuntimeError(str(error)) from None
    return apply(MASKED_SELECT, input, *positions(mask, "masked_select", shape), attrs=(shape,))


def _build_index_fill(p, node, x, index, value):
    (axis,) = node.attrs
    if not node.shape:  # 0-d: one element along an axis of its own
        x, index = p.reshape(x, (1,)), p.reshape(index, (1,))
    taken = list(p.shape_of(x))
    taken[axis] = p.shape_of(index)[0] if p.shape_of(index) else 1
    index = p.reshape(index, (taken[axis],))
    value = _fit(p, value, tuple(taken), node.dtype.name)
    return p.reshape(IX.put(p, x, value, [index], (axis,)), node.shape)


INDEX_FILL = register(Op("index_fill", lambda nodes, axis: "IndexFillBackward0" if nodes[2].op is CONST
                         else "IndexFillBackward1", lambda nodes, axis: (nodes[0].shape, nodes[0].dtype),
                         _build_index_fill, saves=False,
                         reference=lambda x, index, value, axis: jnp.asarray(x).at[
                             (slice(None),) * axis + (index,)].set(value),
                         torch_fn=lambda t, x, index, value, axis: x.index_fill(axis, index, value),
                         examples=(Example(((3, 5), (1,), ()), (1,), scalars={2: -2.5}),
                                   Example(((5, 3), (1,), ()), (0,))),
                         domain=("real", "label", "real")))


@INDEX_FILL.publish(Names(function=("index_fill",), method=("index_fill",), inplace=("index_fill_",)))
def index_fill(input, dim, index, value):
    """Positions along ``dim`` filled with ``value``; a position given twice is filled once (PyTorch's
    gradient of a tensor value counts it once)."""
    if index.dtype is not dtypes.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    axis = dim_index(dim, input.ndim)
    size = input.shape[axis] if input.ndim else 1
    values = _values(index)
    if values is not None:
        bad = values[(values < -size) | (values >= size)]
        if bad.size:
            raise IndexError(f"index {int(bad.flat[0])} is out of bounds for dimension {axis} with size {size}")
        index = Tensor(leaf(from_host(np.unique(values.reshape(-1) % max(size, 1))), dtypes.int64))
    if not isinstance(value, Tensor):
        value = dtypes.number_in(value, input.dtype)
    return apply(INDEX_FILL, input, index, value, attrs=(axis,))


# ------------------------------------------------- writes that add, and positions in the flat tensor


def _build_put_at(p, node, x, v, *indices):
    """v set (``how`` "set") or added times alpha ("add") at the arrays' positions of x, or of x
    read as one axis (``flat``: put_, and 0-d tensors)."""
    axes, how, alpha, flat, _ = node.attrs
    dtype, shape = node.dtype.name, node.shape
    if flat or not shape:
        x = p.reshape(x, (int(np.prod(shape)),))
        indices = [p.reshape(i, (int(np.prod(n.shape)),)) for i, n in zip(indices, node.inputs[2:])]
    have = p.shape_of(x)
    taken = IX.advanced_shape(have, [p.shape_of(i) for i in indices], axes)
    v = p.reshape(v, taken) if flat or not shape else v
    v = _fit(p, v, taken, dtype)
    if how == "set":
        return p.reshape(IX.put(p, x, v, indices, axes), shape)
    added = p.assign(IX.TakeAdd(p.materialize(v, taken, dtype), *indices, sp.Tuple(*axes), sp.Tuple(*have)),
                     have, dtype, "take_add")
    return p.reshape(p.assign(x + (added if alpha == 1 else ieee.constant(alpha) * added), have, dtype, "added"),
                     shape)


def _reference_put_at(x, v, *args):
    *indices, axes, how, alpha, flat, _ = args
    x = jnp.asarray(x)
    flat = flat or not x.shape
    at = jnp.ravel(x).at if flat else x.at
    key = tuple(jnp.ravel(i) for i in indices) if flat else _advanced_key(indices, axes)
    v = jnp.ravel(v) if flat else v
    out = at[key].set(v) if how == "set" else at[key].add(alpha * v)
    return out.reshape(x.shape)


def _torch_put_at(t, x, v, *args):
    *indices, axes, how, alpha, flat, name = args
    if name == "IndexAddBackward0":
        return x.index_add(axes[0], indices[0], v, alpha=alpha)
    if flat:
        return x.put(indices[0], v, accumulate=how == "add")
    return x.index_put(tuple(indices), v, accumulate=how == "add")


PUT_AT = register(Op("put_at", lambda nodes, axes, how, alpha, flat, name: name,
                     lambda nodes, *attrs: (nodes[0].shape, nodes[0].dtype), _build_put_at,
                     reference=_reference_put_at, torch_fn=_torch_put_at,
                     examples=(Example(((5, 3), (4, 3), (4,)), ((0,), "add", 1, False, "IndexAddBackward0")),
                               Example(((3, 5), (3, 2), (2,)), ((1,), "add", -2.5, False, "IndexAddBackward0")),
                               Example(((3, 4), (5,), (5,)), ((0,), "add", 1, True, "PutBackward0")),
                               Example(((5, 3), (2, 3), (2,)), ((0,), "add", 1, False, "IndexPutBackward0")),
                               Example(((5, 2), (6, 2), (6,)), ((0,), "add", 1, False, "IndexPutBackward0"))),
                     domain=("real", "real", "label")))


@PUT_AT.publish(Names(function=("index_add",), method=("index_add",), inplace=("index_add_",)))
def index_add(input, dim, index, source, *, alpha=1):
    """``source`` times ``alpha`` added at the positions ``index`` gives along ``dim``; a position
    given twice gets both."""
    if index.dtype not in (dtypes.int32, dtypes.int64):
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{dtypes.torch_name(index.dtype)}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_add_(): self ({dtypes.torch_name(input.dtype)}) and source "
                           f"({dtypes.torch_name(source.dtype)}) must have the same scalar type")
    if index.ndim > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{dtypes.torch_name(index.dtype)} and size: {list(index.shape)}")
    axis = dim_index(dim, input.ndim)
    count, along = index.numel(), (source.shape[axis] if source.ndim else 1)
    if count != along:
        raise RuntimeError(f"index_add_(): Number of indices ({count}) should be equal to source.size(dim): "
                           f"({along}), for dim: {axis}")
    if source.ndim != input.ndim or any(a != b for d, (a, b) in enumerate(zip(source.shape, input.shape))
                                        if d != axis):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")
    size = input.shape[axis] if input.ndim else 1
    values = _values(index)
    if (input.ndim <= 1 or alpha != 1) and values is not None and ((values < 0) | (values >= size)).any():
        raise IndexError("index out of range in self")  # PyTorch's kernels for a vector, or that scale the source
    _check_in_range(index, axis, size)
    return apply(PUT_AT, input, source, index, attrs=((axis,), "add", alpha, False, "IndexAddBackward0"))


def _check_flat(name, input, index, source=None):
    """PyTorch's checks of take and put_: a long index, in range of the flat tensor."""
    if index.dtype is not dtypes.int64:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {dtypes.torch_name(index.dtype)}")
    if source is not None:
        if source.dtype is not input.dtype:
            raise RuntimeError(f"{name}(): self and source expected to have the same dtype, but got self.dtype = "
                               f"{dtypes.torch_name(input.dtype)} and source.dtype = {dtypes.torch_name(source.dtype)}")
        if source.numel() != index.numel():
            raise IndexError(f"{name}(): Expected source and index to have the same number of elements, but got "
                             f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    size, values = input.numel(), _values(index)
    bad = None if values is None else selection.outside(values, -size, size)
    if bad is not None and bad.size:
        raise IndexError(f"out of range: tried to access index {int(bad.flat[0])} on a tensor of {size} elements.")


@PUT_AT.publish(Names(function=("put",), method=("put",), inplace=("put_",)))
def put(input, index, source, accumulate=False):
    """``source`` written (added) at the positions ``index`` gives in the tensor read as one axis."""
    _check_flat("put_", input, index, source)
    return apply(PUT_AT, input, source, index, attrs=((0,), "add" if accumulate else "set", 1, True, "PutBackward0"))


def _build_take_flat(p, node, x, index):
    count = int(np.prod(node.inputs[0].shape))
    flat = IX.take(p, p.reshape(x, (count,)), [p.reshape(index, (int(np.prod(node.shape)),))], (0,))
    return p.reshape(flat, node.shape)


TAKE_FLAT = register(Op("take_flat", "TakeBackward0", lambda nodes: (nodes[1].shape, nodes[0].dtype), _build_take_flat,
                        selects=True, reference=lambda x, index: jnp.ravel(jnp.asarray(x))[index],
                        torch_fn=lambda t, x, index: t.take(x, index),
                        examples=(Example(((2, 3), (4,))), Example(((5,), (2, 3)))),
                        domain=("real", "label")))


@TAKE_FLAT.publish(Names(function=("take",), method=("take",)))
def take(input, index):
    """The elements at the positions ``index`` gives in the tensor read as one axis, in index's shape."""
    _check_flat("take", input, index)
    return apply(TAKE_FLAT, input, index)


@PUT_AT.publish(Names(function=("index_put",), method=("index_put",), inplace=("index_put_",)))
def index_put(input, indices, values, accumulate=False):
    """``input[indices] = values`` (IndexPutBackward0), or with ``accumulate`` added there, a
    position given twice getting both."""
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put_(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    for number, index in enumerate(indices):
        if not isinstance(index, Tensor):
            raise TypeError(f"expected Tensor as element {number} in argument 0, but got {type(index).__name__}")
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{dtypes.torch_name(input.dtype)} for the destination and "
                           f"{dtypes.torch_name(values.dtype)} for the source.")
    read = Key(tuple(input.shape), tuple(indices)).check_shapes()
    _check_value_shape(values.shape, values.dtype, read.taken_shape(), True)
    read.check_values()
    how = "add" if accumulate else "set"
    return apply(PUT_AT, input, values, *read.indices, attrs=(tuple(read.axes), how, 1, False, "IndexPutBackward0"))


def _build_masked_scatter(p, node, x, source, *found):
    """The source's first elements, in order, written where the mask holds."""
    (shape,) = node.attrs
    count, taken = int(np.prod(node.inputs[1].shape)), node.inputs[2].shape[0]
    wide = p.materialize(p.reshape(x, (1,)) if not shape else x, shape or (1,), node.dtype.name)
    flat = p.reshape(source, (count,))
    first = flat if taken == count else p.index(flat, ((1, 0, taken, 1),))
    return p.reshape(IX.put(p, wide, first, found, tuple(range(len(found)))), node.shape)


MASKED_SCATTER = register(Op("masked_scatter", "MaskedScatterBackward0",
                             lambda nodes, shape: (shape, nodes[0].dtype), _build_masked_scatter, saves=False))


@MASKED_SCATTER.publish(Names(function=("masked_scatter",), method=("masked_scatter",), inplace=("masked_scatter_",)))
def masked_scatter(input, mask, source):
    if mask.dtype is not dtypes.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{dtypes.torch_name(mask.dtype)}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{dtypes.torch_name(input.dtype)} and {dtypes.torch_name(source.dtype)}")
    try:
        shape = broadcast_shapes(tuple(mask.shape), tuple(input.shape))
    except ValueError as error:
        raise RuntimeError(str(error)) from None
    found = positions(mask, "masked_scatter", shape)
    if found[0].shape[0] > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    return apply(MASKED_SCATTER, input, source, *found, attrs=(shape,))
