"""Optional alternatives, imported when present: the benchmark runs whatever is installed."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def keeping_x64():
    """PyTensor's JAX mode turns JAX's 64-bit mode off for float32 graphs; symgrad needs it on."""
    import jax
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)


def torch_module():
    try:
        import torch
    except ImportError:
        return None
    return torch


def pytensor_modules():
    try:
        import pytensor
        import pytensor.tensor as pt
    except ImportError:
        return None, None
    pytensor.config.floatX = "float32"
    return pytensor, pt


@contextlib.contextmanager
def torch_threads(torch, n: int):
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def ready(tensor):
    """Wait for a symgrad tensor's value (JAX dispatches asynchronously)."""
    import jax
    return jax.block_until_ready(tensor._value())
