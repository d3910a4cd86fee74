"""``torch.nn``: the functional API (``symgrad.nn.functional``)."""
from symgrad.nn import functional

__all__ = ["functional"]
