"""``torch.nn.utils.prune``: a parameter ``name`` becomes ``name_orig`` (the parameter trained) times
``name_mask`` (a buffer of zeros and ones), recomputed by a forward pre-hook before every call.

Masks are chosen on the host from the tensors' values (a choice, not a computation to
differentiate), so choosing one compiles nothing.  The choice is PyTorch's entry for entry: the
random methods draw ``rand_like``/``rand`` from the same generator, and ``topk``'s selection among
equal values is the one PyTorch's CPU kernel makes (``symgrad.cpu_topk``).  Pruning a parameter again
combines the masks as PyTorch's PruningContainer does: the new method sees only what is left.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np

from symgrad import creation
from symgrad.cpu_topk import kernel_topk
from symgrad.ops.reductions import norm
from symgrad.tensor import Tensor

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


def _check_amount(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    whole = isinstance(amount, numbers.Integral)
    if (whole and amount < 0) or (not whole and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _how_many(amount, size: int) -> int:
    """An int amount is a count, a float a fraction (rounded half to even, as Python's ``round``)."""
    count = amount if isinstance(amount, numbers.Integral) else round(amount * size)
    if isinstance(count, numbers.Integral) and count > size:
        raise ValueError(f"amount={count} should be smaller than the number of parameters to prune={size}")
    return count


def _channel_axis(t, dim: int) -> int:
    shape = t.shape
    if len(shape) <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {shape} with {len(shape)} dims")
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")
    return dim % t.dim()


def _host(t) -> np.ndarray:
    return np.asarray(t.detach() if isinstance(t, Tensor) else t)


def _mask_tensor(values: np.ndarray, like: Tensor) -> Tensor:
    return creation.tensor(values, dtype=like.dtype)


def _channel_mask(t, axis: int, keep: np.ndarray) -> np.ndarray:
    """Ones on the channels ``keep`` (positions or booleans) along ``axis``, zeros elsewhere."""
    mask = np.zeros(tuple(t.shape), dtype=t.dtype.numpy)
    index = [slice(None)] * t.dim()
    index[axis] = keep
    mask[tuple(index)] = 1
    return mask


# ------------------------------------------------------------------ the methods


class BasePruningMethod(ABC):
    """A way of choosing a mask.  A subclass defines ``compute_mask(t, default_mask)`` (and a
    ``PRUNING_TYPE``: 'unstructured', 'structured' with a ``dim``, or 'global'); ``apply``
    reparametrizes a module's tensor with it, and the instance then serves as the forward pre-hook
    that recomputes the pruned tensor."""

    _tensor_name: str

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for ``t``, keeping the zeros of ``default_mask``."""

    def apply_mask(self, module):
        """The pruned tensor: the module's mask times its original tensor."""
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``, on top of any earlier pruning of it;
        the mask is chosen from ``importance_scores`` (the tensor itself when None)."""
        method = _combined(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is not None:
            assert importance_scores.shape == orig.shape, \
                f"importance_scores should have the same shape as parameter {name} of {module}"
        else:
            importance_scores = orig
        first_time = not isinstance(method, PruningContainer)
        if first_time:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = creation.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first_time:  # put the parameter back as it was
                module.register_parameter(name, module._parameters.pop(name + "_orig"))
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times the mask this method chooses for it."""
        if importance_scores is not None:
            assert importance_scores.shape == t.shape, "importance_scores should have the same shape as tensor t"
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else creation.ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: ``module.<name>`` becomes a parameter holding the pruned
        values, and ``<name>_orig`` and ``<name>_mask`` go."""
        pruned = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = pruned.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _combined(cls, module, name, *args, **kwargs):
    """The method to run: a new ``cls``, or, when ``name`` is pruned already, the container of the
    earlier methods with it appended (the earlier hook taken off; ``apply`` registers the result)."""
    earlier = [(key, hook) for key, hook in module._forward_pre_hooks.items()
               if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    assert len(earlier) <= 1, (f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. "
                               "Use a PruningContainer.")
    for key, _ in earlier:
        del module._forward_pre_hooks[key]
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if not earlier:
        return method
    old = earlier[0][1]
    if not isinstance(old, PruningContainer):
        old = PruningContainer(old)
    old.add_pruning_method(method)
    return old


class PruningContainer(BasePruningMethod):
    """The methods applied one after another to one tensor; its mask is the last method's, chosen
    among what the earlier ones left."""

    def __init__(self, *args):
        self._pruning_methods: tuple = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        if method is not None and not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' to "
                             f"PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """The last method's mask on the part of ``t`` still unpruned: the entries left (unstructured),
        the channels with an entry left (structured), or all of it (global)."""
        method = self._pruning_methods[-1]
        values, mask = _host(t), _host(default_mask).astype(t.dtype.numpy)
        if method.PRUNING_TYPE == "unstructured":
            part = mask == 1
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute `dim` '
                                     "defined.")
            axis = method.dim + t.dim() if method.dim < 0 else method.dim
            if axis < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {t.dim()}")
            index = [slice(None)] * t.dim()
            index[axis] = mask.sum(axis=tuple(d for d in range(t.dim()) if d != axis)) != 0
            part = tuple(index)
        elif method.PRUNING_TYPE == "global":
            part = (slice(None),) * t.dim()
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        chosen = method.compute_mask(creation.tensor(values[part], dtype=t.dtype),
                                     default_mask=creation.tensor(mask[part], dtype=t.dtype))
        mask[part] = _host(chosen)
        return _mask_tensor(mask, t)


class Identity(BasePruningMethod):
    """Prunes nothing: the mask stays ones (the reparametrization alone)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` entries drawn at random: those of the largest ``rand_like`` draws."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        count = _how_many(self.amount, t.numel())
        mask = _host(default_mask).copy()
        if count:
            draws = _host(creation.rand_like(t)).reshape(-1)
            mask.reshape(-1)[kernel_topk(draws, count, largest=True)] = 0
        return _mask_tensor(mask, default_mask)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the ``amount`` entries of smallest magnitude."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        count = _how_many(self.amount, t.numel())
        mask = _host(default_mask).copy()
        if count:
            mask.reshape(-1)[kernel_topk(np.abs(_host(t)).reshape(-1), count, largest=False)] = 0
        return _mask_tensor(mask, default_mask)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` channels along ``dim`` drawn at random: those whose ``rand`` draw is at most
    the ``amount``-th smallest."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        axis = _channel_axis(t, self.dim)
        channels = t.shape[self.dim]
        count = _how_many(self.amount, channels)
        if count == 0:
            return default_mask
        draws = _host(creation.rand(channels))
        mask = _channel_mask(t, axis, draws > np.sort(draws)[count - 1])
        return _mask_tensor(mask * _host(default_mask).astype(mask.dtype), t)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of smallest L``n`` norm (``n`` as ``torch.norm``'s
    ``p``)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        axis = _channel_axis(t, self.dim)
        channels = t.shape[self.dim]
        count = _how_many(self.amount, channels)
        norms = norm(t.detach(), p=self.n, dim=[d for d in range(t.dim()) if d != axis])
        keep = kernel_topk(_host(norms), channels - count, largest=True)
        if count == 0:
            return default_mask
        mask = _channel_mask(t, axis, keep)
        return _mask_tensor(mask * _host(default_mask).astype(mask.dtype), t)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given mask is zero."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match self.mask shape "
                                 f"{self.mask.shape}")
        return _mask_tensor(_host(default_mask) * _host(self.mask).astype(default_mask.dtype.numpy), default_mask)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# ------------------------------------------------------------------ the functions


def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs) -> None:
    """Prune the ``(module, name)`` tensors together: one mask is chosen over all their entries (by
    an unstructured method, made from ``kwargs``), then each takes its part."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    tensors = [getattr(module, name) for module, name in parameters]
    scores = np.concatenate([_host(importance_scores.get((module, name), t)).reshape(-1)
                             for (module, name), t in zip(parameters, tensors)])
    masks = np.concatenate([_host(getattr(module, name + "_mask")).reshape(-1) if hasattr(module, name + "_mask")
                            else np.ones(t.numel(), t.dtype.numpy) for (module, name), t in zip(parameters, tensors)])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    dtype = tensors[0].dtype
    final = _host(container.compute_mask(creation.tensor(scores, dtype=dtype), creation.tensor(masks, dtype=dtype)))
    start = 0
    for (module, name), t in zip(parameters, tensors):
        custom_from_mask(module, name, mask=creation.tensor(final[start:start + t.numel()].reshape(tuple(t.shape)),
                                                             dtype=dtype))
        start += t.numel()


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent (see ``BasePruningMethod.remove``)."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module) -> bool:
    """Whether any submodule has a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, sub in module.named_modules() for hook in sub._forward_pre_hooks.values())
