"""``torch.compile``: symgrad compiles every graph to XLA already (one program per graph
structure, cached), so compiling a function or a module changes no number and no speed.  What
``torch.compile`` gives back keeps PyTorch's shape: a function comes back wrapped, a module comes
back as an ``OptimizedModule`` holding it as ``_orig_mod`` (so its state_dict keys are prefixed
``_orig_mod.`` and its parameters are the original's).  The arguments are checked as PyTorch's
``compile`` checks them before any compiling: the mode names, mode with options, the backend
names, ``dynamic``.
"""
from __future__ import annotations

import functools

from symgrad.nn.module import Module

__all__ = ["compile", "OptimizedModule", "InvalidBackend", "list_backends"]

_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
_BACKENDS = ("aot_eager", "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref",
             "aot_eager_decomp_partition_with_mode", "aot_eager_default_partitioner", "aot_ts", "cudagraphs",
             "eager", "eager_debug", "eager_noexcept", "inductor", "invoke_subgraph", "openxla", "openxla_eval",
             "pre_dispatch_eager", "ts", "tvm")  # PyTorch's registered names; all run as symgrad runs
_STABLE_BACKENDS = ("cudagraphs", "inductor", "openxla", "tvm")


class InvalidBackend(RuntimeError):
    """``torch._dynamo.exc.InvalidBackend``: a backend name PyTorch does not know."""

    def __init__(self, name):
        super().__init__(f"Invalid backend: {name!r}, see `torch._dynamo.list_backends()` for available backends.")


def list_backends(exclude_tags=("debug", "experimental")) -> list:
    """The backend names ``compile`` accepts (the stable ones unless ``exclude_tags`` is None)."""
    return sorted(_STABLE_BACKENDS if exclude_tags else _BACKENDS)


def compile(model=None, *, fullgraph: bool = False, dynamic: bool | None = None, backend="inductor", mode=None,
            options=None, disable: bool = False, **settings):
    """``model`` as torch.compile returns it: a function wrapped, a module in an OptimizedModule, the
    model itself when ``disable``.  Without a model, a decorator doing that (``@torch.compile(...)``).
    Other keywords of PyTorch's (``name``, ``recompile_limit``, ...) are accepted and change nothing."""
    if model is None:
        def decorate(model):
            if model is None:
                raise RuntimeError("Model can't be None")
            return compile(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           disable=disable, **settings)
        return decorate
    _check(backend, mode, options, dynamic)
    if not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model)

    @functools.wraps(model)
    def compiled(*args, **kwargs):
        return model(*args, **kwargs)
    return compiled


def _check(backend, mode, options, dynamic) -> None:
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if backend == "inductor" and mode not in (None, *_MODES):
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if isinstance(backend, str) and backend not in _BACKENDS:
        raise InvalidBackend(backend)
    if dynamic is not None and not isinstance(dynamic, bool):
        raise AssertionError(f"Expected enable to be a bool, got {type(dynamic)}")


class OptimizedModule(Module):
    """A compiled module: calls its ``_orig_mod``; reads and writes of attributes it does not have
    itself go to the original (``compiled.weight`` is the original's), as does ``training``."""

    _OWN = frozenset({"_orig_mod", "forward"})

    def __init__(self, mod: Module):
        super().__init__()
        self._orig_mod = mod

    def forward(self, *args, **kwargs):
        return self._orig_mod(*args, **kwargs)

    @property
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, mode: bool) -> None:
        original = self.__dict__.get("_modules", {}).get("_orig_mod")
        if original is not None:  # (Module.__init__ sets it before there is an original)
            original.training = mode

    def __getattr__(self, name):
        modules = self.__dict__.get("_modules")
        if modules is None or "_orig_mod" not in modules:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return modules["_orig_mod"] if name == "_orig_mod" else getattr(modules["_orig_mod"], name)

    def __setattr__(self, name, value):
        if hasattr(type(self), name) or name in self._OWN:
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if hasattr(type(self), name) or name in self._OWN:
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __len__(self):
        if hasattr(type(self._orig_mod), "__len__"):
            return len(self._orig_mod)
        raise TypeError(f"{type(self._orig_mod).__name__} does not support len()")

    def __dir__(self):
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]
