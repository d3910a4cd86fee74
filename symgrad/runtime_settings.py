"""PyTorch's runtime settings that XLA owns under symgrad: thread counts, float32 matmul precision and
flushing denormals.  They are accepted, checked as PyTorch checks them, and remembered so a program
reads back what it set; none changes how XLA computes."""
from __future__ import annotations

import os
import warnings

_settings = {"threads": os.cpu_count() or 1, "interop": os.cpu_count() or 1, "interop_set": False,
             "matmul_precision": "highest"}


def _positive_int(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise RuntimeError(f"{name} expects an int, but got {type(value).__name__}")
    if value <= 0:
        raise RuntimeError(f"{name} expects a positive integer")
    return value


def get_num_threads() -> int:
    """The intra-op thread count last set (the machine's cores at first).  XLA sizes its own thread
    pool; this number does not change it."""
    return _settings["threads"]


def set_num_threads(int) -> None:
    """Remembered for ``get_num_threads``; XLA owns the threads that run symgrad's programs."""
    _settings["threads"] = _positive_int("set_num_threads", int)


def get_num_interop_threads() -> int:
    """The inter-op thread count set (the machine's cores at first); XLA owns the threads."""
    return _settings["interop"]


def set_num_interop_threads(int) -> None:
    """Remembered for ``get_num_interop_threads``; as in PyTorch, it can be set once only."""
    value = _positive_int("set_num_interop_threads", int)
    if _settings["interop_set"]:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _settings["interop"], _settings["interop_set"] = value, True


def get_float32_matmul_precision() -> str:
    return _settings["matmul_precision"]


def set_float32_matmul_precision(precision) -> None:
    """Remembered for ``get_float32_matmul_precision``.  symgrad's float32 matmuls on the CPU run at
    full float32 precision whatever it says ('highest')."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      f"setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    _settings["matmul_precision"] = precision


def set_flush_denormal(mode) -> bool:
    """False: symgrad cannot change how XLA's compiled programs treat denormals (PyTorch returns True
    where the CPU supports flushing them)."""
    if not isinstance(mode, bool):
        raise RuntimeError(f"flush_denormal expects a bool, but got {type(mode).__name__}")
    return False
