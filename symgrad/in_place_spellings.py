"""PyTorch's other spellings of in-place ops: ``torch.relu_(x)`` is ``x.relu_()``, ``F.elu_(x)`` is
``F.elu(x, inplace=True)``, and ``fill_diagonal_``, which writes through a view of the diagonal.

Each is the in-place op the registry already has, reached by another name, so its grad_fn, version
count and errors are that op's.
"""
from __future__ import annotations

import numpy as np

from symgrad.creation import tensor
from symgrad.storage import in_order

# ``torch.<name>(input, *args)``: the Tensor method of the same name
METHODS_AS_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
    "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_",
    "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_", "index_put_",
    "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_",
    "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
    "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_")

# ``F.<name>_(input, *args)``: ``F.<name>(input, *args, inplace=True)``; selu and celu are top-level too
FUNCTIONAL = ("relu", "elu", "leaky_relu", "hardtanh", "selu", "celu")
TOP_LEVEL_FUNCTIONAL = ("selu", "celu")


def _method_as_function(name):
    def function(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``torch.{name}(input, ...)``: ``input.{name}(...)``."
    return function


def _functional_in_place(functional, name):
    def function(input, *args, **kwargs):
        return getattr(functional, name)(input, *args, inplace=True, **kwargs)
    function.__name__ = function.__qualname__ = f"{name}_"
    function.__doc__ = f"``{name}(input, ..., inplace=True)``."
    return function


def publish(namespace: dict, functional) -> None:
    """Put the spellings in ``symgrad`` (``namespace``) and ``symgrad.nn.functional``, once their
    ops are published there (symgrad.namespace)."""
    for name in METHODS_AS_FUNCTIONS:
        namespace[name] = _method_as_function(name)
    for name in FUNCTIONAL:
        setattr(functional, f"{name}_", _functional_in_place(functional, name))
    for name in TOP_LEVEL_FUNCTIONAL:
        namespace[name] = getattr(functional, name)
        namespace[f"{name}_"] = getattr(functional, f"{name}_")


def fill_diagonal_(input, fill_value, wrap: bool = False):
    """The entries whose indices are all equal set to ``fill_value``; with ``wrap``, a tall matrix's
    diagonal starts again below each square block (one row between), as PyTorch's.  The write goes
    through a view of those entries (``CopySlices``); a tensor not laid out in order takes a mask."""
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    rows, columns = shape[0], shape[-1]
    step = sum(columns ** k for k in range(len(shape)))  # one more along every dim, in row-major order
    count = min(rows, columns)
    if wrap and len(shape) == 2:
        count = -(-rows * columns // step)
    if input.numel() == 0:
        return input
    if in_order(input):
        input.view(-1)[: (count - 1) * step + 1: step].fill_(fill_value)
        return input
    mask = np.zeros(input.numel(), dtype=bool)
    mask[: (count - 1) * step + 1: step] = True
    return input.masked_fill_(tensor(mask.reshape(shape)), fill_value)
