"""``torch.nn.utils.parametrize``: a module's tensor recomputed from other tensors on every read.

Registering a parametrization on ``module.weight`` moves the parameter (or buffer) into
``module.parametrizations.weight`` (a :class:`ParametrizationList`, under ``original``, or
``original0``, ``original1``, ... when ``right_inverse`` returns several tensors) and swaps the
module's class for a subclass of its own, ``Parametrized<Name>``, whose property ``weight`` runs
the chain.  So state_dict keys, ``repr``, ``named_parameters`` and the gradients of the originals
come out as PyTorch's, and removing the last parametrization gives the module its class back.
The chain is ordinary symgrad ops: its gradient is the ops' own.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from contextlib import contextmanager

from symgrad.grad_mode import no_grad
from symgrad.nn.containers import ModuleDict, ModuleList
from symgrad.nn.module import Module, Parameter
from symgrad.tensor import Tensor

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations", "transfer_parametrizations_and_params"]

_cache_depth = 0
_cache: dict = {}  # (id(module), name) -> the value read first inside ``cached()``


@contextmanager
def cached():
    """Inside, each parametrized tensor is computed once, at its first read, and reused (a weight
    read at every step of a loop builds its chain once); the values are dropped on leaving the
    outermost ``cached()``."""
    global _cache_depth, _cache
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache = {}


def _register(module: Module, name: str, tensor: Tensor) -> None:
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def _set_values(destination: Tensor, source: Tensor) -> None:
    """PyTorch's ``set_``: the tensor object stays (an optimizer holding it goes on updating it)."""
    if source is not destination:  # an identity right_inverse hands the original back
        destination.data = source


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in registration order to the tensor(s) held
    here: ``original``, or ``original0``, ``original1``, ... when the first ``right_inverse``
    returns a sequence.  The originals start as ``right_inverse`` of the registered tensor."""

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        with no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             f"Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            self._hold_one(original, new)
        else:
            self._hold_several(original, new)
        if not unsafe:
            _check_result(self(), shape, dtype)

    def _hold_one(self, original: Tensor, new: Tensor) -> None:
        if original.dtype != new.dtype:
            raise ValueError("When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                             f"original.dtype: {original.dtype}\n"
                             f"right_inverse(original).dtype: {new.dtype}")
        with no_grad():
            _set_values(original, new)
        _register(self, "original", original)

    def _hold_several(self, original: Tensor, new: Sequence) -> None:
        for i, tensor in enumerate(new):
            if not isinstance(tensor, Tensor):
                raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                                 f"Got element {i} of the sequence with type {type(tensor).__name__}.")
            if isinstance(original, Parameter):
                tensor = Parameter(tensor, original.requires_grad)
            tensor.requires_grad_(original.requires_grad)
            _register(self, f"original{i}", tensor)

    def right_inverse(self, value: Tensor) -> None:
        """Assigning to the parametrized tensor: every ``right_inverse``, last registered first,
        then the result becomes the originals' values."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                                     f"while `original` has dtype {self.original.dtype}")
                _set_values(self.original, value)
            else:
                self._set_several(value)

    def _set_several(self, values) -> None:
        if not isinstance(values, Sequence):
            raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(values).__name__}.")
        if len(values) != self.ntensors:
            raise ValueError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                             f"Got a sequence of length {len(values)}.")
        for i, tensor in enumerate(values):
            if not isinstance(tensor, Tensor):
                raise ValueError("'right_inverse' must return a sequence of tensors or reference-type opaques. "
                                 f"Got element {i} of type {type(tensor).__name__}.")
            original = getattr(self, f"original{i}")
            if original.dtype != tensor.dtype:
                raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} "
                                 f"while `original{i}` has dtype {original.dtype}")
            _set_values(original, tensor)

    def forward(self) -> Tensor:
        first, *rest = self
        if self.is_tensor:
            x = first(self.original)
        else:
            x = first(*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in rest:
            x = module(x)
        return x


def _check_result(result, shape, dtype) -> None:
    if not isinstance(result, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(result).__name__}.")
    if result.dtype != dtype:
        raise ValueError("Registering a parametrization may not change the dtype of the tensor, unless `unsafe` "
                         f"flag is enabled.\nunparametrized dtype: {dtype}\nparametrized dtype: {result.dtype}")
    if result.shape != shape:
        raise ValueError("Registering a parametrization may not change the shape of the tensor, unless `unsafe` "
                         f"flag is enabled.\nunparametrized shape: {shape}\nparametrized shape: {result.shape}")


def _refuse_pickling(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through state_dict(). See:\n"
                       "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
                       "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")


def _copied(self, memo):
    """``copy.deepcopy`` without pickling (which the class refuses): a new instance of the same
    generated class, its attributes deep-copied."""
    if id(self) in memo:
        return memo[id(self)]
    replica = memo[id(self)] = self.__class__.__new__(self.__class__)
    replica.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return replica


def _give_own_class(module: Module) -> None:
    """A subclass for this module alone, so the properties added to it touch no other module."""
    cls = module.__class__
    namespace = {"__getstate__": _refuse_pickling}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _copied
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _add_property(module: Module, name: str) -> None:
    def parametrized(self) -> Tensor:
        chain = self.parametrizations[name]
        if not _cache_depth:
            return chain()
        key = (id(self), name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = chain()
        return value

    def assign(self, value: Tensor) -> None:
        self.parametrizations[name].right_inverse(value)

    setattr(module.__class__, name, property(parametrized, assign))


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Makes ``module.<tensor_name>`` read as ``parametrization`` of what it was (or of the
    parametrizations already on it); ``unsafe`` skips the checks that shape and dtype stay."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_appended(module, tensor_name, parametrization)
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        chain = ParametrizationList([parametrization], getattr(module, tensor_name), unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _give_own_class(module)
            module.parametrizations = ModuleDict()
        _add_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def _check_appended(module: Module, name: str, parametrization: Module) -> None:
    """A parametrization added to a chain keeps the tensor's shape and dtype, and so does its
    ``right_inverse``: PyTorch's checks and messages."""
    before = getattr(module, name)
    after = parametrization(before)
    if not isinstance(after, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(after).__name__}.")
    if after.dtype != before.dtype:
        raise ValueError("Registering a parametrization may not change the dtype of the tensor, unless the `unsafe` "
                         f"flag is enabled.\nmodule.{name}.dtype: {before.dtype}\n"
                         f"parametrization(module.{name}).dtype: {after.dtype}")
    if after.shape != before.shape:
        raise ValueError("Registering a parametrization may not change the shape of the tensor, unless the `unsafe` "
                         f"flag is enabled.\nmodule.{name}.shape: {before.shape}\n"
                         f"parametrization(module.{name}).shape: {after.shape}")
    if not hasattr(parametrization, "right_inverse"):
        return
    try:
        back = parametrization.right_inverse(after)
    except NotImplementedError:
        return
    if not isinstance(back, Tensor):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: {type(back).__name__}")
    if back.dtype != before.dtype:
        raise ValueError("The tensor returned by parametrization.right_inverse must have the same dtype "
                         f"as module.{name}, unless the `unsafe` flag is enabled.\n"
                         f"module.{name}.dtype: {before.dtype}\nreturned dtype: {back.dtype}")
    if back.shape != before.shape:
        raise ValueError("The tensor returned by parametrization.right_inverse must have the same shape "
                         f"as module.{name}, unless the `unsafe` flag is enabled.\n"
                         f"module.{name}.shape: {before.shape}\nreturned shape: {back.shape}")


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` (or its ``tensor_name``) has a parametrization."""
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Makes ``module.<tensor_name>`` a plain parameter (or buffer) again: holding the current
    parametrized value (``leave_parametrized``), else the original; the original tensor object is
    kept, so an optimizer built on it still updates it."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                _set_values(original, getattr(module, tensor_name))
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value) if value.requires_grad else value
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                         "that is parametrized in terms of a sequence of tensors.")
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class as it was before its first parametrization."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Registers ``from_module``'s parametrizations (all, or those of ``tensor_name``) on
    ``to_module`` too, sharing the original tensors; a missing tensor is first created on
    ``to_module`` from ``from_module``'s parametrized value."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        source = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        held = ["original"] if source.is_tensor else [f"original{i}" for i in range(source.ntensors)]
        for key in held:
            setattr(target, key, getattr(source, key))
    return to_module
