"""Devices are JAX's: ``cpu`` is JAX's CPU, ``cuda``/``cuda:N`` its GPUs; asking for one JAX does
not have is a RuntimeError, never silently a CPU tensor.  ``torch.cuda`` and ``torch.accelerator``
report what JAX sees."""
from __future__ import annotations

from types import SimpleNamespace

import jax

from symgrad.dtypes import CPU, device

_PLATFORMS = {"cpu": "cpu", "cuda": "gpu"}
_default = [CPU]


def _jax_devices(platform: str) -> list:
    try:
        return jax.devices(platform)
    except RuntimeError:
        return []


def check(requested) -> device:
    """The device ``requested`` names (None: the default), if JAX has it; else PyTorch's
    RuntimeError, saying which devices there are."""
    if requested is None:
        return _default[0]
    if hasattr(requested, "platform"):  # a JAX device
        requested = device("cuda" if requested.platform == "gpu" else requested.platform, requested.id)
    wanted = device(requested) if not isinstance(requested, device) else requested
    platform = _PLATFORMS.get(wanted.type)
    present = _jax_devices(platform) if platform else []
    if not present or (wanted.index or 0) >= len(present):
        raise RuntimeError(f"device {str(wanted)!r} is not available: JAX sees "
                           f"{', '.join(str(d) for d in jax.devices())} (symgrad runs on JAX's devices)")
    if wanted.type != "cpu":
        raise RuntimeError(f"device {str(wanted)!r}: symgrad's tensors live on the CPU in this version")
    return wanted


def set_default_device(requested) -> None:
    _default[0] = check(requested if requested is not None else CPU)


def get_default_device() -> device:
    return _default[0]


def _count(platform: str) -> int:
    return len(_jax_devices(platform))


def _no_cuda_generator(seed) -> None:
    """``torch.cuda.manual_seed(_all)``: symgrad draws every random number on the CPU (symgrad.random),
    so there is no CUDA generator to seed; PyTorch without CUDA ignores the call too, once it has
    read the seed as an int (its errors for a seed that is none)."""
    int(seed)


cuda = SimpleNamespace(is_available=lambda: _count("gpu") > 0, device_count=lambda: _count("gpu"),
                       manual_seed=_no_cuda_generator, manual_seed_all=_no_cuda_generator)
accelerator = SimpleNamespace(
    is_available=lambda: _count("gpu") > 0, device_count=lambda: _count("gpu"),
    current_accelerator=lambda: device("cuda", 0) if _count("gpu") else None)
