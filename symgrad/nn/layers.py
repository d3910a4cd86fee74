"""Layers: ``Identity``, ``Linear``, ``Bilinear``, ``Flatten``, ``Unflatten``, ``Dropout``, ``Embedding``.

Parameters are made as PyTorch makes them (``nn.init`` on the same generator, in the same
order), so a seeded layer holds PyTorch's weights."""
from __future__ import annotations

import math

from symgrad import dtypes
from symgrad.grad_mode import no_grad
from symgrad.nn import functional as F
from symgrad.nn import init
from symgrad.nn.module import Module, Parameter
from symgrad.nodes import constant, lazy_leaf
from symgrad.tensor import Tensor


def _empty(*shape, dtype=None, device=None) -> Parameter:
    """``torch.empty`` for a parameter that ``reset_parameters`` fills at once: zeros that are
    never computed unless read (an array made here would only be thrown away)."""
    if device is not None and str(device).split(":")[0] != "cpu":
        raise RuntimeError(f"symgrad runs on the CPU; device {device!r} is not available")
    for size in shape:
        if size < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {size}: {list(shape)}")
    return Parameter(Tensor(lazy_leaf(constant(0.0, shape, dtype or dtypes.get_default_dtype()))))


def _weight_and_bias(module, weight_shape: tuple, bias: bool, dtype, device) -> None:
    """``module.weight`` of ``weight_shape`` and a ``bias`` of its first size (or ``bias``
    registered as None), as PyTorch's layers make them before ``reset_parameters`` fills them."""
    module.weight = _empty(*weight_shape, dtype=dtype, device=device)
    if bias:
        module.bias = _empty(weight_shape[0], dtype=dtype, device=device)
    else:
        module.register_parameter("bias", None)


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x W^T + b``; W and b drawn as PyTorch's ``reset_parameters`` draws them."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        _weight_and_bias(self, (out_features, in_features), bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.affine_default_(self.weight, self.bias)

    def forward(self, input):
        if input.shape[-1:] != (self.in_features,):  # PyTorch's words, and which module
            rows = math.prod(input.shape[:-1]) if input.dim() > 1 else 1
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{input.shape[-1] if input.dim() else 1} "
                               f"and {self.in_features}x{self.out_features}) in {self!r} called on an input of shape "
                               f"{tuple(input.shape)}")
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y = x1 W x2 + b``; W and b drawn from U(+-1/sqrt(in1_features)) as PyTorch draws them."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        _weight_and_bias(self, (out_features, in1_features, in2_features), bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.in1_features <= 0:
            raise ValueError(f"in1_features must be > 0, but got (in1_features={self.in1_features})")
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        dim = self.dim % input.dim()
        return input.reshape(*input.shape[:dim], *self.unflattened_size, *input.shape[dim + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Embedding(Module):
    """Rows of ``weight``, drawn from N(0, 1) as PyTorch draws them (the padding row zeroed)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False, _weight=None,
                 _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = _empty(num_embeddings, embedding_dim, dtype=dtype, device=device)
            init.normal_(self.weight)
            if padding_idx is not None:
                with no_grad():
                    self.weight[padding_idx] = 0.0
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}" + (
            f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

