"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, with PyTorch's indexing and names
(submodules are registered under "0", "1", ... or their keys, so state_dict keys match)."""
from __future__ import annotations

from collections import OrderedDict

from symgrad.nn.module import Module


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
        return f"{type(self).__name__}(\n  " + "\n  ".join(line.replace("\n", "\n  ") for line in lines) + "\n)"

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
