"""Max unpooling: ``F.max_unpool1d/2d/3d`` and ``nn.MaxUnpool1d/2d/3d``, the partial inverse of a
max pool that returned its indices.

Each plane's entries are written at their flat positions in a zero plane of the output size: one
scatter along the planes' flattened axis (symgrad.ir.indexing).  Its gradient is the gather of
the output's gradient at every index, duplicates included, which is PyTorch's backward.  PyTorch
checks the indices while writing (an index outside the plane is a RuntimeError at the call): done
here on the indices' values before anything is recorded.  The 1-D form is PyTorch's composition
(the 2-D unpool of a width-1 input), so its grad_fn is the squeeze's.
"""
from __future__ import annotations

import math

import numpy as np
import sympy as sp

from symgrad import dtypes, engine
from symgrad.ir.indexing import scatter_along
from symgrad.nn.module import Module
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import apply


def _infer(nodes, sizes):
    x = nodes[0]
    return (*x.shape[:len(x.shape) - len(sizes)], *sizes), x.dtype


def _build(p, node, x, indices):
    n = len(node.attrs[0])
    lead = node.shape[:len(node.shape) - n]
    planes = (*lead, math.prod(node.inputs[0].shape[len(lead):]))
    zeros = p.assign(sp.S.Zero, (*lead, math.prod(node.shape[len(lead):])), node.dtype.name, "zeros", fold=False)
    written = scatter_along(p, zeros, p.reshape(indices, planes), p.reshape(x, planes), len(lead), "set")
    return p.reshape(written, node.shape)


# No generic examples: valid indices come from a max pool; tests/test_nn_more_modules.py checks
# values, gradients and errors against PyTorch.
MAX_UNPOOL = register(Op("max_unpool", lambda nodes, sizes: f"MaxUnpool{len(sizes)}DBackward0", _infer, _build,
                         shown_inputs=lambda inputs: inputs[:1]))


def _triple_of(value, n: int) -> tuple:
    """PyTorch's ``_single``/``_pair``/``_triple``."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def _output_size(input, kernel, stride, padding, output_size) -> tuple:
    """PyTorch's ``_unpool_output_size``: the pool's inverse size, or ``output_size`` (its last n
    entries, if it has n + 2) when each lies strictly within a stride of that."""
    n = len(kernel)
    default = [(input.shape[d - n] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(n)]
    if output_size is None:
        return tuple(default)
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a length "
                         f"of '{len(output_size)}'")
    for d in range(n):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {low} and {high})')
    return tuple(int(size) for size in output_size)


def _check(input, indices, sizes, stride) -> None:
    """PyTorch's checks, in its order (``stride`` is checked by the 3-D kernel only)."""
    n = len(sizes)
    if indices.dtype is not dtypes.int64:
        raise RuntimeError("elements in indices should be type int64" +
                           (f" but got: {dtypes.torch_name(indices.dtype).capitalize()}" if n == 2 else ""))
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d Tensor, but got a tensor "
                           f"with {input.dim()} dimensions.")
    if tuple(input.shape) != tuple(indices.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    for axis in range(1, input.dim()):
        if input.shape[axis] == 0:
            raise RuntimeError(f"max_unpooling{n}d_forward_out_cpu(): Expected input to have non-zero size for "
                               f"non-batch dimensions, but got {list(input.shape)} with dimension {axis} being empty.")
    if n == 3 and not all(s > 0 for s in stride):
        raise RuntimeError(f"strides should be greater than zero, but got stride: {list(stride)}")
    if math.prod((*input.shape[:input.dim() - n], *sizes)) == 0:
        return  # PyTorch writes nothing into an empty output, so it checks nothing more
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"max_unpool{n}d" not implemented for '
                                  f"'{dtypes.torch_name(input.dtype).capitalize()}'")
    values = engine.concrete_array(indices._node)
    if values is not None:
        values = np.asarray(values)
        bad = values[(values < 0) | (values >= math.prod(sizes))]
        if bad.size:  # PyTorch's threads report one of them: here the first
            raise RuntimeError(f"Found an invalid max index: {int(bad.flat[0])} (output volumes are of size "
                               f"{'x'.join(str(s) for s in sizes)})")


def _sizes_of(input, kernel_size, stride, padding, output_size, n) -> tuple:
    """(output sizes, stride) as PyTorch's Python layer works them out before calling its kernel."""
    kernel = _triple_of(kernel_size, n)
    stride = kernel if stride is None else _triple_of(stride, n)
    return _output_size(input, kernel, stride, _triple_of(padding, n), output_size), stride


def _unpooled(input, indices, sizes, stride):
    _check(input, indices, sizes, stride)
    return apply(MAX_UNPOOL, input, indices, attrs=(sizes,))


@MAX_UNPOOL.publish(Names(functional=("max_unpool2d",)))
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _unpooled(input, indices, *_sizes_of(input, kernel_size, stride, padding, output_size, 2))


@MAX_UNPOOL.publish(Names(functional=("max_unpool3d",)))
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _unpooled(input, indices, *_sizes_of(input, kernel_size, stride, padding, output_size, 3))


@MAX_UNPOOL.publish(Names(functional=("max_unpool1d",)))
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    (size,), stride = _sizes_of(input, kernel_size, stride, padding, output_size, 1)
    return _unpooled(input.unsqueeze(-1), indices.unsqueeze(-1), (size, 1), (*stride, 1)).squeeze(-1)


class _MaxUnpoolNd(Module):
    n = 0  # spatial dimensions
    function = None  # the functional form

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _triple_of(kernel_size, self.n)
        self.stride = _triple_of(stride if stride is not None else kernel_size, self.n)
        self.padding = _triple_of(padding, self.n)

    def forward(self, input, indices, output_size=None):
        return type(self).function(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    n, function = 1, max_unpool1d


class MaxUnpool2d(_MaxUnpoolNd):
    n, function = 2, max_unpool2d


class MaxUnpool3d(_MaxUnpoolNd):
    n, function = 3, max_unpool3d
