"""``torch.nn.init``: PyTorch's initialisations, drawn from the same generator in the same order
(``uniform_``/``normal_`` in place), so a seeded model holds PyTorch's weights."""
from __future__ import annotations

import math
import warnings

from symgrad import creation
from symgrad.grad_mode import no_grad
from symgrad.inplace import fill_inplace
from symgrad.linalg import qr
from symgrad.ops.elementwise import where

_GAINS = {"linear": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0, "conv_transpose1d": 1.0,
          "conv_transpose2d": 1.0, "conv_transpose3d": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
          "selu": 3.0 / 4}


def calculate_gain(nonlinearity: str, param=None) -> float:
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"negative_slope {slope} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity not in _GAINS:
        raise ValueError(f"Unsupported nonlinearity {nonlinearity}")
    return _GAINS[nonlinearity]


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


@no_grad()
def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    return tensor.uniform_(a, b, generator=generator)


@no_grad()
def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    return tensor.normal_(mean, std, generator=generator)


@no_grad()
def constant_(tensor, val: float):
    return fill_inplace(tensor, val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    if 0 in tensor.shape:
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)), generator)


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """A normal draw kept to [a, b], by PyTorch's rejection sampler so a seed gives its numbers:
    redrawing what falls outside when most of the mass is inside, else uniform proposals
    accepted with the normal's relative density."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    with no_grad():
        inside = (math.erf((b - mean) / std / math.sqrt(2.0)) - math.erf((a - mean) / std / math.sqrt(2.0))) / 2
        if inside > 0.3:
            _redrawn_outside(tensor, mean, std, a, b, generator)
        else:
            _uniform_accepted(tensor, mean, std, a, b, generator)
    return tensor


def _redrawn_outside(tensor, mean, std, a, b, generator) -> None:
    lo, hi = tensor.new_tensor(a).item(), tensor.new_tensor(b).item()  # the bounds in the tensor's dtype
    result = tensor.normal_(mean, std, generator=generator)
    while True:
        outside = (result < lo) | (result > hi)
        if not outside.any():
            break
        result = where(outside, creation.empty_like(result).normal_(mean, std, generator=generator), result)
    if result is not tensor:
        tensor.copy_(result)


def _uniform_accepted(tensor, mean, std, a, b, generator) -> None:
    log_peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2
    candidates, accept = creation.empty_like(tensor), creation.empty_like(tensor)

    def log_ratio(x):  # in place, as PyTorch's, so later draws see the same buffers
        return x.copy_(x.sub(mean).div(std).pow(2).mul(-0.5).sub(log_peak))

    tensor.uniform_(a, b, generator=generator)
    candidates.copy_(tensor)
    pending = accept.uniform_(generator=generator).log_().gt(log_ratio(candidates))
    if not pending.any():
        return
    result = tensor
    while pending.any():
        candidates.uniform_(a, b, generator=generator)
        result = where(pending, candidates, result)
        pending = where(pending, accept.uniform_(generator=generator).log_().gt(log_ratio(candidates)), pending)
    tensor.copy_(result)


def eye_(tensor):
    """The identity in a 2-D tensor (ones on the main diagonal of a rectangle)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        tensor.copy_(creation.eye(*tensor.shape, dtype=tensor.dtype))
    return tensor


def dirac_(tensor, groups: int = 1):
    """A convolution kernel that passes each group's first input channels through: a 1 at the
    window's centre, channel d to channel d."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = tensor.shape[0] // groups
    centre = tuple(n // 2 for n in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, tensor.shape[1])):
                tensor[(g * per_group + d, d, *centre)] = 1
    return tensor


def orthogonal_(tensor, gain: float = 1, generator=None):
    """A (semi-)orthogonal matrix, trailing dims flattened: the Q of a normal draw's QR with R's
    diagonal made positive (the tall orientation factorized), times ``gain``."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flat = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)
        tall = flat if rows >= cols else flat.t()
        q, r = qr(tall)
        q = q * r.diagonal().sign()
        q = q if rows >= cols else q.t()
        tensor.view_as(q).copy_(q)
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity: float, std: float = 0.01, generator=None):
    """A normal draw with ``ceil(sparsity * rows)`` entries of each column zeroed, the rows chosen
    by a permutation from the global generator (as PyTorch's)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for column in range(cols):
            tensor[creation.randperm(rows)[:zeros], column] = 0
    return tensor


def _deprecated(initializer):
    """PyTorch's old spelling without the underscore: the same function, with its FutureWarning."""
    new = initializer.__name__

    def old(*args, **kwargs):
        warnings.warn(f"`nn.init.{new[:-1]}` is now deprecated in favor of `nn.init.{new}`.", FutureWarning,
                      stacklevel=2)
        return initializer(*args, **kwargs)

    old.__name__ = old.__qualname__ = new[:-1]
    old.__doc__ = f"Deprecated: ``{new}``."
    return old


uniform, normal, constant, eye, dirac, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal, orthogonal, \
    sparse = map(_deprecated, (uniform_, normal_, constant_, eye_, dirac_, xavier_uniform_, xavier_normal_,
                               kaiming_uniform_, kaiming_normal_, orthogonal_, sparse_))


def affine_default_(weight, bias) -> None:
    """PyTorch's ``reset_parameters`` of Linear and Conv: kaiming_uniform(a=sqrt(5)) for the weight,
    uniform(+-1/sqrt(fan_in)) for the bias, drawn in that order."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)

