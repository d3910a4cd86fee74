"""Ops that move elements without computing: reshape, transpose, unsqueeze, dtype casts."""
from __future__ import annotations

import math

import jax.numpy as jnp

from symgrad import dtypes
from symgrad.ir import broadcast_shapes, index_shape, python_index
from symgrad.ops.dims import dim_index, normalize_dims
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import apply


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
    if broadcast_shapes(x.shape, shape) != tuple(shape):
        raise ValueError(f"The expanded size of the tensor must match the existing size: "
                         f"{tuple(x.shape)} cannot expand to {tuple(shape)}")
    return tuple(shape), x.dtype


def _infer_cast(nodes, dtype):
    return nodes[0].shape, dtype


def _squeeze_variant(dims) -> int:
    """PyTorch numbers squeeze's backward by its call: no dim, one dim, or a tuple of dims."""
    return 0 if dims is None else 1 if isinstance(dims, int) else 2


RESHAPE = register(Op("reshape", "ViewBackward0", _infer_reshape, lambda p, node, x: p.reshape(x, node.shape),
                      saves=False, reference=lambda x, shape: jnp.reshape(x, shape),
                      torch_fn=lambda t, x, shape: x.reshape(shape),
                      examples=(Example(((3, 4),), ((2, 6),)), Example(((6,),), ((3, 1, 2),)))))
UNSQUEEZE = register(Op("unsqueeze", "UnsqueezeBackward0", _infer_reshape,
                        lambda p, node, x: p.reshape(x, node.shape), saves=False,
                        reference=lambda x, shape: jnp.reshape(x, shape),
                        torch_fn=lambda t, x, shape: x.unsqueeze(shape.index(1)),
                        examples=(Example(((3, 4),), ((1, 3, 4),)),)))
SQUEEZE = register(Op("squeeze", lambda nodes, shape, dims: f"SqueezeBackward{_squeeze_variant(dims)}",
                      lambda nodes, shape, dims: _infer_reshape(nodes, shape),
                      lambda p, node, x: p.reshape(x, node.shape), saves=False,
                      reference=lambda x, shape, dims: jnp.reshape(x, shape),
                      torch_fn=lambda t, x, shape, dims: x.squeeze() if dims is None else x.squeeze(dims),
                      examples=tuple(Example(((3, 1, 4),), ((3, 4), dims)) for dims in (None, 1, (1,)))))
PERMUTE = register(Op("permute", "PermuteBackward0", _infer_permute, lambda p, node, x: p.permute(x, node.attrs[0]),
                      saves=False, reference=lambda x, perm: jnp.transpose(x, perm),
                      torch_fn=lambda t, x, perm: x.permute(*perm),
                      examples=(Example(((3, 4),), ((1, 0),)), Example(((2, 3, 4),), ((2, 0, 1),)))))
TRANSPOSE = register(Op("transpose", lambda nodes, perm: "TransposeBackward0", _infer_permute,
                        lambda p, node, x: p.permute(x, node.attrs[0]), saves=False,
                        reference=lambda x, perm: jnp.transpose(x, perm),
                        torch_fn=lambda t, x, perm: x.transpose(*[i for i, p in enumerate(perm) if i != p]),
                        examples=(Example(((3, 4),), ((1, 0),)),)))
T = register(Op("t", "TBackward0", _infer_permute, lambda p, node, x: p.permute(x, node.attrs[0]), saves=False,
                reference=lambda x, perm: jnp.transpose(x, perm), torch_fn=lambda t, x, perm: x.t(),
                examples=(Example(((3, 4),), ((1, 0),)),)))
EXPAND = register(Op("expand", "ExpandBackward0", _infer_expand, lambda p, node, x: p.broadcast_to(x, node.shape),
                     saves=False, reference=lambda x, shape: jnp.broadcast_to(x, shape),
                     torch_fn=lambda t, x, shape: x.expand(*shape),
                     examples=(Example(((3, 1),), ((2, 3, 4),)),)))
CAST = register(Op("to", "ToCopyBackward0", _infer_cast, lambda p, node, x: p.astype(x, node.dtype.name),
                   saves=False, reference=lambda x, dtype: x.astype(dtype.numpy),
                   torch_fn=lambda t, x, dtype: x.to(dtype),
                   examples=(Example(((3, 4),), (dtypes.float64,)),)))
CLONE = register(Op("clone", "CloneBackward0", lambda nodes: (nodes[0].shape, nodes[0].dtype),
                    lambda p, node, x: p.assign(x, node.shape, node.dtype.name, "clone", fold=False), saves=False,
                    reference=lambda x: x, torch_fn=lambda t, x: x.clone(), examples=(Example(((3, 4),)),)))
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
                    lambda p, node, x: p.index(x, node.attrs[0]), saves=False,
                    reference=lambda x, spec: x[python_index(spec)],
                    torch_fn=lambda t, x, spec: x[python_index(spec)],
                    examples=(Example(((3, 4, 5),), (((0, 1),),)), Example(((3, 4, 5),), (((1, 0, 3, 1), (0, 2)),)),
                              Example(((3, 4, 5),), (((1, 1, 3, 1),),)), Example(((3, 4, 5),), (((1, 0, 3, 2), (2,)),)),
                              Example(((3, 4),), (((2,), (1, 0, 3, 1), (1, 0, 4, 1)),)))))


@INDEX.publish(Names(method=("__getitem__",)))
def getitem(input, key):
    """``x[key]`` for integers, slices (positive steps), None and Ellipsis."""
    key = key if isinstance(key, tuple) else (key,)
    if any(not (k is None or k is Ellipsis or isinstance(k, (int, slice))) or isinstance(k, bool) for k in key):
        raise NotImplementedError("symgrad supports basic indexing (integers, slices, None, ...); indexing with "
                                  "tensors, lists, arrays or masks is not supported yet")
    shape = tuple(input.shape)
    consuming = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consuming > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    if key.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (len(shape) - consuming) + key[at + 1:]
    spec, d = [], 0
    for k in key:
        if k is None:
            spec.append((2,))
            continue
        size = shape[d]
        if isinstance(k, int):
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for dimension {d} with size {size}")
            spec.append((0, k % size))
        else:
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
            spec.append((1, *k.indices(size)))
        d += 1
    return apply(INDEX, input, attrs=(tuple(spec),))


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


@RESHAPE.publish(Names(function=("reshape",), method=("reshape", "view")))
def reshape(input, *shape):
    shape = list(_shape_arg(shape))
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = input.numel() // known if known else 0
    return apply(RESHAPE, input, attrs=(tuple(shape),))


@RESHAPE.publish(Names(function=("flatten",), method=("flatten",)))
def flatten(input, start_dim: int = 0, end_dim: int = -1):
    shape = tuple(input.shape)
    if not shape:
        return reshape(input, 1)
    start, end = dim_index(start_dim, len(shape)), dim_index(end_dim, len(shape))
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    return reshape(input, *shape[:start], math.prod(shape[start:end + 1]), *shape[end + 1:])


@UNSQUEEZE.publish(Names(function=("unsqueeze",), method=("unsqueeze",)))
def unsqueeze(input, dim: int):
    shape = list(input.shape)
    dim = dim if dim >= 0 else dim + len(shape) + 1
    if not 0 <= dim <= len(shape):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape) - 1}, {len(shape)}], "
                         f"but got {dim})")
    shape.insert(dim, 1)
    return apply(UNSQUEEZE, input, attrs=(tuple(shape),))


@SQUEEZE.publish(Names(function=("squeeze",), method=("squeeze",)))
def squeeze(input, dim=None):
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
    return apply(SQUEEZE, input, attrs=(kept, given))


@PERMUTE.publish(Names(function=("permute",), method=("permute",)))
def permute(input, *dims):
    dims = _shape_arg(dims)
    return apply(PERMUTE, input, attrs=(tuple(d % max(input.ndim, 1) for d in dims),))


@TRANSPOSE.publish(Names(function=("transpose",), method=("transpose",)))
def transpose(input, dim0: int, dim1: int):
    n = input.ndim
    d0, d1 = dim_index(dim0, n), dim_index(dim1, n)
    perm = list(range(n))
    if n:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return apply(TRANSPOSE, input, attrs=(tuple(perm),))


@T.publish(Names(function=("t",), method=("t",)))
def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return apply(T, input, attrs=(tuple(reversed(range(input.ndim))),))


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
def cat(tensors, dim=0):
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
