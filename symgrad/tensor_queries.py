"""Questions about a tensor that record no op: its kind (``is_signed``, ``is_complex``), its size in
bytes, whether it is nonzero or the same size as another, and the conjugate transposes ``H``,
``mH``, ``adjoint`` (plain transposes: symgrad's tensors are real).

Each is a top-level function and a Tensor method (or property), as in PyTorch.
"""
from __future__ import annotations

import warnings

from symgrad import dtypes
from symgrad.ops import shape as S
from symgrad.tensor import Tensor


def _tensor_argument(function: str, name: str, position: int, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{function}(): argument '{name}' (position {position}) must be Tensor, "
                        f"not {type(value).__name__}")
    return value


def is_floating_point(input) -> bool:
    return _tensor_argument("is_floating_point", "input", 1, input).dtype.is_floating_point


def is_complex(input) -> bool:
    """Always False: symgrad has no complex dtypes."""
    _tensor_argument("is_complex", "input", 1, input)
    return False


def is_signed(input) -> bool:
    """Whether the dtype holds negative numbers (every symgrad dtype but bool and uint8)."""
    return _tensor_argument("is_signed", "input", 1, input).dtype.is_signed


def is_nonzero(input) -> bool:
    """The one element's truth, with PyTorch's errors for none or several (NaN is nonzero)."""
    count = _tensor_argument("is_nonzero", "input", 1, input).numel()
    if count == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if count > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item() != 0)


def is_same_size(input, other) -> bool:
    _tensor_argument("is_same_size", "input", 1, input)
    return tuple(input.shape) == tuple(_tensor_argument("is_same_size", "other", 2, other).shape)


def is_inference(input) -> bool:
    return _tensor_argument("is_inference", "input", 1, input).is_inference()


def is_conj(input) -> bool:
    """False: a real tensor is never a lazily conjugated view (nor a negated one, ``is_neg``)."""
    return False


def conj(input):
    """A real tensor is its own conjugate: the tensor itself, as PyTorch returns it (and so are
    ``resolve_conj`` and ``resolve_neg``)."""
    return input


def adjoint(input):
    """The conjugate transpose of the last two dims: their transpose (``TransposeBackward0``)."""
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. "
                           f"Got {input.ndim}-D tensor.")
    return S.transpose(input, -2, -1)


def _mH(input):
    if input.ndim < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {input.ndim}-D tensor.")
    return S.transpose(input, -2, -1)


def _H(input):
    """A matrix's conjugate transpose; a 0-dim tensor is itself (PyTorch warns: deprecated)."""
    if input.ndim == 0:
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=2)
        return input
    if input.ndim != 2:
        hint = " For batches of matrices, consider using tensor.mH" if input.ndim > 2 else ""
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {input.ndim}-D tensor.{hint}")
    return S.transpose(input, 0, 1)


METHODS = {
    "is_complex": is_complex, "is_signed": is_signed, "is_nonzero": is_nonzero, "is_same_size": is_same_size,
    "adjoint": adjoint, "ndimension": lambda input: input.ndim,
    "is_conj": is_conj, "is_neg": is_conj, "conj": conj, "resolve_conj": conj, "resolve_neg": conj,
    "get_device": lambda input: -1,  # PyTorch's answer for a CPU tensor
    "H": property(_H), "mH": property(_mH),
    "itemsize": property(lambda input: input.dtype.itemsize),
    "nbytes": property(lambda input: input.numel() * input.dtype.itemsize),
    "is_cpu": property(lambda input: True),  # every symgrad tensor lives on the host (symgrad.devices)
}

for _name, _method in METHODS.items():
    setattr(Tensor, _name, _method)
