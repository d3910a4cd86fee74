"""``torch.nn``: modules, parameters, initialisation, utilities and the functional API."""
from symgrad.nn import functional, init, utils
from symgrad.nn.activation import (CELU, ELU, GELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
                                   LogSoftmax, Mish, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softmin, Softplus, Softsign,
                                   Tanh, Tanhshrink)
from symgrad.nn.containers import ModuleDict, ModuleList, Sequential
from symgrad.nn.layers import Flatten, Identity, Linear, Unflatten
from symgrad.nn.loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss,
                             SmoothL1Loss)
from symgrad.nn.module import Module, Parameter

__all__ = ["functional", "init", "utils", "Module", "Parameter", "Sequential", "ModuleList", "ModuleDict",
           "Identity", "Linear", "Flatten", "Unflatten", "CELU", "ELU", "GELU", "SELU", "Hardsigmoid", "Hardswish",
           "Hardtanh", "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish", "ReLU", "ReLU6", "Sigmoid", "SiLU",
           "Softmax", "Softmin", "Softplus", "Softsign", "Tanh", "Tanhshrink", "BCELoss", "BCEWithLogitsLoss",
           "CrossEntropyLoss", "HuberLoss", "L1Loss", "MSELoss", "NLLLoss", "SmoothL1Loss"]
