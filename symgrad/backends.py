"""``torch.backends`` and the determinism switch, as seeding code sets them.

symgrad computes on JAX's CPU, with neither cuDNN nor MPS: ``cudnn.is_available()`` and
``mps.is_available()`` say so, as PyTorch's CPU build does.  cuDNN's flags are kept all the same
(refused unless bools, as PyTorch's setters refuse), so a tutorial's
``torch.backends.cudnn.deterministic = True`` reads back.  ``use_deterministic_algorithms`` does
in symgrad what it does in PyTorch on a CPU: symgrad's compiled programs are deterministic
already, and memory left unset (``torch.empty``) is filled with NaN or the dtype's largest value
(symgrad.creation), as PyTorch fills it.
"""
from __future__ import annotations

from types import SimpleNamespace


class _Flag:
    """A bool setting of a backend, with the name of PyTorch's setter for its error."""

    def __init__(self, setter: str, default: bool):
        self.setter, self.default = setter, default

    def __set_name__(self, owner, name):
        self.attribute = "_" + name

    def __get__(self, backend, owner=None):
        return self if backend is None else getattr(backend, self.attribute, self.default)

    def __set__(self, backend, value):
        if not isinstance(value, bool):
            raise RuntimeError(f"{self.setter} expects a bool, but got {type(value).__name__}")
        setattr(backend, self.attribute, value)


class CudnnModule:
    """``torch.backends.cudnn``: no cuDNN here; its flags as a CPU build of PyTorch reports them."""

    enabled = _Flag("set_enabled_cudnn", True)
    benchmark = _Flag("set_benchmark_cudnn", False)
    deterministic = _Flag("set_deterministic_cudnn", False)
    allow_tf32 = _Flag("set_allow_tf32_cublas", True)  # (PyTorch's setter names cuBLAS here)

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def version():
        return None


cudnn = CudnnModule()
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)

_deterministic = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False) -> None:
    for name, value in (("mode' (position 1)", mode), ("warn_only'", warn_only)):
        if not isinstance(value, bool):
            raise TypeError(f"_set_deterministic_algorithms(): argument '{name} must be bool, "
                            f"not {type(value).__name__}")
    _deterministic.update(mode=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _deterministic["warn_only"]
