"""Shared storage: views and ``detach()`` alias their base; a version counter guards what backward saved.

Nodes never change, so aliasing lives among Tensors.  A view (or a detached tensor) remembers the
tensor it was made from, the step (a view op and its attributes, or ``DETACH``) and the grad mode it
was made in; every tensor of one storage shares a ``Storage``: its version and its members, in the
order they were made (a parent before its views).  symgrad.inplace writes through them.

The version counter: each in-place write bumps it and marks the nodes that held the old values.
Backward refuses a marked node that a node on its path saved (PyTorch's RuntimeError): symgrad's
nodes keep the old values, so without the check it would quietly differentiate what PyTorch refuses.
"""
from __future__ import annotations

import functools
import math
import weakref

import numpy as np

from symgrad import dtypes
from symgrad.grad_mode import _state as _grad_state
from symgrad.nodes import CONST, LEAF, grad_fn_of

DETACH = "detach"  # the step of detach(): the values, no history
DATA = "data"  # the step of .data: as detach, and writes through it are not counted


class Storage:
    __slots__ = ("version", "members", "bound", "detached")

    def __init__(self, root):
        self.version = 0
        self.members = [weakref.ref(root)]
        self.bound = 16  # prune dead members when there are more than this
        self.detached = []  # weak references to the nodes detach() gave, for the version counter (note_detached)

    def live(self) -> list:
        """The members still alive, parents before their views."""
        alive = [m() for m in self.members]
        return [t for t in alive if t is not None]

    def add(self, tensor) -> None:
        members = self.members
        members.append(weakref.ref(tensor))
        if len(members) > self.bound:  # a view made every step (w.t() in a loop) must not pile up
            self.members = [m for m in members if m() is not None]
            self.bound = 2 * len(self.members) + 16


def storage_of(tensor) -> Storage:
    storage = tensor._storage
    if storage is None:
        storage = tensor._storage = Storage(tensor)
    return storage


def viewed(parent, child, step):
    """``child`` aliases ``parent`` through ``step``; returns child (an inference tensor if its
    parent is one, as PyTorch's views)."""
    storage_of(parent).add(child)
    child._inference = parent._inference
    child._storage = parent._storage
    child._view = (parent, step, _grad_state.enabled)
    return child


def root_of(tensor):
    """The tensor whose storage a view of views aliases, through views only (``_base``): None
    for a tensor that is not a view.  A tensor laid out again in place stands for its hidden
    former self (``relaid``)."""
    view = tensor._view
    if view is None or view[1] in (DETACH, DATA):
        return None
    base = view[0]
    while base._view is not None and base._view[1] not in (DETACH, DATA):
        base = base._view[0]
    successor = _successors.get(id(base))
    successor = None if successor is None else successor()
    if successor is not None:
        base = successor
    return None if base is tensor else base


def laid_out_again(tensor) -> bool:
    """Whether ``tensor`` is a base laid out again in place (``relaid``): a view of its hidden former
    self to symgrad, no view to PyTorch (a write into it keeps the write's node as its history)."""
    view = tensor._view
    return view is not None and view[1] not in (DETACH, DATA) and root_of(tensor) is None


_successors = {}  # id of a hidden former self -> (a weak reference to) the tensor laid out again in its place


def relaid(tensor, step) -> None:
    """``tensor`` keeps its identity but changes its layout in place (``t_()``): a hidden tensor
    takes its former place in the storage (its node, what it was a view of, its views), and
    ``tensor`` becomes a view of that through ``step``; the caller gives ``tensor`` its new node."""
    former = tensor.__class__.__new__(tensor.__class__)
    former._node, former._grad, former._view = tensor._node, None, tensor._view
    former._inference, former._storage = tensor._inference, storage_of(tensor)
    members = former._storage.members
    members[:] = [weakref.ref(former) if m() is tensor else m for m in members]
    for member in former._storage.live():
        if member._view is not None and member._view[0] is tensor:
            member._view = (former, *member._view[1:])
    _successors[id(former)] = weakref.ref(tensor)
    weakref.finalize(former, _successors.pop, id(former), None)
    tensor._view = None
    viewed(former, tensor, step)


def positions(tensor) -> np.ndarray:
    """Where each element of ``tensor`` sits in its storage: the flat indices of its root, taken
    through the same view steps (each view op's ``reference`` on an index array).  Read-only."""
    return _positions(*_steps(tensor))


def memory_order(tensor):
    """Where each element (in element order) falls in the order PyTorch's kernels fill a tensor
    laid out like ``tensor``, or None for element order: a random draw into a view fills it in
    memory order, and ``empty_like`` keeps its input's layout (transposed stays transposed)."""
    return None if tensor._view is None else _memory_order(*_steps(tensor))


@functools.lru_cache(maxsize=256)
def _memory_order(shape, steps):
    """PyTorch's rule for the layout of a tensor made like a strided one (the order TensorIterator
    walks it): dims sorted innermost-first by stride, a zero stride comparing with nothing, equal
    strides by size; dims of size 1 take no part in the order."""
    where = _positions(shape, steps)
    dims = [d for d in reversed(range(where.ndim)) if where.shape[d] > 1]
    stride = {d: int(np.moveaxis(where, d, 0)[1].flat[0] - where.flat[0]) for d in dims}

    def after(a, b) -> int:  # 1: a goes outside b; -1: inside; 0: either
        if stride[a] == 0 or stride[b] == 0:
            return 0
        if stride[a] != stride[b]:
            return 1 if stride[a] > stride[b] else -1
        return 1 if where.shape[a] > where.shape[b] else 0

    for i in range(1, len(dims)):  # an insertion sort that steps over ties, as PyTorch's
        moving = i
        for j in range(i - 1, -1, -1):
            comparison = after(dims[j], dims[moving])
            if comparison > 0:
                dims[j], dims[moving] = dims[moving], dims[j]
                moving = j
            elif comparison < 0:
                break
    dense, size = [0] * where.ndim, 1
    for d in dims:
        dense[d], size = size, size * where.shape[d]
    order = np.tensordot(np.indices(where.shape), np.asarray(dense, np.int64), axes=(0, 0)).reshape(-1)
    if (order == np.arange(order.size)).all():
        return None
    order.flags.writeable = False
    return order


def _steps(tensor):
    """The shape of the tensor a view was made from, and the view steps from there (oldest first)."""
    steps = []
    while tensor._view is not None:
        parent, step, _ = tensor._view
        if step not in (DETACH, DATA):
            steps.append(step)
        tensor = parent
    return tuple(tensor.shape), tuple(reversed(steps))


@functools.lru_cache(maxsize=1024)  # a loop reshapes the same kind of view every step
def _positions(shape, steps) -> np.ndarray:
    where = np.arange(math.prod(shape)).reshape(shape)
    for op, attrs in steps:
        where = np.asarray(op.reference(where, *attrs))
    where.flags.writeable = False
    return where


def in_order(tensor) -> bool:
    """Whether the elements sit in storage in order, one after another (PyTorch's ``is_contiguous``):
    a fresh tensor's do, a transpose's, an expand's or a step slice's do not."""
    return tensor._view is None or _in_order(*_steps(tensor))


@functools.lru_cache(maxsize=1024)
def _in_order(root, steps) -> bool:
    where = _positions(root, steps).reshape(-1)
    return bool((where == where[:1] + np.arange(where.size)).all())


def viewable(tensor, shape) -> bool:
    """Whether ``tensor`` can be viewed in ``shape`` without a copy, as PyTorch decides it
    (``view`` refuses otherwise, ``reshape`` copies): each run of dims the new shape splits or
    merges must be laid out evenly in memory."""
    return tensor._view is None or _viewable(*_steps(tensor), tuple(shape))


@functools.lru_cache(maxsize=1024)
def _viewable(root, steps, shape) -> bool:
    where = _positions(root, steps)
    if where.size <= 1:
        return True
    sizes, strides, stride = where.shape, [0] * where.ndim, 1
    for d in reversed(range(where.ndim)):  # a dim of size 1 takes the stride it would have in order
        step = where[(0,) * d + (1,) + (0,) * (where.ndim - d - 1)] - where.flat[0] if sizes[d] > 1 else stride
        strides[d], stride = int(step), int(step) * sizes[d]
    return _view_strides(sizes, strides, shape)


def _view_strides(sizes, strides, shape) -> bool:
    """PyTorch's rule (computeStride): going from the last dim, dims that are contiguous with each
    other form a chunk, and the new shape must cover each chunk with whole dims."""
    view_d, chunk_stride, tensor_numel, view_numel = len(shape) - 1, strides[-1] if strides else 1, 1, 1
    for d in reversed(range(len(sizes))):
        tensor_numel *= sizes[d]
        if d == 0 or (sizes[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_stride):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if d > 0:
                chunk_stride, tensor_numel, view_numel = strides[d - 1], 1, 1
    return view_d == -1


def partly_shared(target, operand, region=None) -> bool:
    """Whether ``operand`` shares some of ``target``'s elements (those at the basic index ``region``,
    if given) without being laid out as they are: PyTorch refuses such an input to an in-place op
    (the same layout, or no element shared, is fine)."""
    if operand is target or operand._storage is None or operand._storage is not target._storage:
        return False
    mine, theirs = positions(target), positions(operand)
    if region is not None:  # x[key] = value: the value is expanded to the region first, as PyTorch's setitem does
        mine = mine[region]
        theirs = _expanded(theirs, mine.shape)
    if not (_dense(mine) and _dense(theirs)):
        return False  # PyTorch's check gives up on what does not cover a range densely (a broadcast, a strided slice)
    if mine.shape == theirs.shape and (mine == theirs).all():
        return False
    return bool(np.intersect1d(mine, theirs).size)


def _expanded(values, shape):
    """``values`` broadcast to ``shape``, leading 1-sized dims dropped first; as they are if they do not fit."""
    while values.ndim > len(shape) and values.shape[0] == 1:
        values = values[0]
    try:
        return np.broadcast_to(values, shape)
    except ValueError:
        return values


def _dense(places) -> bool:
    """Whether the positions cover a range of the storage once each (any order: a transpose is dense)."""
    return places.size == 0 or (places.max() - places.min() + 1 == places.size and np.unique(places).size == places.size)


# ------------------------------------------------------------------ the version counter

def mark(storage: Storage, old, new) -> None:
    """The node ``old`` held values of ``storage`` that an in-place write replaced with ``new``."""
    if old.op is CONST:
        return  # a constant is shared between tensors: it is never marked
    old.written = (storage, storage.version, weakref.ref(new))  # weak: new often holds old


def note_detached(storage: Storage, node) -> None:
    """``node`` holds values of ``storage`` through a detach: a later write marks it even when no
    tensor holds it any more (``mark_detached``), as PyTorch's detach shares the version counter."""
    detached = storage.detached
    detached.append(weakref.ref(node))
    if len(detached) > 2 * storage.bound:  # detached every step and never written: drop the dead
        storage.detached = [ref for ref in detached if ref() is not None]
        storage.bound = max(storage.bound, len(storage.detached))


def mark_detached(storage: Storage) -> None:
    """A write to ``storage`` marks what its detached nodes held (each once; a graph that saved one
    refuses its backward), and forgets them: a detached tensor still alive notes its new node."""
    for ref in storage.detached:
        node = ref()
        if node is not None and node.written is None:
            node.written = (storage, storage.version, ref)  # the refusal names the detached values: no grad_fn
    storage.detached = []


def check_saved(nodes) -> None:
    """PyTorch's error if one of ``nodes`` (on a gradient path) saved a value changed in place since."""
    for node in nodes:
        if node.op.keeps_history:  # a create_graph gradient: what PyTorch's double backward keeps
            derivative = node.attrs[0]
            for kept in derivative.read_again:
                if kept.written is not None:
                    _refuse(kept.written)
            check_saved(derivative.history)
            continue
        if node.written is not None and saves_output(node):
            _refuse(node.written, node)
        for position, i in enumerate(node.inputs):
            if i.written is not None:
                if saves_input(node, position) and not (position == 0 and _the_write(node, i.written[2])):
                    _refuse(i.written)
            elif i.op.view and saves_input(node, position):
                written = base_written(i)
                if written is not None:  # a view no tensor holds any more: it shares its base's version all the same
                    _refuse((written[0], written[1], None), i, "AsStrided" if i.requires_grad else "")


def base_written(view):
    """How the base of ``view`` (a node made by view ops) was written since, if it was: a view of a
    tensor shares its version counter, even when no tensor holds the view any more."""
    child = node = view
    while node.written is None and node.op.view and node.inputs:  # (a freed graph keeps no inputs)
        child, node = node, node.inputs[0]
    written = node.written
    if written is not None and written[2]() is child:
        return None  # the write that made the view itself (``t_``: the former layout was written by it)
    return written


def _the_write(node, new) -> bool:
    """Whether ``node`` is the in-place op's own result (cast back to the tensor's dtype or not):
    PyTorch's in-place kernels keep the original ``self`` they need, so that is no conflict."""
    new = new()
    return new is not None and (node is new or (new.op.name == "to" and new.inputs[0] is node))


# PyTorch's backward formulas that read their result, not their input (derivatives.yaml)
SAVES_RESULT = frozenset({"exp", "exp2", "expm1", "sigmoid", "tan", "tanh", "relu", "sqrt", "rsqrt", "reciprocal",
                          "softmax", "log_softmax", "cholesky", "inv", "eigh", "svd", "special_ndtri", "lu_factor",
                          "rrelu_", "rrelu_with_noise_"})  # rrelu_'s in-place twins (RreluWithNoiseBackward1)
# ...that read their result and their input
SAVES_BOTH = frozenset({"max", "min", "cumprod", "prod", "logsumexp", "vector_norm", "cdist", "copysign", "det", "dist",
                        "special_i0e", "special_i1", "special_i1e", "special_erfcx", "special_log_ndtr", "ldexp",
                        "hypot", "logcumsumexp", "matrix_norm", "median", "solve", "solve_triangular", "pinv",
                        "triangular_solve", "householder_product", "lstsq"})
# ...that keep their index or mask (an integer or bool input) to send the gradient back
INDEXED = frozenset({"take", "gather", "scatter", "index_select", "index_fill", "masked_fill", "masked_select", "put",
                     "embedding", "where", "put_at", "masked_scatter"})
# ...that keep tensors other than their inputs: the indices they computed, a number as a tensor (p - lr * g)
KEEPS_OTHERS = frozenset({"sort", "max_dim", "min_dim", "median_dim", "sgd_update", "frexp"})
# ...whose gradient reads no tensor (zeros, the cotangent as it is, or a Python number)
SAVES_NOTHING = frozenset({"floor", "ceil", "round", "round_decimals", "trunc", "frac", "sign", "floor_divide",
                           "cumsum", "div_scalar"})
# ...and those that read an input only for another input's gradient
PRODUCTS = frozenset({"mul", "matmul", "bmm", "linear", "einsum", "cross"})
# ...and those that add a product of the other two to their first input, which they never read
SCALED_PRODUCTS = frozenset({"addmm", "baddbmm", "addbmm", "addmv", "addr", "addcmul", "addcdiv"})
# ...whose gradients are the cotangent sent through a mask or indices made from what they keep, or
# zeros: PyTorch's gradients have no history from those (their formulas are not differentiable there)
SELECTS = frozenset({"max", "min", "median", "cummax", "cummin", "gather", "take_flat", "put_at", "clamp",
                     "clamp_min", "clamp_max", "fmax", "fmin", "maximum", "minimum", "nan_to_num", "nansum"})
# ...whose gradient is zeros, whatever the cotangent: nothing above them reaches a gradient through them
DROPS_THE_COTANGENT = frozenset({"floor", "ceil", "round", "round_decimals", "trunc", "sign", "floor_divide",
                                 "div_rounded"})
# ...and the losses whose target's gradient reads the input alone (-logit(q), -x)
BINARY_CROSS_ENTROPIES = frozenset({"binary_cross_entropy", "binary_cross_entropy_weighted",
                                    "binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits_weighted"})
# ...whose first input is only added to (scaled by a number): its gradient is the cotangent's
ADDENDS = SCALED_PRODUCTS | {"adam_exp_avg_sq", "adam_update"}


def keeps_tensors(node) -> bool:
    """Whether PyTorch's backward of ``node`` keeps any tensor, an index or mask included: a backward
    through it after its graph was freed then raises."""
    name = node.op.name
    if name == "pad":  # ConstantPadNdBackward0 keeps only the sizes; a circular pad's CopySlices runs once
        return node.attrs[0] != "constant"
    return name in KEEPS_OTHERS or name in INDEXED or not _saves_nothing(node)


def _saves_nothing(node) -> bool:
    name = node.op.name
    return (not node.op.saves or name in SAVES_NOTHING or name == "lerp" and node.inputs[2].op is CONST  # LerpBackward0
            or name == "adaptive_avg_pool2d" and node.attrs[0] == (1, 1))  # PyTorch's mean over the plane


def saves_output(node) -> bool:
    """Whether PyTorch's backward of ``node`` keeps its result."""
    name = node.op.name
    return (name in SAVES_RESULT or name in SAVES_BOTH or name == "pow" and node.inputs[1].requires_grad
            or name == "var" and node.attrs[-1] in ("StdBackward0", "StdMeanBackward0"))  # (std's result)


def gradient_reads(node, position: int) -> list:
    """The tensors that require grad which PyTorch's gradient toward input ``position`` of ``node``
    reads (under ``create_graph``): their history is its history, even from a cotangent without any."""
    name, inputs = node.op.name, node.inputs
    if (name in SELECTS or name in DROPS_THE_COTANGENT or position == 0 and (name in ADDENDS or name in ("remainder", "fmod"))
            or position == 1 and name == "copysign" or position == 2 and name == "linear"
            or name == "group_norm" and node.attrs[3] and position == len(inputs) - 1  # a bias
            or name == "triangular_solve" and node.attrs[0] == 1  # the copy of the matrix
            or _of_one_element(node)):
        return []
    if name in ("xlogy", "div") and position == 0:  # x's gradient reads y (xlogy's x only through x != 0)
        return [inputs[1]] if inputs[1].requires_grad else []
    if name in BINARY_CROSS_ENTROPIES and position == 1:  # the target's gradient reads the input alone
        return [inputs[0]] if inputs[0].requires_grad else []
    linear = name in PRODUCTS or name in SCALED_PRODUCTS and not (name == "addcdiv" and position == 2)
    read = [i for k, i in enumerate(inputs)
            if i.requires_grad and saves_input(node, k) and not (linear and k == position)]
    return read + [node] if saves_output(node) and node.requires_grad else read


def read_again(node, position: int, cotangent_has_history: bool) -> list:
    """The tensors PyTorch's second backward unpacks from the gradient toward input ``position`` of
    ``node`` (a write since the first backward refuses it): the formula's reads where it is
    differentiated, toward the cotangent when that has history (the cotangent's factor: what the
    backward keeps), else toward the reads that require grad (``gradient_reads``); a product is
    linear in each factor, so differentiating it toward one reads only the cotangent."""
    name, inputs = node.op.name, node.inputs
    if name in SELECTS or name in DROPS_THE_COTANGENT:  # a mask made at the first backward, or nothing
        return []
    if name in PRODUCTS or name in SCALED_PRODUCTS and name != "addcdiv":
        first, factors = _factors(node)
        if not cotangent_has_history or not first <= position < first + len(factors):
            return []
        read = [i for k, i in enumerate(factors, first) if k != position]
    elif cotangent_has_history:
        read = [i for k, i in enumerate(inputs) if saves_input(node, k)] + ([node] if saves_output(node) else [])
    else:
        read = gradient_reads(node, position)
    # an in-place op keeps a copy of the self it wrote (``check_saved``)
    return [i for i in read if not (i is inputs[0] and i.written is not None and _the_write(node, i.written[2]))]


def _factors(node) -> tuple:
    """The position of a product's first factor, and its factors: linear's bias and a scaled
    product's addend are none (never read)."""
    inputs = node.inputs
    if node.op.name in SCALED_PRODUCTS:
        return 1, inputs[1:3]
    return 0, inputs[:2] if node.op.name == "linear" else inputs


def _of_one_element(node) -> bool:
    """PyTorch's backwards that return the cotangent as it is for a single element: prod and
    logcumsumexp of a 0-d tensor, cumprod along a dim of one element or none, det of 1x1 matrices."""
    if not node.inputs:
        return False
    name, shape = node.op.name, node.inputs[0].shape
    if name in ("prod", "logcumsumexp"):
        return shape == ()
    if name == "cumprod":
        return shape == () or shape[node.attrs[0]] <= 1
    return name == "det" and shape[-1:] == (1,)


def saves_input(node, position: int) -> bool:
    """Whether PyTorch's backward of ``node`` keeps its input at ``position``."""
    op = node.op
    if op.name in INDEXED and not node.inputs[position].dtype.is_floating_point:
        return True
    if op.name == "put_at":  # index_add_ and put_ keep the source (its shape), index_put_ the indices only
        return position == 1 and node.attrs[-1] != "IndexPutBackward0"
    if op.name in ("convolution_bias", "conv_transpose_bias") and position == len(node.inputs) - 1:
        return False  # ConvolutionBackward0 keeps the bias's sizes only
    if op.name == "pad":  # only reflecting and replicating read the input again
        return node.attrs[0] in ("reflect", "replicate")
    if _saves_nothing(node) or op.name in SAVES_RESULT or op.name in KEEPS_OTHERS or op.name == "embedding":
        return False
    inputs = node.inputs
    if op.name == "addcdiv" and position == 2:  # PyTorch keeps the divisor whatever needs a gradient
        return True
    if op.name in PRODUCTS or op.name in SCALED_PRODUCTS:  # each factor is kept for the others' gradients
        first, factors = _factors(node)
        return (first <= position < first + len(factors)
                and any(n.requires_grad for k, n in enumerate(factors, first) if k != position))
    if op.name == "lerp":  # the ends' gradients read the weight; the weight's reads both ends
        return inputs[2].requires_grad if position < 2 else inputs[0].requires_grad or inputs[1].requires_grad
    if op.name == "ldexp":  # x's gradient reads the exponent, the exponent's the result
        return position == 1
    if op.name == "div":
        return inputs[1].requires_grad or (position == 1 and inputs[0].requires_grad)
    if op.name == "remainder":  # x % number: the gradient is the cotangent; x % y reads both for y's
        return inputs[1].op is not CONST and inputs[1].requires_grad
    if op.name == "fmod":  # as remainder: x's gradient is the cotangent, y's reads both
        return inputs[1].requires_grad
    if op.name == "hypot":  # each gradient reads its own input and the result
        return inputs[position].requires_grad
    if op.name == "copysign":  # x's gradient reads x and the result; y's is zeros
        return position == 0 and inputs[0].requires_grad
    return True


def _refuse(written, saved=None, name=None) -> None:
    """PyTorch names the saved node (an output, or a view of a written base: ``name`` AsStrided, as
    PyTorch's view after the write), else the tensor's grad_fn after the write."""
    storage, version, new = written
    node = saved or new()
    if name is None:
        grad_fn = grad_fn_of(node) if node is not None else None
        name = "" if grad_fn is None else type(grad_fn).__name__.removesuffix("Backward0").replace("Backward", "")
    made_by = f", which is output 0 of {name}," if name else ""  # PyTorch's short names: Exp, Pow1
    kind = f"torch.{dtypes.torch_name(node.dtype)}Tensor" if node is not None else "a tensor"
    shape = list(node.shape) if node is not None else "?"
    raise RuntimeError(f"one of the variables needed for gradient computation has been modified by an inplace "
                       f"operation: [{kind} {shape}]{made_by} is at version {storage.version}; expected version "
                       f"{version} instead. Hint: enable anomaly detection to find the operation that failed to "
                       f"compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")

