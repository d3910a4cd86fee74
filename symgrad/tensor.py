"""Tensor: a handle on a graph node, with PyTorch's autograd attributes.

A Tensor is mutable only in which node it points at: an in-place operation records a new
node and moves the tensor to it, so a graph recorded earlier keeps the values it saw, as
PyTorch's eager evaluation would.  Values are computed by compiled programs when someone
looks (``print``, ``.item()``, ``.numpy()``) or when ``backward`` runs.
"""
from __future__ import annotations

import copy
import warnings
import weakref

import numpy as np


from symgrad import dtypes, engine, kinds, storage
from symgrad.formatting import format_tensor
from symgrad.grad_mode import _state as _grad_state
from symgrad.grad_mode import inference_active, is_grad_enabled
from symgrad.nodes import (LEAF, Node, RefusedHistory, check_history, combine, grad_fn_of, lazy_leaf, leaf, outlived, scalar,
                           aside, set_aside)
from symgrad.host_reads import host_array
from symgrad.uploads import from_host


class Tensor:
    # _hooks: unset until one is registered; _view, _storage: see symgrad.storage
    __slots__ = ("_node", "_grad", "_view", "_storage", "_inference", "_hooks", "__weakref__")
    __array_priority__ = 1000  # numpy defers to us: np.float32(0.1) * t is a Tensor, as in PyTorch

    def __init__(self, node: Node = None, *sizes):
        if node.__class__ is not Node:  # torch.Tensor(data) or torch.Tensor(2, 3), PyTorch's legacy spelling
            node = legacy_leaf(dtypes.get_default_dtype(), () if node is None else (node, *sizes))
        self._node = node
        self._grad = self._view = self._storage = None
        self._inference = False
        if inference_active[0] and _grad_state.inference:  # made in inference_mode
            self._inference = _inference_made[0] = True
        if node.requires_grad and node.op is LEAF:
            node.owner = weakref.ref(self)

    # ------------------------------------------------------------------ autograd state

    @property
    def requires_grad(self) -> bool:
        return self._node.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        node = self._node
        if not node.is_leaf:
            if requires_grad:
                return self
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to "
                               "use a computed variable in a subgraph that doesn't require differentiation "
                               "use var_no_grad = var.detach().")
        if requires_grad and self._inference and not _grad_state.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        if requires_grad and not node.dtype.is_floating_point:
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients "
                               f"(requires_grad_ on a tensor of dtype {node.dtype}, shape {tuple(node.shape)})")
        if requires_grad != node.requires_grad:
            self._rebind(_relabel(node, requires_grad))
        return self

    @property
    def is_leaf(self) -> bool:
        check_history(self._node)
        return self._node.is_leaf

    @property
    def grad_fn(self):
        return grad_fn_of(self._node)

    @property
    def grad(self):
        if not self._node.is_leaf and not self._node.retains_grad:
            warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                          "It is not filled in by backward(); call .retain_grad() on the non-leaf Tensor "
                          "if you want it, or access the leaf Tensor instead.", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                            f"{type(value).__name__}")
        if value is not None and tuple(value.shape) != self._node.shape:
            raise RuntimeError(f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of size "
                               f"'{list(self._node.shape)}'. Please ensure that the gradient and the tensor are "
                               f"the same size")
        self._grad = value

    @grad.deleter
    def grad(self):
        self.grad = None  # as PyTorch: ``del p.grad`` unsets it

    def retain_grad(self) -> None:
        node = self._node
        if not node.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if not node.is_leaf:
            node.retains_grad = True
            node.owner = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        return self._node.retains_grad

    def detach(self) -> "Tensor":
        """A leaf that shares this tensor's storage and records no history.  A step's trace names
        the detach of a result of its own (symgrad.cycles), so such a step replays."""
        cycle = _grad_state.cycle
        if cycle is not None and cycle.replaying:
            traced = cycle.detach(self)
            if traced is not None:
                return traced
            cycle = _grad_state.cycle  # (it may have fallen back)
        node = lazy_leaf(self._node)
        if cycle is not None and not cycle.replaying and not cycle.broken:
            cycle.detached(self, node)
        detached = storage.viewed(self, Tensor(node), storage.DETACH)
        storage.note_detached(self._storage, node)
        return detached

    def detach_(self) -> "Tensor":
        self._rebind(lazy_leaf(self._node))
        return self

    def is_inference(self) -> bool:
        return bool(self._inference)

    @property
    def _base(self):
        """The tensor a view was made from (through views only), as PyTorch's ``_base``."""
        return storage.root_of(self)

    @property
    def _version(self) -> int:
        """How many in-place writes its storage has had."""
        return 0 if self._storage is None else self._storage.version

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        cycle = _grad_state.cycle
        if (cycle is not None and self.__class__ is not Tensor and cycle.replaying and gradient is None
                and not retain_graph and not create_graph and inputs is None and cycle.backward(self)):
            return
        root = self._node
        if not root.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        check_history(root)
        if gradient is None and dtypes.Size(root.shape).numel() != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                               f"(backward() on a tensor of shape {tuple(root.shape)}; pass gradient=)")
        seed = None if gradient is None else _gradient_node(gradient, root)
        if isinstance(inputs, Tensor):
            inputs = [inputs]
        if create_graph:  # symgrad.tensor_methods
            self._backward_creating_graph(seed, inputs)
        else:
            before = self._before_backward(cycle)  # symgrad.cycles: this thread's step, seen from its end
            ran = engine.backward(root, seed, bool(retain_graph), inputs, describe=before is not None)
            self._after_backward(root, ran, before)
            if aside:  # results without history held pending: their values now (engine.compute_kept)
                engine.compute_kept()

    # ------------------------------------------------------------------- shape & type

    @property
    def shape(self) -> dtypes.Size:
        return dtypes.Size(self._node.shape)

    def size(self, dim=None):
        shape = self._node.shape
        return dtypes.Size(shape) if dim is None else dtypes.size_at(shape, dim)

    @property
    def dtype(self):
        return self._node.dtype

    @property
    def ndim(self) -> int:
        return len(self._node.shape)

    def dim(self) -> int:
        return len(self._node.shape)

    def numel(self) -> int:
        return dtypes.Size(self._node.shape).numel()

    def __len__(self):
        if not self._node.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._node.shape[0]

    @property
    def device(self) -> dtypes.device:
        return dtypes.CPU

    def is_floating_point(self) -> bool:
        return self._node.dtype.is_floating_point

    # ----------------------------------------------------------------------- values

    def _value(self):
        return engine.array(self._node)

    def numpy(self) -> np.ndarray:
        if self.requires_grad:  # (a replayed result answers from its kind: asked its node, its cycle falls back)
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return np.array(host_array(self._value()))

    def __array__(self, dtype=None, copy=None):
        array = host_array(self._value())
        return array.astype(dtype) if dtype is not None else array

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return host_array(self._value()).reshape(()).item()

    def tolist(self):
        return host_array(self._value()).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __index__(self):
        if self._node.dtype.is_floating_point:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __format__(self, spec):
        if not self.dim():  # PyTorch formats a 0-dim tensor as its number
            return format(self.item(), spec)
        return object.__format__(self, spec) if spec else repr(self)

    def __repr__(self):
        if not self.requires_grad:  # no history to name: a replayed result prints from its kind and values
            return format_tensor(host_array(self._value()), self.dtype)  # (asked its node, its cycle falls back)
        node = self._node
        if node.grad_fn_object.__class__ is RefusedHistory:
            name = "Invalid"  # PyTorch's word for a history it refuses
        else:
            grad_fn = grad_fn_of(node)
            name = type(grad_fn).__name__ if grad_fn is not None else None
        return format_tensor(host_array(self._value()), node.dtype, grad_fn=name, requires_grad=node.requires_grad)

    __str__ = __repr__

    def __hash__(self):
        return id(self)

    # --------------------------------------------------------------------- copy & pickle

    def __reduce__(self):
        """pickle and ``copy.copy``: the values and requires_grad, not ``.grad`` nor history (a
        result comes back as a leaf that requires grad), as PyTorch."""
        return _unpickled, (np.array(engine.array(self._node)), self._node.requires_grad)

    def __deepcopy__(self, memo):
        """A new leaf with these values, requires_grad and a copy of ``.grad``; PyTorch refuses a
        tensor with history."""
        node = self._node
        if not node.is_leaf:
            raise RuntimeError(DEEPCOPY_NON_LEAF)
        copied = memo[id(self)] = Tensor(leaf(engine.array(node), node.dtype, node.requires_grad))
        copied._grad = copy.deepcopy(self._grad, memo)
        return copied

    # --------------------------------------------------------------------- plumbing

    def _rebind(self, node: Node) -> None:
        """Point this tensor at a new node (an in-place op or a requires_grad change).

        A retained gradient follows the tensor: after ``h.retain_grad(); h.mul_(2)`` it is the
        gradient of the new values, as in PyTorch."""
        _grad_state.changes += 1
        old, self._node = self._node, node
        if node.requires_grad and node.op is LEAF:
            node.owner = weakref.ref(self)
        elif old.retains_grad and node.requires_grad:
            old.retains_grad, old.owner = False, None
            node.retains_grad, node.owner = True, weakref.ref(self)


DEEPCOPY_NON_LEAF = ("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at "
                     "the moment.  If you were attempting to deepcopy a module, this may be because of a "
                     "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001")


def legacy_leaf(dtype, args: tuple) -> Node:
    """``torch.Tensor(...)``/``torch.FloatTensor(...)``: sizes (zeros here: PyTorch leaves the memory
    uninitialised), data (a list, an array, a tensor), or nothing (an empty tensor)."""
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        values = np.zeros(args if args else (0,))
    elif len(args) == 1:
        values = np.asarray(args[0].detach().numpy() if isinstance(args[0], Tensor) else args[0])
    else:
        raise TypeError(f"new() received an invalid combination of arguments - got {tuple(type(a).__name__ for a in args)}")
    return leaf(from_host(values.astype(dtype.numpy)), dtype)


def _unpickled(values: np.ndarray, requires_grad: bool) -> Tensor:
    """The leaf a pickled tensor comes back as."""
    return Tensor(leaf(from_host(np.asarray(values)), dtypes.from_numpy(values.dtype), requires_grad))


def _relabel(node: Node, requires_grad: bool) -> Node:
    if node.op is LEAF:
        return Node(LEAF, node.inputs, (), node.shape, node.dtype, requires_grad, node.value)
    return lazy_leaf(node, requires_grad)


def as_node(value) -> Node:
    """The node of a tensor, or a constant node for a Python number."""
    if value.__class__ is float:
        return scalar(value)
    if isinstance(value, Tensor):
        return value._node
    if isinstance(value, (bool, int, float)):
        return scalar(value)
    if isinstance(value, np.generic):
        return scalar(value.item())
    if isinstance(value, np.ndarray):
        return _array_leaf(value, dtypes.from_numpy(value.dtype))
    raise TypeError(f"expected a Tensor or a number, got {type(value).__name__}")


def _describe(nodes) -> str:
    shapes = ", ".join(str(tuple(n.shape)) if n.op.name != "const" else repr(n.attrs[0]) for n in nodes)
    kinds = ", ".join(repr(n.dtype) for n in nodes)
    return f"shapes {shapes}; dtypes {kinds}"


def apply(op, *args, attrs: tuple = ()) -> Tensor:
    """Record ``op`` on ``args`` (tensors or numbers): check shapes now, compute later.  A thread
    replaying its step (symgrad.cycles) only checks the op against the step's trace."""
    cycle = _grad_state.__dict__["cycle"]  # (the thread's dict: grad_mode._State)
    if cycle is not None and cycle.replaying:
        traced = cycle.op(op, args, attrs)
        if traced is not None:
            if op.view:  # its base's storage takes it if it outlives the cycle (symgrad.replaying)
                cycle.viewed(traced, args[0], (op, attrs))
            return traced
        cycle = _grad_state.cycle  # fell back: the cycle recording the rest
    if len(args) == 2:  # most ops: spelled out, as this runs for every op recorded
        a, b = args
        nodes = (a._node if a.__class__ is Tensor else as_node(a), b._node if b.__class__ is Tensor else as_node(b))
    elif len(args) == 1 and args[0].__class__ is Tensor:
        nodes = (args[0]._node,)
    else:
        nodes = tuple([a._node if a.__class__ is Tensor else as_node(a) for a in args])
    node = record(op, nodes, attrs)
    if dual_ops:  # a forward-AD dual level is open: symgrad.autograd.forward_ad records the op on duals' shadows
        dual_ops[0](op, nodes, attrs, node)
    if op.view:  # traced as any op (symgrad.cycles): a write to the view or to its base is not
        if cycle is not None and not cycle.broken:
            cycle.recorded(op, args, nodes, attrs, node)
        return storage.viewed(args[0], Tensor(node), (op, attrs))
    if _inference_made[0] and node.requires_grad:
        _refuse_saved_inference(node, args)
    if cycle is not None and not cycle.broken:  # symgrad.cycles: traced (a resting cycle traces nothing)
        cycle.recorded(op, args, nodes, attrs, node)
    return Tensor(node)


_inference_made = [False]  # until an inference tensor exists, recording asks nothing of its inputs
dual_ops: list = []  # while a dual level is open, symgrad.autograd.forward_ad's recorder


def _refuse_saved_inference(node, args) -> None:
    """PyTorch's error when an op recorded for backward keeps an inference tensor."""
    for position, a in enumerate(args):
        if isinstance(a, Tensor) and a._inference and storage.saves_input(node, position):
            raise RuntimeError("Inference tensors cannot be saved for backward. Please do not use Tensors created in "
                               "inference mode in computation tracked by autograd. To work around this, you can make "
                               "a clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` "
                               f"instead of `torch.inference_mode()`. [{node.op.name} on {_describe(node.inputs)}]")


def record(op, nodes: tuple, attrs: tuple = ()) -> Node:
    """The node of ``op`` on ``nodes``.  A kind recorded before knows the result's shape, dtype
    and requires_grad; a new one runs the op's shape and dtype rule (raising at the user's line)."""
    _grad_state.changes += 1
    key, arguments, pending = combine(op, nodes, attrs, _grad_state.enabled)
    kind = kinds.known(key) if key is not None else None
    if kind is not None:
        node = Node(op, nodes, attrs, kind.shape, kind.dtype, kind.requires_grad, None, kind, arguments, pending)
        if not kind.requires_grad:
            set_aside(node, nodes)
        return node
    try:
        shape, dtype = op.infer(nodes, *attrs)
    except ValueError as error:
        raise RuntimeError(f"{error} [{op.name}: {_describe(nodes)}]") from None
    requires_grad = False
    for n in nodes:
        if n.requires_grad:
            requires_grad = _grad_state.enabled and dtype.is_floating_point  # integer results carry no gradient
            break
    if requires_grad:
        for n in nodes:
            check_history(n)
    if not requires_grad:
        # Checked only here (a graph that grows step by step makes new kinds), and only for a result
        # without history: one with history is computed, with the pending leaves it holds, by its backward.
        # Inputs without history at the end of a long run of nodes without a kind (a running total,
        # or a parameter updated again and again, that nobody reads) are computed now too, so that
        # such a chain stays bounded (MAX_UNKINDED_RUN nodes).
        run = 1 + max([_unkinded(n) for n in nodes if n.kind is None and n.value is None] or [0])
        stale = [n for n in nodes if outlived(n) or (run > MAX_UNKINDED_RUN and n.kind is None and n.value is None
                                                     and (n.op is LEAF or not n.requires_grad))]
        if stale:
            engine.realize_outlived(stale)
            _grad_state.changes -= 1  # one node recorded, counted by the call below (a trace checks the count)
            return record(op, nodes, attrs)
    else:
        run = 0
    if key is not None:
        kind = kinds.intern(key, shape, dtype, requires_grad)
    node = Node(op, nodes, attrs, shape, dtype, requires_grad, None, kind, arguments, pending)
    if kind is None:
        node.unkinded = run
    if not requires_grad:
        set_aside(node, nodes)
    return node


MAX_UNKINDED_RUN = 256  # nodes without a kind in a row before a value without history is computed


def _unkinded(node: Node) -> int:
    """The run of nodes without a kind that ends at ``node`` (a pending leaf continues its source's)."""
    while node.op is LEAF and node.inputs and not hasattr(node, "unkinded"):
        node = node.inputs[0]
    return getattr(node, "unkinded", 0)


def _array_leaf(array, dtype) -> Node:
    return leaf(from_host(np.asarray(array, dtype=dtype.numpy)), dtype)


def _gradient_node(gradient, root: Node) -> Node:
    """``backward(gradient)``'s seed, of the root's dtype; PyTorch's error for another shape."""
    if isinstance(gradient, Tensor) and gradient.dtype is root.dtype:
        node = gradient._node
    else:
        node = _array_leaf(gradient, root.dtype)
    if node.shape != root.shape:
        raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of torch.Size({list(node.shape)}) "
                           f"and output[0] has a shape of torch.Size({list(root.shape)}).")
    return node
