"""``torch.nn.utils``: helpers around modules and their gradients, one idea per module, as PyTorch
lays them out (``import symgrad.nn.utils.rnn`` works as ``import torch.nn.utils.rnn`` does)."""
from symgrad.nn.utils import prune, rnn
from symgrad.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_
from symgrad.nn.utils import parametrize, parametrizations
from symgrad.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from symgrad.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from symgrad.nn.utils.weight_norm import remove_weight_norm, weight_norm

__all__ = ["prune", "rnn", "clip_grad_norm_", "clip_grad_value_", "parametrize", "parametrizations",
           "parameters_to_vector", "vector_to_parameters", "spectral_norm", "remove_spectral_norm", "weight_norm",
           "remove_weight_norm"]
