"""``torch.nn.utils``: helpers around modules and their gradients, one idea per module, as PyTorch
lays them out (``import symgrad.nn.utils.rnn`` works as ``import torch.nn.utils.rnn`` does)."""
from symgrad.nn.utils import rnn
from symgrad.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_value_"]
