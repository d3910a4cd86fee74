"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``,
with PyTorch's indexing and names (entries are registered under "0", "1", ... or their keys, so
state_dict keys match)."""
from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from symgrad.nn.module import Module, Parameter, indented
from symgrad.tensor import Tensor


def _index(length: int, idx: int) -> int:
    if not -length <= idx < length:
        raise IndexError(f"index {idx} is out of range")
    return idx % length


class Sequential(Module):
    """Modules called one after the other; built from modules or an OrderedDict of them."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(len(self), idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(len(self), idx)]
        self.add_module(key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        for key in (keys[idx] if isinstance(idx, slice) else [keys[_index(len(self), idx)]]):
            del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules, registered so their parameters are the list owner's."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index(len(self), idx))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(len(self), idx)), module)

    def __delitem__(self, idx) -> None:
        remaining = list(self._modules.values())
        del remaining[idx]
        self._modules.clear()
        self.extend(remaining)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules) -> "ModuleList":
        return self.extend(modules)

    def __repr__(self):
        """PyTorch's: a run of equal modules prints once, as ``(2-4): 3 x Linear(...)``."""
        runs = []  # [first index, last index, text]
        for i, module in enumerate(self):
            text = repr(module)
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        if not runs:
            return f"{type(self).__name__}()"
        lines = [f"({first}): {text}" if first == last else f"({first}-{last}): {last - first + 1} x {text}"
                 for first, last, text in runs]
        return f"{type(self).__name__}(\n  " + "\n  ".join(indented(line) for line in lines) + "\n)"

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> "ModuleList":
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        self.extend(modules)


class ModuleDict(Module):
    """Modules by name, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        for key, module in (modules.items() if hasattr(modules, "items") else modules):
            self[key] = module


def _as_parameter(value):
    """What a parameter container stores: a plain tensor becomes a Parameter (requiring grad, as
    PyTorch wraps it); a Parameter, a module or any other object is kept as it is."""
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


class _ParameterEntries(Module):
    """What ParameterList and ParameterDict share: entries are attributes set by name (so Module's
    rules register them: a Parameter as a parameter, a module as a submodule, anything else as a
    plain attribute), and PyTorch's printout of them (``_entries()`` gives the (key, value) pairs,
    ``_tensor_type`` how a tensor's type is named)."""

    def extra_repr(self) -> str:
        lines = []
        for key, value in self._entries():
            if isinstance(value, Tensor):
                kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
                sizes = "x".join(str(n) for n in value.shape)
                lines.append(f"  ({key}): {kind} containing: [{self._tensor_type(value)} of size {sizes}]")
            else:
                lines.append(f"  ({key}): Object of type: {type(value).__name__}")
        return "\n".join(lines)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._called} should not be called.")


class ParameterList(_ParameterEntries):
    """Values by position, named "0", "1", ...; tensors are held as Parameters of the list."""

    _called = "ParameterList"

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _name(self, idx) -> str:
        return str(_index(len(self), operator.index(idx)))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            part = type(self)()
            for i in range(*idx.indices(len(self))):
                part.append(self[i])
            return part
        return getattr(self, self._name(idx))

    def __setitem__(self, idx, value) -> None:
        setattr(self, self._name(idx), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values) -> "ParameterList":
        return self.extend(values)

    def __dir__(self):
        return [name for name in super().__dir__() if not name.isdigit()]

    def append(self, value) -> "ParameterList":
        """A failed assignment (a number where a Parameter is registered) leaves the size as it was."""
        name = str(self._size)
        setattr(self, name, _as_parameter(value))
        self._size += 1
        return self

    def extend(self, values) -> "ParameterList":
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got {type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def _entries(self):
        return enumerate(self)

    def _tensor_type(self, tensor) -> str:
        return str(tensor.dtype)


class ParameterDict(_ParameterEntries):
    """Values by string key, in insertion order; tensors are held as Parameters of the dict.  A
    refused key or entry raises before anything is stored (PyTorch records the key first)."""

    _called = "ParameterDict"

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _checked(key):
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                            f"'{type(key).__name__}'). Open an issue on github if you need non-string keys.")
        return key

    def __getitem__(self, key):
        return getattr(self, self._checked(key))

    def __setitem__(self, key, value) -> None:
        setattr(self, self._checked(key), _as_parameter(value))
        self._keys[key] = None

    def __delitem__(self, key) -> None:
        del self._keys[key]
        delattr(self, self._checked(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def copy(self) -> "ParameterDict":
        """A new dict holding the same objects (the Parameters are shared, not cloned)."""
        return ParameterDict(OrderedDict(self.items()))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None) -> "ParameterDict":
        return ParameterDict((key, default) for key in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((key, self[key]) for key in self._keys)

    def values(self):
        return (self[key] for key in self._keys)

    def update(self, parameters) -> None:
        """From an (ordered) ParameterDict or OrderedDict in its order, another mapping by sorted key,
        or (key, value) pairs in order; every pair is checked before any is stored."""
        if not isinstance(parameters, Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            + type(parameters).__name__)
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = list(parameters)
            for j, pair in enumerate(pairs):
                if not isinstance(pair, Iterable):
                    raise TypeError(f"ParameterDict update sequence element #{j} should be Iterable; is"
                                    + type(pair).__name__)
                if len(pair) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length {len(pair)}; "
                                     "2 is required")
            pairs = [(pair[0], pair[1]) for pair in pairs]
        for key, _ in pairs:
            self._checked(key)
        for key, value in pairs:
            self[key] = value

    def __or__(self, other) -> "ParameterDict":
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other):
        merged = other.copy()
        merged.update(self)
        return merged

    def __ior__(self, other) -> "ParameterDict":
        self.update(other)
        return self

    def _entries(self):
        return self.items()

    def _tensor_type(self, tensor) -> str:
        return tensor.type()
