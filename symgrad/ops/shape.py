"""Ops that move elements without computing: reshape, transpose, unsqueeze, dtype casts, basic indexing,
joining and splitting, flips, rolls, rotations, repeats, grids, triangles and diagonals (and ``diff``,
a difference of two of its slices)."""
from __future__ import annotations

import math
import warnings

import jax.numpy as jnp
import numpy as np
import sympy as sp

from symgrad import dtypes
from symgrad.ir import index_shape, python_index
from symgrad.ir import indexing as IX
from symgrad.nodes import leaf
from symgrad.ops.dims import dim_index, normalize_dims
from symgrad.ops.moving_starts import SpecStarts
from symgrad.ops.refusals import refused
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.storage import in_order, viewable
from symgrad.tensor import Tensor, apply, record
from symgrad.uploads import from_host


def _infer_reshape(nodes, shape):
    (x,) = nodes
    if math.prod(shape) != math.prod(x.shape):
        raise ValueError(f"shape '{list(shape)}' is invalid for input of size {math.prod(x.shape)}")
    return shape, x.dtype


def _infer_permute(nodes, perm):
    (x,) = nodes
    if sorted(perm) != list(range(len(x.shape))):
        raise ValueError(f"permute: the dims {tuple(perm)} are not an ordering of the input's "
                         f"{len(x.shape)} dimensions")
    return tuple(x.shape[i] for i in perm), x.dtype


def _infer_expand(nodes, shape):
    (x,) = nodes
    refuse_expand(x.shape, tuple(shape), x.dtype)
    return tuple(shape), x.dtype


def refuse_expand(have, target, dtype, error=ValueError):
    """PyTorch's expand errors, in its words, unless each of ``have``'s dims, from the last, is 1
    or ``target``'s size."""
    have, target = tuple(have), tuple(target)
    if len(have) > len(target):
        raise error(f"expand(torch.{dtypes.torch_name(dtype)}Tensor{{{list(have)}}}, size={list(target)}): the "
                    f"number of sizes provided ({len(target)}) must be greater or equal to the number of dimensions "
                    f"in the tensor ({len(have)})")
    for d in range(1, len(have) + 1):
        if have[-d] not in (1, target[-d]):
            raise error(f"The expanded size of the tensor ({target[-d]}) must match the existing size ({have[-d]}) "
                        f"at non-singleton dimension {len(target) - d}.  Target sizes: {list(target)}.  Tensor "
                        f"sizes: {list(have)}")


def _infer_cast(nodes, dtype):
    return nodes[0].shape, dtype


def _squeeze_variant(dims) -> int:
    """PyTorch numbers squeeze's backward by its call: no dim, one dim, or a tuple of dims."""
    return 0 if dims is None else 1 if isinstance(dims, int) else 2


RESHAPE = register(Op("reshape", "ViewBackward0", _infer_reshape, lambda p, node, x: p.reshape(x, node.shape),
                      saves=False, view=True, reference=lambda x, shape: jnp.reshape(x, shape),
                      torch_fn=lambda t, x, shape: x.reshape(shape),
                      examples=(Example(((3, 4),), ((2, 6),)), Example(((6,),), ((3, 1, 2),)))))
UNSAFE_VIEW = register(Op("unsafe_view", "UnsafeViewBackward0", _infer_reshape,
                          lambda p, node, x: p.reshape(x, node.shape), saves=False,
                          reference=lambda x, shape: jnp.reshape(x, shape),
                          torch_fn=lambda t, x, shape: x.t().contiguous().t().reshape(shape),  # a copy, reshaped
                          examples=(Example(((3, 4),), ((2, 6),)),)))  # a reshape of a fresh result: no view
RESHAPE_ALIAS = register(Op("reshape_alias", "ReshapeAliasBackward0", _infer_reshape,
                            lambda p, node, x: p.reshape(x, node.shape), saves=False, view=True,
                            reference=lambda x, shape: jnp.reshape(x, shape),
                            torch_fn=lambda t, x, shape: x.t().contiguous().t().reshape(shape),  # out of order
                            examples=(Example(((3, 4),), ((3, 1, 4),)),)))  # a reshape of such a view, no copy
UNSQUEEZE = register(Op("unsqueeze", "UnsqueezeBackward0", _infer_reshape,
                        lambda p, node, x: p.reshape(x, node.shape), saves=False, view=True,
                        reference=lambda x, shape: jnp.reshape(x, shape),
                        torch_fn=lambda t, x, shape: x.unsqueeze(shape.index(1)),
                        examples=(Example(((3, 4),), ((1, 3, 4),)),)))
SQUEEZE = register(Op("squeeze", lambda nodes, shape, dims: f"SqueezeBackward{_squeeze_variant(dims)}",
                      lambda nodes, shape, dims: _infer_reshape(nodes, shape),
                      lambda p, node, x: p.reshape(x, node.shape), saves=False, view=True,
                      reference=lambda x, shape, dims: jnp.reshape(x, shape),
                      torch_fn=lambda t, x, shape, dims: x.squeeze() if dims is None else x.squeeze(dims),
                      examples=tuple(Example(((3, 1, 4),), ((3, 4), dims)) for dims in (None, 1, (1,)))))
PERMUTE = register(Op("permute", "PermuteBackward0", _infer_permute, lambda p, node, x: p.permute(x, node.attrs[0]),
                      saves=False, view=True, reference=lambda x, perm: jnp.transpose(x, perm),
                      torch_fn=lambda t, x, perm: x.permute(*perm),
                      examples=(Example(((3, 4),), ((1, 0),)), Example(((2, 3, 4),), ((2, 0, 1),)))))
TRANSPOSE = register(Op("transpose", lambda nodes, perm: "TransposeBackward0", _infer_permute,
                        lambda p, node, x: p.permute(x, node.attrs[0]), saves=False, view=True,
                        reference=lambda x, perm: jnp.transpose(x, perm),
                        torch_fn=lambda t, x, perm: x.transpose(*[i for i, p in enumerate(perm) if i != p]),
                        examples=(Example(((3, 4),), ((1, 0),)),)))
T = register(Op("t", "TBackward0", _infer_permute, lambda p, node, x: p.permute(x, node.attrs[0]), saves=False, view=True,
                reference=lambda x, perm: jnp.transpose(x, perm), torch_fn=lambda t, x, perm: x.t(),
                examples=(Example(((3, 4),), ((1, 0),)),)))
T_INPLACE = register(Op("t_", "TBackward1", _infer_permute, lambda p, node, x: p.permute(x, node.attrs[0]), saves=False,
                        view=True, reference=lambda x, perm: jnp.transpose(x, perm),
                        torch_fn=lambda t, x, perm: x.clone().t_(),
                        examples=(Example(((3, 4),), ((1, 0),)), Example(((3,),), ((0,),)))))
# squeeze_, unsqueeze_ and transpose_/swapaxes_/swapdims_: laid out again in place, as t_ (symgrad.ops.views)
RESHAPE_INPLACE = register(Op("reshape_", lambda nodes, shape, name: name,
                              lambda nodes, shape, name: _infer_reshape(nodes, shape),
                              lambda p, node, x: p.reshape(x, node.shape), saves=False, view=True,
                              reference=lambda x, shape, name: jnp.reshape(x, shape),
                              torch_fn=lambda t, x, shape, name: x.clone().squeeze_(),
                              examples=(Example(((3, 1, 4),), ((3, 4), "SqueezeBackward3")),)))
TRANSPOSE_INPLACE = register(Op("transpose_", "TransposeBackward1", _infer_permute,
                                lambda p, node, x: p.permute(x, node.attrs[0]), saves=False, view=True,
                                reference=lambda x, perm: jnp.transpose(x, perm),
                                torch_fn=lambda t, x, perm: x.clone().transpose_(0, 2),
                                examples=(Example(((2, 3, 4),), ((2, 1, 0),)),)))
EXPAND = register(Op("expand", "ExpandBackward0", _infer_expand, lambda p, node, x: p.broadcast_to(x, node.shape),
                     saves=False, view=True, reference=lambda x, shape: jnp.broadcast_to(x, shape),
                     torch_fn=lambda t, x, shape: x.expand(*shape),
                     examples=(Example(((3, 1),), ((2, 3, 4),)),)))
CAST = register(Op("to", "ToCopyBackward0", _infer_cast, lambda p, node, x: p.astype(x, node.dtype.name),
                   saves=False, reference=lambda x, dtype: x.astype(dtype.numpy),
                   torch_fn=lambda t, x, dtype: x.to(dtype),
                   examples=(Example(((3, 4),), (dtypes.float64,)),)))
CLONE = register(Op("clone", "CloneBackward0", lambda nodes: (nodes[0].shape, nodes[0].dtype),
                    lambda p, node, x: p.assign(x, node.shape, node.dtype.name, "clone", fold=False), saves=False,
                    selects=True, reference=lambda x: x, torch_fn=lambda t, x: x.clone(), examples=(Example(((3, 4),)),)))
COPY = register(Op("copy", "CopyBackwards", lambda nodes: (nodes[0].shape, nodes[0].dtype),
                   lambda p, node, x: p.assign(x, node.shape, node.dtype.name, "copy", fold=False), saves=False,
                   reference=lambda x: x, torch_fn=lambda t, x: t.zeros(x.shape, dtype=x.dtype).copy_(x),
                   examples=(Example(((3, 4),)),)))


COPY_OVER = register(Op("copy_over", "CopyBackwards", lambda nodes: (nodes[0].shape, nodes[0].dtype),
                        lambda p, node, old, new: p.assign(new, node.shape, node.dtype.name, "copy", fold=False),
                        saves=False, reference=lambda old, new: new,
                        torch_fn=lambda t, old, new: old.clone().copy_(new),
                        examples=(Example(((3, 4), (3, 4))),)))  # dst.copy_(src) over a history: it gets no gradient


def _index_name(nodes, spec):
    """PyTorch names an indexing by its last step that does something."""
    shape, d, name = nodes[0].shape, 0, "AliasBackward0"
    for item in spec:
        if item[0] == 0:
            name, d = "SelectBackward0", d + 1
        elif item[0] == 1:
            if item[1:] != (0, shape[d], 1):
                name = "SliceBackward0"
            d += 1
        else:
            name = "UnsqueezeBackward0"
    return name


INDEX = register(Op("index", _index_name, lambda nodes, spec: (index_shape(nodes[0].shape, spec), nodes[0].dtype),
                    lambda p, node, x: p.index(x, node.attrs[0]), saves=False, view=True, starts=SpecStarts,
                    reference=lambda x, spec: x[python_index(spec)],
                    torch_fn=lambda t, x, spec: x[python_index(spec)],
                    examples=(Example(((3, 4, 5),), (((0, 1),),)), Example(((3, 4, 5),), (((1, 0, 3, 1), (0, 2)),)),
                              Example(((3, 4, 5),), (((1, 1, 3, 1),),)), Example(((3, 4, 5),), (((1, 0, 3, 2), (2,)),)),
                              Example(((3, 4),), (((2,), (1, 0, 3, 1), (1, 0, 4, 1)),)))))


@INDEX.publish(Names(function=("narrow",), method=("narrow",)))
def narrow(input, dim: int, start, length: int):
    """``length`` entries of ``dim`` from ``start``: a slice, so a view of ``input``."""
    dim, start = _narrowed(input, dim, start, length)
    return input[(slice(None),) * dim + (slice(start, start + length),)]


@INDEX.publish(Names(function=("select",), method=("select",)))
def select(input, dim: int, index: int):
    """Entry ``index`` of ``dim``, that dim dropped: ``x[:, index]`` spelled by dim, a view."""
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim, index = dim_index(dim, input.ndim), int(index)
    size = input.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {dim}")
    return input[(slice(None),) * dim + (index,)]


def _narrowed(input, dim: int, start, length: int) -> tuple:
    """narrow's axis and start (a negative one counts from the end), with PyTorch's checks."""
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    dim = dim_index(dim, input.ndim)
    size, start = input.shape[dim], int(start)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    start += size if start < 0 else 0
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return dim, start


def _build_narrow_copy(p, node, x):
    """The slice, with PyTorch's backward: a slice that runs to the end from a negative start is taken
    again there as ``slice(start, start + length)``, which is empty; a cotangent of one entry along the
    dim broadcasts into it (no gradient), a longer one raises."""
    spec, backward = node.attrs
    value = p.index(x, spec)
    if backward == "exact":
        return value
    if backward == "lost":
        return p.stop_gradient(value)
    return refused(p, value, node.shape, node.dtype.name, backward)


NARROW_COPY = register(Op("narrow_copy", "NarrowCopyBackward0",
                          lambda nodes, spec, backward: (index_shape(nodes[0].shape, spec), nodes[0].dtype),
                          _build_narrow_copy, saves=False, selects=True,
                          reference=lambda x, spec, backward: x[python_index(spec)],
                          torch_fn=lambda t, x, spec, backward: x.narrow_copy(
                              len(spec) - 1, spec[-1][1], spec[-1][2] - spec[-1][1]),
                          examples=(Example(((3, 4),), (((1, 0, 3, 1), (1, 1, 3, 1)), "exact")),)))


@NARROW_COPY.publish(Names(function=("narrow_copy",), method=("narrow_copy",)))
def narrow_copy(input, dim: int, start, length: int):
    """narrow's entries as a new tensor (not a view)."""
    axis, first = _narrowed(input, dim, start, length)
    spec = tuple((1, 0, n, 1) for n in input.shape[:axis]) + ((1, first, first + length, 1),)
    backward = "exact"
    if int(start) < 0 and int(start) + length == 0 and length:
        backward = "lost" if length == 1 else (f"The size of tensor a (0) must match the size of tensor b ({length}) "
                                               f"at non-singleton dimension {axis}")
    return apply(NARROW_COPY, input, attrs=(spec, backward))


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _inferred(input, shape) -> tuple:
    shape = list(_shape_arg(shape))
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = input.numel() // known if known else 0
    return tuple(shape)


@RESHAPE.publish(Names(function=("reshape",), method=("reshape",)))
def reshape(input, *shape):
    """A view where the layout allows one (storage.viewable), else a copy, as PyTorch's (which names
    the backward of a view of elements out of order ReshapeAliasBackward0)."""
    shape = _inferred(input, shape)
    if input._view is not None and math.prod(shape) == input.numel() and not in_order(input):
        if not viewable(input, shape):
            return apply(UNSAFE_VIEW, clone(input), attrs=(shape,))
        return apply(RESHAPE_ALIAS, input, attrs=(shape,))
    return apply(RESHAPE, input, attrs=(shape,))


@RESHAPE.publish(Names(method=("view",)))
def view(input, *shape):
    """A view in ``shape``; PyTorch refuses a layout that only a copy could give (a transpose, flattened)."""
    shape = _inferred(input, shape)
    if input._view is not None and math.prod(shape) == input.numel() and not viewable(input, shape):
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one dimension "
                           "spans across two contiguous subspaces). Use .reshape(...) instead.")
    return apply(RESHAPE, input, attrs=(shape,))


@RESHAPE.publish(Names(function=("flatten",), method=("flatten",)))
def flatten(input, start_dim: int = 0, end_dim: int = -1):
    shape = tuple(input.shape)
    if not shape:
        return reshape(input, 1)
    start, end = dim_index(start_dim, len(shape)), dim_index(end_dim, len(shape))
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    return reshape(input, *shape[:start], math.prod(shape[start:end + 1]), *shape[end + 1:])


@RESHAPE.publish(Names(function=("ravel",), method=("ravel",)))
def ravel(input):
    """The elements in one axis: a view of a tensor laid out in order, else a view of its contiguous
    copy (PyTorch's ``contiguous().view(-1)``, ViewBackward0 either way)."""
    return apply(RESHAPE, input if in_order(input) else clone(input), attrs=((input.numel(),),))


@RESHAPE.publish(Names(function=("unflatten",), method=("unflatten",)))
def unflatten(input, dim: int, sizes):
    """``dim`` split into ``sizes`` (one of them may be -1): a view (never a copy)."""
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if input.ndim == 0:
        raise RuntimeError("unflatten got an unexpected error:\nDimension specified as 0 but tensor has no dimensions")
    axis = dim_index(dim, input.ndim)
    size = input.shape[axis]
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in sizes if s != -1)
    if (-1 not in sizes and known != size) or (-1 in sizes and (known == 0 or size % known)):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({size}) in the input tensor")
    shape = tuple(input.shape)
    return view(input, *shape[:axis], *sizes, *shape[axis + 1:])


@RESHAPE.publish(Names(method=("view_as",)))
def view_as(input, other):
    """``input.view(other.size())``."""
    return input.view(other.size())


@RESHAPE.publish(Names(method=("reshape_as",)))
def reshape_as(input, other):
    """``input.reshape(other.size())``."""
    return input.reshape(other.size())


@UNSQUEEZE.publish(Names(function=("unsqueeze",), method=("unsqueeze",)))
def unsqueeze(input, dim: int):
    return apply(UNSQUEEZE, input, attrs=(unsqueezed_shape(input, dim),))


def unsqueezed_shape(input, dim: int) -> tuple:
    shape = list(input.shape)
    dim = dim if dim >= 0 else dim + len(shape) + 1
    if not 0 <= dim <= len(shape):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape) - 1}, {len(shape)}], "
                         f"but got {dim})")
    shape.insert(dim, 1)
    return tuple(shape)


@SQUEEZE.publish(Names(function=("squeeze",), method=("squeeze",)))
def squeeze(input, dim=None):
    return apply(SQUEEZE, input, attrs=squeezed(input, dim))


def squeezed(input, dim) -> tuple:
    """The shape kept and the dims as given (None, an int or a tuple: PyTorch's three overloads)."""
    shape = tuple(input.shape)
    if dim is None:
        dims = given = tuple(range(len(shape)))
        given = None
    elif isinstance(dim, int):
        dims = (dim_index(dim, len(shape)),)
        given = dims[0]
    else:
        dims = given = normalize_dims(dim, len(shape))
    kept = tuple(n for i, n in enumerate(shape) if not (i in dims and n == 1))
    return kept, given


@PERMUTE.publish(Names(function=("permute",), method=("permute",)))
def permute(input, *dims):
    dims = _shape_arg(dims)
    return apply(PERMUTE, input, attrs=(tuple(d % max(input.ndim, 1) for d in dims),))


@TRANSPOSE.publish(Names(function=("transpose",), method=("transpose",)))
def transpose(input, dim0: int, dim1: int):
    return apply(TRANSPOSE, input, attrs=(swapped(input, dim0, dim1),))


def swapped(input, dim0: int, dim1: int) -> tuple:
    """The permutation that swaps two dims."""
    n = input.ndim
    d0, d1 = dim_index(dim0, n), dim_index(dim1, n)
    perm = list(range(n))
    if n:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return tuple(perm)


@T.publish(Names(function=("t",), method=("t",)))
def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return apply(T, input, attrs=(tuple(reversed(range(input.ndim))),))


@TRANSPOSE.publish(Names(function=("swapaxes", "swapdims"), method=("swapaxes", "swapdims")))
def swapaxes(input, axis0: int, axis1: int):
    """NumPy's spelling of ``transpose`` (PyTorch records it as one)."""
    return transpose(input, axis0, axis1)


@PERMUTE.publish(Names(function=("movedim", "moveaxis"), method=("movedim", "moveaxis")))
def movedim(input, source, destination):
    """The dims ``source`` moved to ``destination``, the others kept in their order: a permute."""
    if isinstance(source, int) != isinstance(destination, int):
        raise TypeError(f"movedim() received an invalid combination of arguments - got (Tensor, "
                        f"{type(source).__name__}, {type(destination).__name__}), but expected one of:\n"
                        f" * (Tensor input, tuple of ints source, tuple of ints destination)\n"
                        f" * (Tensor input, int source, int destination)\n")
    source = (source,) if isinstance(source, int) else tuple(source)
    destination = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(source) != len(destination):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(source)} dims) should "
                           f"contain the same number of dims as destination ({list(destination)} dims)")
    n = input.ndim
    source = [dim_index(d, n) for d in source]
    destination = [dim_index(d, n) for d in destination]
    for given, dims in (("source", source), ("destination", destination)):
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{given}` ({list(dims)})")
    rest = iter(d for d in range(n) if d not in source)
    perm = [source[destination.index(d)] if d in destination else next(rest) for d in range(n)]
    return apply(PERMUTE, input, attrs=(tuple(perm),))


def matrix_transpose(input):
    """``.T``: all dimensions reversed, recorded as a permute (as PyTorch does)."""
    return apply(PERMUTE, input, attrs=(tuple(reversed(range(input.ndim))),))


@EXPAND.publish(Names(function=("expand",), method=("expand",)))
def expand(input, *shape):
    shape = _shape_arg(shape)
    lead = len(shape) - input.ndim
    if any(s == -1 for s in shape[:lead]):
        raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
                           f"dimension {shape.index(-1)}")
    full = tuple(input.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
    return apply(EXPAND, input, attrs=(full,))


@EXPAND.publish(Names(method=("expand_as",)))
def expand_as(input, other):
    """``input.expand(other.size())``."""
    return expand(input, *other.shape)


def to_dtype(input, dtype):
    if dtype is input.dtype:
        return input
    return apply(CAST, input, attrs=(dtype,))


@CLONE.publish(Names(function=("clone",), method=("clone",)))
def clone(input):
    return apply(CLONE, input)


def copy(input):
    """The values ``dst.copy_(input)`` takes (recorded as PyTorch's CopyBackwards)."""
    return apply(COPY, input)


def _infer_cat(nodes, dim):
    """PyTorch's rules: the same rank and sizes except along ``dim`` (1-D empty tensors are skipped)."""
    kept = [n for n in nodes if n.shape != (0,)] or list(nodes[:1])
    first = kept[0]
    for number, n in enumerate(kept[1:], 1):
        if len(n.shape) != len(first.shape):
            raise ValueError(f"Tensors must have same number of dimensions: got {len(first.shape)} and {len(n.shape)}")
        for axis, (a, b) in enumerate(zip(first.shape, n.shape)):
            if axis != dim and a != b:
                raise ValueError(f"Sizes of tensors must match except in dimension {dim}. Expected size {a} but got "
                                 f"size {b} for tensor number {number} in the list.")
    shape = (*first.shape[:dim], sum(n.shape[dim] for n in kept), *first.shape[dim + 1:])
    return shape, dtypes.promote([(n.dtype, 2) for n in nodes])


def _build_cat(p, node, *xs):
    (dim,) = node.attrs
    kept = [p.astype(x, node.dtype.name) for x, n in zip(xs, node.inputs) if n.shape != (0,) or len(node.shape) == 1]
    return p.concatenate(kept, dim, node.shape, node.dtype.name)


CAT = register(Op("cat", "CatBackward0", _infer_cat, _build_cat, saves=False,
                  reference=lambda *xs: jnp.concatenate(xs[:-1], axis=xs[-1]),
                  torch_fn=lambda t, *xs: t.cat(xs[:-1], xs[-1]),
                  examples=(Example(((2, 3), (4, 3)), (0,)), Example(((2, 3), (2, 1), (2, 2)), (1,)),
                            Example(((3,), (0,), (2,)), (0,)))))


def _infer_stack(nodes, dim):
    first = nodes[0]
    for number, n in enumerate(nodes[1:], 1):
        if n.shape != first.shape:
            raise ValueError(f"stack expects each tensor to be equal size, but got {list(first.shape)} at entry 0 "
                             f"and {list(n.shape)} at entry {number}")
    return (*first.shape[:dim], len(nodes), *first.shape[dim:]), dtypes.promote([(n.dtype, 2) for n in nodes])


def _build_stack(p, node, *xs):
    (dim,) = node.attrs
    one = (*node.shape[:dim], 1, *node.shape[dim + 1:])
    parts = [p.astype(p.reshape(p.materialize(x, n.shape, n.dtype.name), one), node.dtype.name)
             for x, n in zip(xs, node.inputs)]
    return p.concatenate(parts, dim, node.shape, node.dtype.name)


STACK = register(Op("stack", "StackBackward0", _infer_stack, _build_stack, saves=False,
                    reference=lambda *xs: jnp.stack(xs[:-1], axis=xs[-1]),
                    torch_fn=lambda t, *xs: t.stack(xs[:-1], xs[-1]),
                    examples=(Example(((2, 3), (2, 3)), (0,)), Example(((2, 3), (2, 3), (2, 3)), (2,)),
                              Example(((), ()), (0,)))))


def _tensor_list(name, tensors):
    tensors = list(tensors)
    if not tensors:
        if name == "cat":
            raise ValueError("torch.cat(): expected a non-empty list of Tensors")
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


@CAT.publish(Names(function=("cat", "concat", "concatenate")))
def cat(tensors, dim=0, *, axis=None):
    dim = dim if axis is None else axis  # concatenate's NumPy spelling
    tensors = _tensor_list("cat", tensors)
    reference = next((t for t in tensors if tuple(t.shape) != (0,)), tensors[0])
    return apply(CAT, *tensors, attrs=(dim_index(dim, reference.ndim),))


@STACK.publish(Names(function=("stack",)))
def stack(tensors, dim=0):
    tensors = _tensor_list("stack", tensors)
    return apply(STACK, *tensors, attrs=(dim_index(dim, tensors[0].ndim + 1),))


@CAT.publish(Names(function=("hstack",)))
def hstack(tensors):
    """Along the first axis for 1-D tensors, the second otherwise (0-d tensors become 1-D first)."""
    tensors = [t.reshape(1) if t.ndim == 0 else t for t in _tensor_list("hstack", tensors)]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


@CAT.publish(Names(function=("vstack",)))
def vstack(tensors):
    """Rows: tensors below two dimensions become rows first."""
    tensors = [t.reshape(1, -1) if t.ndim < 2 else t for t in _tensor_list("vstack", tensors)]
    return cat(tensors, 0)


# ---------------------------------------------------------------- pieces, flips, repeats


def _piece_spec(shape, dim, sizes, piece):
    start = sum(sizes[:piece])
    return tuple((1, start, start + sizes[piece], 1) if d == dim else (1, 0, n, 1) for d, n in enumerate(shape))


def _infer_piece(nodes, dim, sizes, piece, name):
    shape = nodes[0].shape
    out = index_shape(shape, _piece_spec(shape, dim, sizes, piece))
    return (out[:dim] + out[dim + 1:] if name == "UnbindBackward0" else out), nodes[0].dtype


def _build_piece(p, node, x):
    dim, sizes, piece, name = node.attrs
    return p.reshape(p.index(x, _piece_spec(node.inputs[0].shape, dim, sizes, piece)), node.shape)


def _torch_piece(t, x, dim, sizes, piece, name):
    """The piece PyTorch's split, split_with_sizes or unbind gives."""
    if name == "UnbindBackward0":
        return x.unbind(dim)[piece]
    return x.split(list(sizes) if name == "SplitWithSizesBackward0" else sizes[0], dim)[piece]


PIECE = register(Op("piece", lambda nodes, dim, sizes, piece, name: name, _infer_piece, _build_piece, saves=False, view=True,
                    reference=lambda x, dim, sizes, piece, name: (
                        jnp.split(x, np.cumsum(sizes)[:-1], dim)[piece].squeeze(dim) if name == "UnbindBackward0"
                        else jnp.split(x, np.cumsum(sizes)[:-1], dim)[piece]),
                    torch_fn=_torch_piece,
                    examples=(Example(((5, 3),), (0, (2, 2, 1), 2, "SplitBackward0")),
                              Example(((2, 5),), (1, (1, 4), 1, "SplitWithSizesBackward0")),
                              Example(((2, 3),), (1, (1, 1, 1), 1, "UnbindBackward0")))))


def _pieces(input, dim, sizes, name):
    return tuple(apply(PIECE, input, attrs=(dim, tuple(sizes), i, name)) for i in range(len(sizes)))


@PIECE.publish(Names(function=("split",), method=("split",)))
def split(tensor, split_size_or_sections=None, dim: int = 0, *, split_size=None):
    """``torch.split(x, split_size_or_sections)``, or ``x.split(split_size)`` as the method names it."""
    split_size_or_sections = split_size if split_size_or_sections is None else split_size_or_sections
    dim = dim_index(dim, tensor.ndim)
    size = tensor.shape[dim]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
        if step == 0 and size:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        count = max(-(-size // step), 1) if step else 1
        return _pieces(tensor, dim, [min(step, size - i * step) for i in range(count)], "SplitBackward0")
    sizes = [int(s) for s in split_size_or_sections]
    if sum(sizes) != size or any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at "
                           f"dimension {dim}), but got split_sizes={sizes}")
    return _pieces(tensor, dim, sizes, "SplitWithSizesBackward0")


@PIECE.publish(Names(function=("chunk",), method=("chunk",)))
def chunk(input, chunks: int, dim: int = 0):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = input.shape[dim_index(dim, input.ndim)]
    step = -(-size // chunks)
    if step == 0:  # an empty dimension: chunks empty pieces
        return _pieces(input, dim_index(dim, input.ndim), [0] * chunks, "SplitBackward0")
    return split(input, step, dim)


@PIECE.publish(Names(function=("unbind",), method=("unbind",)))
def unbind(input, dim: int = 0):
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    dim = dim_index(dim, input.ndim)
    return _pieces(input, dim, [1] * input.shape[dim], "UnbindBackward0")


def _same(nodes, *attrs):
    return nodes[0].shape, nodes[0].dtype


FLIP = register(Op("flip", "FlipBackward0", _same, lambda p, node, x: IX.flip(p, x, node.attrs[0]), saves=False,
                   reference=lambda x, axes: jnp.flip(x, axes), torch_fn=lambda t, x, axes: t.flip(x, axes),
                   examples=(Example(((3, 4),), ((0,),)), Example(((2, 3, 4),), ((0, 2),)))))


@FLIP.publish(Names(function=("flip",), method=("flip",)))
def flip(input, *dims, **keyword):
    dims = _shape_arg(dims or (keyword.pop("dims"),))
    if keyword:
        raise TypeError(f"flip() got an unexpected keyword argument '{next(iter(keyword))}'")
    return apply(FLIP, input, attrs=(normalize_dims(dims, input.ndim),))


# ------------------------------------------------------------------ sliding windows (Tensor.unfold)


def window_spec(shape, dim: int, count: int, step: int, offset: int) -> tuple:
    """The basic index of the ``offset``-th element of every window along ``dim``."""
    return tuple((1, offset, offset + (count - 1) * step + 1, step) if d == dim else (1, 0, n, 1)
                 for d, n in enumerate(shape))


def _infer_unfold(nodes, dim, size, step):
    shape = nodes[0].shape
    if not shape:
        return (size,), nodes[0].dtype
    return (*shape[:dim], (shape[dim] - size) // step + 1, *shape[dim + 1:], size), nodes[0].dtype


def _build_unfold(p, node, x):
    """The windows side by side on a new last axis: one strided slice per position in the window."""
    dim, size, step = node.attrs
    shape, dtype = node.inputs[0].shape, node.dtype.name
    if not shape or not size:
        return p.reshape(x, node.shape) if size else p.materialize(sp.S.Zero, node.shape, dtype)
    count = node.shape[dim]
    pieces = [p.reshape(p.index(x, window_spec(shape, dim, count, step, j)), (*node.shape[:-1], 1))
              for j in range(size)]
    return pieces[0] if size == 1 else p.concatenate(pieces, len(shape), node.shape, dtype)


def _unfold_reference(x, dim, size, step):
    if not jnp.ndim(x):
        return jnp.reshape(x, (size,))
    count = (jnp.shape(x)[dim] - size) // step + 1
    return jnp.stack([jnp.take(x, jnp.arange(j, j + (count - 1) * step + 1, step), axis=dim) for j in range(size)],
                     axis=-1)


UNFOLD = register(Op("windows", "UnfoldBackward0", _infer_unfold, _build_unfold, saves=False, view=True,
                     reference=_unfold_reference,
                     torch_fn=lambda t, x, dim, size, step: x.unfold(dim, size, step),
                     examples=(Example(((3, 8),), (1, 3, 2)), Example(((7, 2),), (0, 2, 3)))))


@UNFOLD.publish(Names(method=("unfold",)))
def unfold(input, dimension: int, size: int, step: int):
    """The windows of ``size`` elements every ``step`` along ``dimension``, as a view: a new last dim
    holds each window (overlapping windows share their elements, as PyTorch's strided view)."""
    dim = dim_index(dimension, max(input.ndim, 1))
    length = input.shape[dim] if input.ndim else 1
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {dim} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return apply(UNFOLD, input, attrs=(dim, size, step))


@FLIP.publish(Names(function=("fliplr",), method=("fliplr",)))
def fliplr(input):
    """The columns (dim 1) in reverse order."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, 1)


@FLIP.publish(Names(function=("flipud",), method=("flipud",)))
def flipud(input):
    """The rows (dim 0) in reverse order."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, 0)


def _build_roll(p, node, x):
    shifts, axes = node.attrs
    if axes is None:  # the flattened tensor, rolled
        flat = p.reshape(x, (math.prod(node.shape),))
        return p.reshape(IX.roll(p, flat, shifts, (0,)), node.shape)
    return IX.roll(p, x, shifts, axes)


ROLL = register(Op("roll", "RollBackward0", _same, _build_roll, saves=False,
                   reference=lambda x, shifts, axes: jnp.roll(x, shifts if axes else shifts[0], axes),
                   torch_fn=lambda t, x, shifts, axes: t.roll(x, shifts, axes),
                   examples=(Example(((3, 4),), ((1,), (0,))), Example(((2, 3, 4),), ((-1, 5), (2, 1))),
                             Example(((3, 4),), ((2,), None)))))


@ROLL.publish(Names(function=("roll",), method=("roll",)))
def roll(input, shifts, dims=None):
    shifts = (shifts,) if isinstance(shifts, int) else tuple(int(s) for s in shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        size = input.numel()
        return apply(ROLL, input, attrs=((shifts[0] % size if size else 0,), None))
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    axes = tuple(dim_index(d, input.ndim) for d in dims)
    sizes = [input.shape[a] for a in axes]
    return apply(ROLL, input, attrs=(tuple(s % n if n else 0 for s, n in zip(shifts, sizes)), axes))


def _infer_repeat(nodes, repeats):
    (x,) = nodes
    if len(repeats) < len(x.shape):
        raise ValueError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    shape = (1,) * (len(repeats) - len(x.shape)) + tuple(x.shape)
    out = [r * n for r, n in zip(repeats, shape)]
    if any(r < 0 for r in repeats):
        negative = next(o for o in out if o < 0)
        raise ValueError(f"Trying to create tensor with negative dimension {negative}: {out}")
    return tuple(out), x.dtype


def _build_repeat(p, node, x):
    """Each axis as (repeats, size): x broadcast along the repeats, then merged."""
    (repeats,) = node.attrs
    shape = (1,) * (len(repeats) - len(node.inputs[0].shape)) + tuple(node.inputs[0].shape)
    spread = tuple(v for n in shape for v in (1, n))
    tiled = tuple(v for r, n in zip(repeats, shape) for v in (r, n))
    wide = p.broadcast_to(p.reshape(x, spread), tiled)
    return p.reshape(p.materialize(wide, tiled, node.dtype.name), node.shape)


REPEAT = register(Op("repeat", "RepeatBackward0", _infer_repeat, _build_repeat, saves=False,
                     reference=lambda x, repeats: jnp.tile(x, repeats),
                     torch_fn=lambda t, x, repeats: x.repeat(*repeats),
                     examples=(Example(((2, 3),), ((2, 1),)), Example(((3,),), ((2, 1, 2),)),
                               Example(((),), ((3,),)))))


@REPEAT.publish(Names(method=("repeat",)))
def repeat(input, *repeats):
    return apply(REPEAT, input, attrs=(_shape_arg(repeats),))


@REPEAT.publish(Names(function=("tile",), method=("tile",)))
def tile(input, dims):
    dims = tuple(int(d) for d in dims)
    return repeat(input, *((1,) * (input.ndim - len(dims)) + dims))


def _infer_triangle(nodes, k, upper):
    (x,) = nodes
    if len(x.shape) < 2:
        raise ValueError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    return x.shape, x.dtype


TRIANGLE = register(Op("triangle", lambda nodes, k, upper: "TriuBackward0" if upper else "TrilBackward0",
                       _infer_triangle, lambda p, node, x: IX.triangle(p, x, *node.attrs), saves=False,
                       reference=lambda x, k, upper: (jnp.triu if upper else jnp.tril)(x, k),
                       torch_fn=lambda t, x, k, upper: (t.triu if upper else t.tril)(x, k),
                       examples=(Example(((3, 4),), (0, False)), Example(((2, 4, 3),), (-1, True)),
                                 Example(((3, 3),), (1, False)))))


@TRIANGLE.publish(Names(function=("tril",), method=("tril",), inplace=("tril_",)))
def tril(input, diagonal: int = 0):
    return apply(TRIANGLE, input, attrs=(int(diagonal), False))


@TRIANGLE.publish(Names(function=("triu",), method=("triu",), inplace=("triu_",)))
def triu(input, diagonal: int = 0):
    return apply(TRIANGLE, input, attrs=(int(diagonal), True))


def _infer_diagonal(nodes, offset, axis1, axis2, name):
    shape = nodes[0].shape
    rest = tuple(n for d, n in enumerate(shape) if d not in (axis1, axis2))
    return (*rest, IX.diagonal_length(shape[axis1], shape[axis2], offset)), nodes[0].dtype


DIAGONAL = register(Op("diagonal", lambda nodes, offset, axis1, axis2, name: name, _infer_diagonal,
                       lambda p, node, x: IX.diagonal(p, x, *node.attrs[:3]), saves=False, view=True,
                       reference=lambda x, offset, axis1, axis2, name: jnp.diagonal(x, offset, axis1, axis2),
                       torch_fn=lambda t, x, offset, axis1, axis2, name: (
                           t.diag(x, offset) if name == "DiagonalBackward0_copy"
                           else t.diagonal(x, offset, axis1, axis2)),
                       examples=(Example(((3, 4),), (1, 0, 1, "DiagonalBackward0")),
                                 Example(((2, 3, 4),), (-1, 2, 0, "DiagonalBackward0")),
                                 Example(((4, 3),), (-1, 0, 1, "DiagonalBackward0_copy")))))


@DIAGONAL.publish(Names(function=("diagonal",), method=("diagonal",)))
def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    axis1, axis2 = dim_index(dim1, input.ndim), dim_index(dim2, input.ndim)
    if axis1 == axis2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(DIAGONAL, input, attrs=(int(offset), axis1, axis2, "DiagonalBackward0"))


def _infer_diag_embed(nodes, offset):
    (length,) = nodes[0].shape
    n = length + abs(offset)
    return (n, n), nodes[0].dtype


DIAG_EMBED = register(Op("diag_embed", "DiagEmbedBackward0", _infer_diag_embed,
                         lambda p, node, x: IX.diag_embed(p, x, node.attrs[0], *node.shape), saves=False,
                         reference=lambda x, offset: jnp.diag(x, offset),
                         torch_fn=lambda t, x, offset: t.diag(x, offset),
                         examples=(Example(((3,),), (0,)), Example(((2,),), (-2,)))))


@DIAG_EMBED.publish(Names(function=("diag",), method=("diag",)))
def diag(input, diagonal: int = 0):
    """A vector's diagonal matrix, or a matrix's diagonal (PyTorch names its backward DiagonalBackward0_copy)."""
    if input.ndim == 1:
        return apply(DIAG_EMBED, input, attrs=(int(diagonal),))
    if input.ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    attrs = (int(diagonal), 0, 1, "DiagonalBackward0_copy")
    return Tensor(record(DIAGONAL, (input._node,), attrs))  # a copy, not a view


def _infer_trace(nodes):
    (x,) = nodes
    if len(x.shape) != 2:
        raise ValueError(f"trace: expected a matrix, but got tensor with dim {len(x.shape)}")
    return (), dtypes.int64 if x.dtype.is_integer else x.dtype


def _build_trace(p, node, x):
    values = p.astype(IX.diagonal(p, x, 0, 0, 1), node.dtype.name)
    return p.reduce_sum(values, (0,), False)


TRACE = register(Op("trace", "TraceBackward0", _infer_trace, _build_trace, saves=False,
                    reference=lambda x: jnp.trace(x), torch_fn=lambda t, x: t.trace(x),
                    examples=(Example(((3, 4),)), Example(((3, 3),)))))


@TRACE.publish(Names(function=("trace",), method=("trace",)))
def trace(input):
    if input.dtype is dtypes.bool_ and input.ndim == 2:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    return apply(TRACE, input)



# ------------------------------------------------------------------- rotations, grids, repeats, differences


def _infer_rot90(nodes, k, axis0, axis1):
    shape = list(nodes[0].shape)
    if k % 2:
        shape[axis0], shape[axis1] = shape[axis1], shape[axis0]
    return tuple(shape), nodes[0].dtype


def _build_rot90(p, node, x):
    """A quarter turn from ``axis0`` towards ``axis1`` is a flip of ``axis1`` and a swap of the two."""
    k, axis0, axis1 = node.attrs
    perm = list(range(len(node.shape)))
    perm[axis0], perm[axis1] = axis1, axis0
    if k == 0:
        return p.assign(x, node.shape, node.dtype.name, "rot90", fold=False)
    if k == 2:
        return IX.flip(p, x, tuple(sorted((axis0, axis1))))
    return p.permute(IX.flip(p, x, (axis1 if k == 1 else axis0,)), perm)


ROT90 = register(Op("rot90", "Rot90Backward0", _infer_rot90, _build_rot90, saves=False,
                    reference=lambda x, k, axis0, axis1: jnp.rot90(x, k, (axis0, axis1)),
                    torch_fn=lambda t, x, k, axis0, axis1: t.rot90(x, k, (axis0, axis1)),
                    examples=tuple(Example(((3, 4),), (k, 0, 1)) for k in range(4))
                    + (Example(((2, 3, 4),), (1, 2, 0)), Example(((2, 3, 4),), (3, 0, 2)))))


@ROT90.publish(Names(function=("rot90",), method=("rot90",)))
def rot90(input, k: int = 1, dims=(0, 1)):
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    axis0, axis1 = dim_index(dims[0], input.ndim), dim_index(dims[1], input.ndim)
    if axis0 == axis1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    return apply(ROT90, input, attrs=(int(k) % 4, axis0, axis1))


@EXPAND.publish(Names(function=("meshgrid",)))
def meshgrid(*tensors, indexing=None):
    """Each tensor (0-d or 1-D) viewed along its own axis and expanded over the grid; ``'xy'``
    swaps the first two axes (Cartesian order).  As PyTorch, no ``indexing`` means 'ij' and warns."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of "
                               f"shape {list(t.shape)}")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    axes = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        axes[0], axes[1] = 1, 0
    sizes = [1] * len(tensors)
    for axis, t in zip(axes, tensors):
        sizes[axis] = t.numel()
    return tuple(expand(reshape(t, *(-1 if a == axis else 1 for a in range(len(sizes)))), *sizes)
                 for axis, t in zip(axes, tensors))


@STACK.publish(Names(function=("cartesian_prod",)))
def cartesian_prod(*tensors):
    """Every combination of the 1-D tensors' entries, one per row (a single tensor is itself)."""
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([flatten(g) for g in meshgrid(*tensors, indexing="ij")], 1)


@REPEAT.publish(Names(function=("repeat_interleave",), method=("repeat_interleave",)))
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each entry repeated in place: an int number of times (a view of an expanded copy, as PyTorch
    makes it), or as often as an integer tensor says (an ``index_select``).  Alone, an integer
    tensor of counts gives the indices repeated by them; ``dim=None`` works on the flattened input."""
    if repeats is None:
        return _repeated_indices(input)
    if dim is None:
        input, dim = flatten(input), 0
    axis = dim_index(dim, input.ndim)
    size = input.shape[axis] if input.ndim else 1
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.ndim == 0 or repeats.numel() == 1:
            repeats = repeats.reshape(1).expand(size)
        elif repeats.numel() != size:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {repeats.numel()} and input.size(0) = {size}")
        return input.index_select(axis, _repeated_indices(repeats))
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    if input.ndim == 0:
        input, axis = input.reshape(1), 0
    shape = tuple(input.shape)
    wide = expand(unsqueeze(input, axis + 1), *shape[:axis + 1], int(repeats), *shape[axis + 1:])
    return flatten(clone(wide), axis, axis + 1)


def _repeated_indices(repeats):
    """``repeat_interleave(repeats)``: index i repeated ``repeats[i]`` times."""
    if repeats.ndim != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.dtype not in (dtypes.int32, dtypes.int64):
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for "
                                  f"'{dtypes.torch_name(repeats.dtype).removesuffix('Tensor')}'")
    counts = np.asarray(repeats.tolist(), dtype=np.int64)
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    indices = np.repeat(np.arange(counts.size, dtype=repeats.dtype.numpy), counts)
    return Tensor(leaf(from_host(indices), repeats.dtype))


@CAT.publish(Names(function=("diff",), method=("diff",)))
def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``, after joining ``prepend`` and ``append``: each
    order subtracts a slice from the next (``logical_xor`` for bools, as PyTorch)."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    axis = dim_index(dim, input.ndim)
    parts = []
    for name, extra in (("prepend", prepend), (None, input), ("append", append)):
        if extra is None:
            continue
        if not isinstance(extra, Tensor):
            raise TypeError(f"diff(): argument '{name}' must be Tensor, not {type(extra).__name__}")
        if extra.ndim != input.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        for d, (a, b) in enumerate(zip(input.shape, extra.shape)):
            if d != axis and a != b:
                raise RuntimeError(f"diff expects the shape of tensor to prepend or append to match that of input "
                                   f"except along the differencing dimension; input.size({d}) = {a}, but got "
                                   f"tensor.size({d}) = {b}")
        parts.append(extra)
    result = cat(parts, axis) if len(parts) > 1 else input
    if n == 0:
        return copy(result)
    for _ in range(n):
        length = max(result.shape[axis] - 1, 0)
        later, earlier = narrow(result, axis, min(1, length), length), narrow(result, axis, 0, length)
        result = later.logical_xor(earlier) if result.dtype is dtypes.bool_ else later - earlier
    return result
