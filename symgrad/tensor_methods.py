"""Tensor methods that are no op's public function: conversions, in-place fills, properties.

The ops' own methods (``exp``, ``__add__``, ``add_`` ...) come from the registry
(symgrad.namespace); these are the rest.
"""
from __future__ import annotations

import numbers
import operator
import warnings
from functools import partial

from symgrad import creation, devices, dtypes, engine, hooks, random
from symgrad.autograd.gradients import hooked_gradients
from symgrad.in_place_spellings import fill_diagonal_
from symgrad.inplace import assign, copy_, data, fill_inplace
from symgrad.legacy_types import type_of
from symgrad.nodes import leaf
from symgrad.ops import shape as S
from symgrad.ops.special import positive
from symgrad.tensor import Tensor
from symgrad.tracing import gradient_path


def _to(self, *args, **kwargs):
    """``to(dtype)`` / ``to(device)`` / ``to(other)``: a device must be one JAX has (symgrad.devices:
    never a silent CPU tensor for "cuda"); the tensors live on the CPU, so a dtype is the change."""
    target = kwargs.get("dtype")
    if kwargs.get("device") is not None:
        devices.check(kwargs["device"])
    for a in args:
        if isinstance(a, dtypes.dtype):
            target = a
        elif isinstance(a, Tensor):
            target = a.dtype
        elif a is not None:
            devices.check(a)
    return S.to_dtype(self, target) if target is not None else self


def _size_argument(name: str, sizes: tuple, size) -> tuple:
    """``new_ones(2, 3)``, ``new_ones((2, 3))``, ``new_ones(size=(2, 3))``, with PyTorch's errors."""
    if size is not None:
        if sizes:
            raise TypeError(f"{name}() got multiple values for argument 'size'")
        sizes = (size,)
    if not sizes:
        raise TypeError(f'{name}() missing 1 required positional arguments: "size"')
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    elif len(sizes) == 1 and not _is_index(sizes[0]):
        raise TypeError(f"{name}(): argument 'size' (position 1) must be tuple of ints, not {type(sizes[0]).__name__}")
    for position, s in enumerate(sizes):
        if not _is_index(s):
            raise TypeError(f"{name}(): argument 'size' (position 1) must be tuple of ints, but found element of "
                            f"type {type(s).__name__} at pos {position}")
    return tuple(operator.index(s) for s in sizes)


def _is_index(value) -> bool:
    return not isinstance(value, (bool, float, tuple, list)) and hasattr(value, "__index__")


def _new_filled(make, name: str):
    """``Tensor.new_ones`` and its kin: ``make``'s tensor with this one's dtype unless given."""
    def new(self, *sizes, size=None, dtype=None, device=None, requires_grad: bool = False):
        return make(_size_argument(name, sizes, size), dtype=dtype or self.dtype, device=device,
                    requires_grad=requires_grad)
    new.__name__ = name
    return new


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False):
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"new_full(): argument 'size' (position 1) must be tuple of ints, not {type(size).__name__}")
    return creation.full(_size_argument("new_full", (size,), None), fill_value, dtype=dtype or self.dtype,
                         device=device, requires_grad=requires_grad)


def new_tensor(self, data, dtype=None, device=None, requires_grad: bool = False):
    """A new leaf holding ``data`` in this tensor's dtype unless given (a float list into an
    integer tensor's dtype truncates, as PyTorch's)."""
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than "
                      "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
    return creation.tensor(data, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


def type_as(self, other):
    if not isinstance(other, Tensor):
        raise TypeError(f"type_as(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    return S.to_dtype(self, other.dtype)


def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator=None):
    return creation._fill(self, partial(random.cauchy, median=median, sigma=sigma), generator, "cauchy_")


def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator=None):
    return creation._fill(self, partial(random.log_normal, mean=mean, std=std), generator, "log_normal_")


def geometric_(self, p: float, *, generator=None):
    return creation._fill(self, partial(random.geometric, p=p), generator, "geometric_")


def _contains(self, element) -> bool:
    """``element in tensor``: whether any entry equals it (broadcast, as PyTorch's ``__contains__``)."""
    if not isinstance(element, (Tensor, numbers.Number)):
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}.")
    return bool((element == self).any().item())


def register_hook(self, hook) -> hooks.RemovableHandle:
    """``hook(grad)`` runs when backward has this tensor's gradient; a tensor it returns replaces it
    (a backward that reaches a hook runs in stages: docs/performance.md)."""
    if not self._node.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    node = self._node
    on_arrays = _on_arrays(hook, node.shape, node.dtype)
    return hooks.on_tensor(self, "grad", on_arrays) if node.is_leaf else hooks.on_node(node, on_arrays)


def register_post_accumulate_grad_hook(self, hook) -> hooks.RemovableHandle:
    """``hook(tensor)`` runs after backward has added to this leaf's ``.grad``."""
    if not self._node.is_leaf:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if not self._node.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    return hooks.on_tensor(self, "post", hook)


def _backward_creating_graph(self, seed, inputs) -> None:
    """Each ``.grad`` becomes a recorded gradient (symgrad.higher_order), added out of place to
    what it held, as PyTorch does under ``create_graph``, hooks run on the way; the graph is kept."""
    owners = [node.owner() for node in gradient_path(self._node, inputs)[1]]
    for owner, gradient in zip(owners, hooked_gradients(self._node, seed, owners)):
        owner._grad = gradient if owner._grad is None else owner._grad + gradient
        for hook in hooks.of_leaf(owner, "post") if owner._node.is_leaf else ():
            hook(owner)


def _set_grad(self, node) -> None:
    """``backward`` added to this tensor's gradient (``node``: the sum): a first gradient is a new
    ``.grad``; a later one is written into it in place, as PyTorch accumulates (its views and
    detached aliases see the sum, its version counts the write)."""
    if self._grad is None:
        self._grad = Tensor(node)
    else:
        assign(self._grad, node)


def _on_arrays(hook, shape, dtype):
    """The user's hook as the engine calls it: an array in, an array or None out, PyTorch's errors;
    ``run.on_tensor`` is the same hook on a recorded gradient (``create_graph``)."""
    name = getattr(hook, "__name__", type(hook).__name__)

    def on_tensor(gradient):
        result = hook(gradient)
        if result is None:
            return None
        if not isinstance(result, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
        if tuple(result.shape) != shape:
            raise RuntimeError(f"hook '{name}' has changed the size of value")
        return result

    def run(array):
        result = on_tensor(Tensor(leaf(array, dtype, shape=shape)))
        return None if result is None else engine.array(result._node)
    run.on_tensor = on_tensor
    return run


METHODS = {
    "_backward_creating_graph": _backward_creating_graph,
    "_set_grad": _set_grad,
    "register_hook": register_hook,
    "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook,
    "__pos__": positive, "positive": positive,
    "zero_": lambda a: fill_inplace(a, 0, "ZeroBackward0"),
    "fill_": lambda a, value: fill_inplace(a, value),
    "copy_": copy_,
    "data": data,
    "to": _to,
    "type": type_of,
    "float": lambda a: S.to_dtype(a, dtypes.float32),
    "double": lambda a: S.to_dtype(a, dtypes.float64),
    "half": lambda a: S.to_dtype(a, dtypes.float16),
    "long": lambda a: S.to_dtype(a, dtypes.int64),
    "int": lambda a: S.to_dtype(a, dtypes.int32),
    "short": lambda a: S.to_dtype(a, dtypes.int16),
    "char": lambda a: S.to_dtype(a, dtypes.int8),
    "byte": lambda a: S.to_dtype(a, dtypes.uint8),
    "bool": lambda a: S.to_dtype(a, dtypes.bool_),
    "cpu": lambda a: a,
    "cuda": lambda a, device=None: _to(a, device if device is not None else "cuda"),
    "is_cuda": property(lambda a: False),
    "uniform_": creation.uniform_, "normal_": creation.normal_, "random_": creation.random_,
    "fill_diagonal_": fill_diagonal_,
    "cauchy_": cauchy_, "log_normal_": log_normal_, "geometric_": geometric_,
    "exponential_": creation.exponential_, "bernoulli_": creation.bernoulli_, "bernoulli": creation.bernoulli,
    "multinomial": creation.multinomial,
    "new_ones": _new_filled(creation.ones, "new_ones"), "new_zeros": _new_filled(creation.zeros, "new_zeros"),
    "new_empty": _new_filled(creation.empty, "new_empty"), "new_full": new_full, "new_tensor": new_tensor,
    "type_as": type_as,
    "nelement": lambda a: a.numel(),
    "element_size": lambda a: a.dtype.itemsize,
    "__contains__": _contains,
    "T": property(S.matrix_transpose),
    "mT": property(lambda a: S.transpose(a, -2, -1)),
}


def attach() -> None:
    for name, method in METHODS.items():
        setattr(Tensor, name, method)


attach()
