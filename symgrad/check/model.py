"""An ``nn.Module`` seen as a function of its inputs and its parameters, for the cross-checks.

Checking a model means checking the gradient w.r.t. every parameter as well as the inputs, so
the parameters become arguments: ``model_fn(*inputs, *parameters)`` runs the module with those
tensors in place of its own, and its buffers replaced by float64 copies (a check in training
mode leaves the running statistics as they were).  The torch engine runs the same module rebuilt under
PyTorch (``torch_module``) through ``torch.func.functional_call``.
"""
from __future__ import annotations

import contextlib
import inspect

from symgrad.check.torch_module import torch_module
from symgrad.tensor import Tensor


class ModelFunction:
    """``model`` as ``fn(*inputs, *parameters)``; ``inputs`` names its arguments in order."""

    def __init__(self, model, inputs):
        self.model = model
        values = list(inputs.values()) if isinstance(inputs, dict) else (
            [inputs] if isinstance(inputs, Tensor) else list(inputs))
        self.arity = len(values)
        input_names = list(inputs) if isinstance(inputs, dict) else _forward_names(model, self.arity)
        self.parameter_names = [name for name, _ in model.named_parameters()]
        clash = set(input_names) & set(self.parameter_names)
        if clash:
            raise ValueError(f"crosscheck: input name(s) {sorted(clash)} are also parameter names of "
                             f"{type(model).__name__}; pass the inputs as a dict with other names")
        parameters = dict(model.named_parameters())
        self.inputs = {**dict(zip(input_names, values)), **parameters}
        self.__name__ = type(model).__name__

    def __call__(self, *args):
        inputs, parameters = args[:self.arity], args[self.arity:]
        with _parameters_replaced(self.model, dict(zip(self.parameter_names, parameters))):
            return self.model(*inputs)

    def on_torch(self, torch):
        """The same computation under PyTorch: the module rebuilt there, parameters as arguments."""
        twin = torch_module(self.model, torch)

        def run(*args):
            parameters = dict(zip(self.parameter_names, args[self.arity:]))
            return torch.func.functional_call(twin, parameters, tuple(args[:self.arity]))
        return run


def _forward_names(model, count: int) -> list[str]:
    try:
        names = [p.name for p in inspect.signature(model.forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"input {i}" for i in range(count)]


@contextlib.contextmanager
def _parameters_replaced(model, replacements: dict):
    """``model`` with the tensors ``replacements`` (by dotted name) in place of its parameters, and
    float64 copies in place of its buffers (the check runs in float64 and must not move them)."""
    modules = dict(model.named_modules())
    owners = [(modules[name.rpartition(".")[0]], "_parameters", name.rpartition(".")[2], tensor)
              for name, tensor in replacements.items()]
    owners += [(modules[name.rpartition(".")[0]], "_buffers", name.rpartition(".")[2], _float64_copy(buffer))
               for name, buffer in model.named_buffers()]
    saved = [(owner, table, attr, getattr(owner, table)[attr]) for owner, table, attr, _ in owners]
    try:
        for owner, table, attr, tensor in owners:
            getattr(owner, table)[attr] = tensor
        yield
    finally:
        for owner, table, attr, original in saved:
            getattr(owner, table)[attr] = original


def _float64_copy(buffer: Tensor) -> Tensor:
    copy = buffer.detach().clone()
    return copy.double() if copy.is_floating_point() else copy
