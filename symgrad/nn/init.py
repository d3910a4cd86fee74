"""``torch.nn.init``: PyTorch's initialisations, drawn from the same generator in the same order
(``uniform_``/``normal_`` in place), so a seeded model holds PyTorch's weights."""
from __future__ import annotations

import math

from symgrad.grad_mode import no_grad
from symgrad.inplace import fill_inplace

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


def affine_default_(weight, bias) -> None:
    """PyTorch's ``reset_parameters`` of Linear and Conv: kaiming_uniform(a=sqrt(5)) for the weight,
    uniform(+-1/sqrt(fan_in)) for the bias, drawn in that order."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)

