"""``out=``: PyTorch's functions can write their result into a tensor the caller passes.

``torch.matmul(a, b, out=y)`` computes as usual, then ``y`` takes the values (cast to its dtype,
resized when its shape differs, as PyTorch does with a deprecation warning unless ``y`` is empty)
and is returned.  PyTorch refuses ``out=`` where a gradient would be recorded, and so does this;
the check runs before ``out`` is touched, so a refused call changes nothing.
"""
from __future__ import annotations

import functools
import inspect
import warnings

from symgrad.dtypes import torch_name
from symgrad.inplace import write_values
from symgrad.ops.shape import to_dtype
from symgrad.tensor import Tensor


def accepting_out(function, name: str):
    """``function`` with PyTorch's keyword-only ``out`` (a tensor, or a tuple for tuple results).  A
    function of ``input`` or of ``input, other`` (``torch.sin``, ``torch.matmul``) gets a wrapper of
    that signature: a replayed step calls it for every op, and packing ``*args, **kwargs`` there was
    a tenth of a replayed ``sin``."""
    parameters = inspect.signature(function).parameters.values()
    names = tuple(p.name for p in parameters
                  if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is inspect.Parameter.empty)
    if len(names) != len(parameters):
        names = None
    if names == ("input",):
        def with_out(input, *, out=None):
            result = function(input)
            return result if out is None else _into(out, result, name)
    elif names == ("input", "other"):
        def with_out(input, other, *, out=None):
            result = function(input, other)
            return result if out is None else _into(out, result, name)
    else:
        def with_out(*args, out=None, **kwargs):
            result = function(*args, **kwargs)
            return result if out is None else _into(out, result, name)
    return functools.wraps(function)(with_out)


def _into(out, result, name: str):
    """``result`` written into ``out`` (refused, with nothing written, where PyTorch refuses)."""
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    results = tuple(result) if isinstance(result, tuple) else (result,)
    if len(outs) != len(results) or not all(isinstance(o, Tensor) for o in outs):
        raise TypeError(f"{name}(): argument 'out' must be {'a tuple of ' if len(results) > 1 else ''}"
                        f"{len(results) if len(results) > 1 else ''} Tensor{'s' if len(results) > 1 else ''}, "
                        f"not {type(out).__name__}")
    if any(t.requires_grad for t in results + outs):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    for o, r in zip(outs, results):
        if r.dtype.category > o.dtype.category:
            raise RuntimeError(f"result type {torch_name(r.dtype)} can't be cast to the desired output "
                               f"type {torch_name(o.dtype)}")
    for o, r in zip(outs, results):
        _write(o, r)
    return type(result)(*outs) if isinstance(result, tuple) else out


def _write(out: Tensor, result: Tensor) -> None:
    if tuple(out.shape) != tuple(result.shape) and out.numel() > 0:
        warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                      f"which does not match the required output shape {list(result.shape)}. This behavior is "
                      "deprecated, and in a future PyTorch release outputs will not be resized unless they have "
                      "zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                      "elements with t.resize_(0).", UserWarning, stacklevel=4)
    write_values(out, to_dtype(result, out.dtype)._node if result.dtype is not out.dtype else result._node)
