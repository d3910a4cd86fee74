"""Signal windows: ``hann_window``, ``hamming_window``, ``blackman_window``, ``bartlett_window``,
``kaiser_window``.

Each is computed as PyTorch's factory computes it, one operation at a time in the requested dtype
(an ``arange`` scaled, then cosines), so the values round as PyTorch's do; a periodic window is the
symmetric window one longer, without its last point.  The result is a new leaf.
"""
from __future__ import annotations

import math

import numpy as np

from symgrad import devices, dtypes
from symgrad.creation import tensor


def _window(name, window_length, periodic, dtype, device, requires_grad, symmetric):
    """Checks as PyTorch's; ``symmetric(n, kind)`` gives the symmetric window of n > 1 points."""
    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{type(window_length).__name__}")
    devices.check(device)
    dtype = dtype or dtypes.get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: TensorOptions(dtype={dtypes.type_id(dtype)}, "
                           f"device=cpu, layout=Strided (default), requires_grad=false (default), "
                           f"pinned_memory=false, memory_format=(nullopt))")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    kind = dtype.numpy.type
    if window_length <= 1:
        values = np.ones(window_length, kind)
    else:
        values = symmetric(window_length + 1 if periodic else window_length, kind)[:window_length]
    return tensor(values, dtype=dtype, requires_grad=requires_grad)


def _scaled_arange(n, kind, scale):
    """``arange(n) * scale``, the scale rounded to the dtype first (as a tensor-by-number product)."""
    return np.arange(n, dtype=kind) * kind(scale)


def hamming_window(window_length, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *, dtype=None,
                   layout=None, device=None, pin_memory: bool = False, requires_grad: bool = False):
    def symmetric(n, kind):
        return np.cos(_scaled_arange(n, kind, math.pi * 2.0 / (n - 1))) * kind(-beta) + kind(alpha)
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad, symmetric)


def hann_window(window_length, periodic: bool = True, *, dtype=None, layout=None, device=None,
                pin_memory: bool = False, requires_grad: bool = False):
    """The Hamming window with both coefficients 0.5."""
    def symmetric(n, kind):
        return np.cos(_scaled_arange(n, kind, math.pi * 2.0 / (n - 1))) * kind(-0.5) + kind(0.5)
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad, symmetric)


def blackman_window(window_length, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    pin_memory: bool = False, requires_grad: bool = False):
    def symmetric(n, kind):
        x = _scaled_arange(n, kind, math.pi / (n - 1))
        return np.cos(x * kind(4)) * kind(0.08) - np.cos(x * kind(2)) * kind(0.5) + kind(0.42)
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, symmetric)


def bartlett_window(window_length, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    pin_memory: bool = False, requires_grad: bool = False):
    """A triangle: rising as ``2 i / (n - 1)``, its second half reflected as ``2 - x``."""
    def symmetric(n, kind):
        x = _scaled_arange(n, kind, 2.0 / (n - 1))
        half = (n - 1) // 2 + 1
        x[half:] = x[half:] * kind(-1) + kind(2)
        return x
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, symmetric)


def kaiser_window(window_length, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, pin_memory: bool = False, requires_grad: bool = False):
    """``I0(beta * sqrt(|1 - ((i - a) / a)^2|)) / I0(beta)`` with ``a = (n - 1) / 2``, in the dtype as
    PyTorch's kernel; only I0 itself is taken in double and rounded (its last bits may differ)."""
    def symmetric(n, stored):
        kind = np.float32 if stored is np.float16 else stored  # (a half's kernel computes in float)
        centre, scale = kind((n - 1) / 2.0), kind(beta)
        ratio = (np.arange(n, dtype=kind) - centre) / centre
        argument = scale * np.sqrt(np.abs(kind(1) - ratio * ratio))
        return (np.i0(argument.astype(np.float64)).astype(kind) / kind(np.i0(float(scale)))).astype(stored)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, symmetric)
