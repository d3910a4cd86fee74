"""``torch.nn``: modules, parameters, initialisation, utilities and the functional API."""
from symgrad.nn import functional, init, modules, utils
from symgrad.nn.adaptive import AdaptiveLogSoftmaxWithLoss, LinearCrossEntropyLoss, LinearCrossEntropyOptions
from symgrad.nn.attention import MultiheadAttention
from symgrad.nn.activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                                   LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, RReLU, Sigmoid, SiLU,
                                   Softmax, Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh, Tanhshrink,
                                   Threshold)
from symgrad.nn.containers import ModuleDict, ModuleList, Sequential
from symgrad.nn.convolution import Conv1d, Conv2d, Conv3d
from symgrad.nn.conv_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from symgrad.nn.pools import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
                              AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d,
                              MaxPool2d, MaxPool3d)
from symgrad.nn.resampling import (ChannelShuffle, PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d,
                                   UpsamplingNearest2d)
from symgrad.nn.distance import CosineSimilarity, PairwiseDistance
from symgrad.nn.layers import Bilinear, Dropout, Embedding, Flatten, Identity, Linear, Unflatten
from symgrad.nn.normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from symgrad.nn.loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, GaussianNLLLoss,
                             HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
                             MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss,
                             SmoothL1Loss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss)
from symgrad.nn.loss import CTCLoss
from symgrad.nn.module import Module, Parameter
from symgrad.nn.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase

__all__ = ["functional", "init", "utils", "Module", "Parameter", "Sequential", "ModuleList", "ModuleDict",
           "Identity", "Linear", "Bilinear", "Flatten", "Unflatten", "Dropout", "Embedding", "Conv1d", "Conv2d",
           "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d",
           "CELU", "ELU", "GELU", "SELU", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU", "LogSigmoid",
           "LogSoftmax", "Mish", "ReLU", "ReLU6", "Sigmoid", "SiLU", "Softmax", "Softmin", "Softplus", "Softsign",
           "Tanh", "Tanhshrink", "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "L1Loss",
           "MSELoss", "NLLLoss", "SmoothL1Loss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "CosineEmbeddingLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss", "CosineSimilarity", "PairwiseDistance", "GLU", "Hardshrink", "PReLU",
           "RReLU", "Softmax2d", "Softshrink", "Threshold",
           "AdaptiveLogSoftmaxWithLoss", "LinearCrossEntropyLoss", "LinearCrossEntropyOptions", "MultiheadAttention",
           "CTCLoss", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Conv3d", "MaxPool1d", "MaxPool3d",
           "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "AdaptiveMaxPool3d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle",
           "PixelUnshuffle", "ChannelShuffle",
           "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
