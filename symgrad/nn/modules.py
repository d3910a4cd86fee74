"""``torch.nn.modules``: where PyTorch keeps its module classes; its ``module`` is symgrad.nn.module,
whose functions register hooks on every module (``register_module_full_backward_hook``)."""
from symgrad.nn import module

__all__ = ["module"]
