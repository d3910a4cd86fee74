"""PyTorch's tensor printing: ``tensor([0.3303, 0.2642], grad_fn=<AddBackward0>)``.

The rules (default print options, symgrad.printing_options changes them): floats print with 4 decimals, or without decimals and a
trailing dot when every finite value is whole, or in scientific notation when the finite
nonzero magnitudes span more than 1000x, exceed 1e8 or fall below 1e-4; every element is
padded to the widest; lines wrap at 80 columns; more than 1000 elements are summarized with
3 items at each edge.
"""
from __future__ import annotations

import math

import numpy as np

from symgrad import dtypes
from symgrad.printing_options import OPTIONS


class _Formatter:
    def __init__(self, values: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode, self.sci_mode, self.width = True, False, 1
        flat = values.reshape(-1)
        if not floating:
            self.width = max((len(str(v)) for v in flat.tolist()), default=1)
            return
        finite = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if finite.size == 0:
            return
        magnitudes = np.abs(finite)
        low, high = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        self.sci_mode = high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4
        if OPTIONS.sci_mode is not None:
            self.sci_mode = OPTIONS.sci_mode
        if self.sci_mode:
            self.width = max(len(f"{v:.{OPTIONS.precision}e}") for v in finite.tolist())
        elif self.int_mode:
            self.width = max(len(f"{v:.0f}") + 1 for v in finite.tolist())
        else:
            self.width = max(len(f"{v:.{OPTIONS.precision}f}") for v in finite.tolist())

    def format(self, value) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.width}.{OPTIONS.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{OPTIONS.precision}f}"
        return text.rjust(self.width)


def _summarized(values: np.ndarray) -> np.ndarray:
    """The elements that a summarized print shows, for sizing the columns."""
    if values.ndim == 0:
        return values
    edge = OPTIONS.edgeitems
    if values.shape[0] > 2 * edge:
        values = np.concatenate([values[:edge], values[-edge:]])
    return np.stack([_summarized(v) for v in values]) if values.ndim > 1 else values


def _vector(values, indent, summarize, fmt):
    per_line, edge = max(1, math.floor((OPTIONS.linewidth - indent) / (fmt.width + 2))), OPTIONS.edgeitems
    if summarize and values.shape[0] > 2 * edge:
        items = ([fmt.format(v) for v in values[:edge].tolist()] + [" ..."]
                 + [fmt.format(v) for v in values[-edge:].tolist()])
    else:
        items = [fmt.format(v) for v in values.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values, indent, summarize, fmt):
    if values.ndim == 0:
        return fmt.format(values.item())
    if values.ndim == 1:
        return _vector(values, indent, summarize, fmt)
    rows, edge = range(values.shape[0]), OPTIONS.edgeitems
    if summarize and values.shape[0] > 2 * edge:
        parts = ([_nested(values[i], indent + 1, summarize, fmt) for i in rows[:edge]] + ["..."]
                 + [_nested(values[i], indent + 1, summarize, fmt) for i in rows[-edge:]])
    else:
        parts = [_nested(values[i], indent + 1, summarize, fmt) for i in rows]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _with_suffixes(text, suffixes, indent):
    pieces = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > OPTIONS.linewidth:
            pieces.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            pieces.append(", " + suffix)
            last_line += len(suffix) + 2
    return "".join(pieces) + ")"


def format_tensor(values: np.ndarray, dtype, grad_fn: str | None = None, requires_grad: bool = False) -> str:
    prefix, indent = "tensor(", len("tensor(")
    suffixes = []
    if values.size == 0:
        if values.ndim != 1:
            suffixes.append(f"size={tuple(values.shape)}")
        if dtype is not dtypes.get_default_dtype():
            suffixes.append(f"dtype={dtype!r}")
        body = "[]"
    else:
        if dtype not in (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool_):
            suffixes.append(f"dtype={dtype!r}")
        summarize = values.size > OPTIONS.threshold
        fmt = _Formatter(_summarized(values) if summarize else values, dtype.is_floating_point)
        body = _nested(values, indent, summarize, fmt)
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, indent)
