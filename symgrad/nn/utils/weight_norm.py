"""Weight normalization, ``w = g * v / ||v||``: PyTorch's formula (``torch._weight_norm`` with
``torch.norm_except_dim``'s norms) and the deprecated hook-based ``torch.nn.utils.weight_norm``,
which splits a parameter into ``<name>_g`` and ``<name>_v`` and recomputes ``<name>`` from them
in a forward pre-hook before every call."""
from __future__ import annotations

import warnings

from symgrad.nn.module import Module, Parameter
from symgrad.tensor import Tensor

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The norm over every dimension but ``dim``, kept as size-1 dimensions; ``dim=-1`` means the
    norm of the whole tensor (0-d), as in PyTorch, not of the last dimension."""
    if dim == -1:
        return v.norm(pow)
    kept = dim % v.dim()
    return v.norm(pow, dim=[d for d in range(v.dim()) if d != kept], keepdim=True)


def weight_normalized(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """``torch._weight_norm(v, g, dim)``: ``v`` scaled so its norm (as ``norm_except_dim``) is ``g``."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        return weight_normalized(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int) -> "WeightNorm":
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int = 0) -> Module:
    """Deprecated (PyTorch warns so too): ``torch.nn.utils.parametrizations.weight_norm`` instead."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Folds ``<name>_g`` and ``<name>_v`` back into one parameter ``<name>``."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
