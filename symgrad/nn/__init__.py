"""``torch.nn``: modules, parameters, initialisation, utilities and the functional API."""
from symgrad.nn import functional, init, modules, utils
from symgrad.nn.adaptive import AdaptiveLogSoftmaxWithLoss, LinearCrossEntropyLoss, LinearCrossEntropyOptions
from symgrad.nn.attention import MultiheadAttention
from symgrad.nn.activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                                   LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, RReLU, Sigmoid, SiLU,
                                   Softmax, Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh, Tanhshrink,
                                   Threshold)
from symgrad.nn.containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from symgrad.nn.convolution import Conv1d, Conv2d, Conv3d
from symgrad.nn.conv_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from symgrad.nn.pools import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
                              AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d,
                              MaxPool2d, MaxPool3d)
from symgrad.nn.resampling import (ChannelShuffle, PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d,
                                   UpsamplingNearest2d)
from symgrad.nn.distance import CosineSimilarity, PairwiseDistance
from symgrad.nn.embedding_bag import EmbeddingBag
from symgrad.nn.folding import Fold, Unfold
from symgrad.nn import grid_sampling  # noqa: F401  (publishes F.affine_grid and F.grid_sample)
from symgrad.nn.dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout
from symgrad.nn.lp_pools import LPPool1d, LPPool2d, LPPool3d
from symgrad.nn.fractional_pools import FractionalMaxPool2d, FractionalMaxPool3d
from symgrad.nn import pool_indices  # noqa: F401  (publishes F.adaptive_max_pool*d_with_indices)
from symgrad.nn.layers import Bilinear, Embedding, Flatten, Identity, Linear, Unflatten
from symgrad.nn.normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d,
                                      InstanceNorm2d, InstanceNorm3d, LayerNorm, LocalResponseNorm, RMSNorm)
from symgrad.nn.padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,
                                ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                                ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from symgrad.nn.loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, GaussianNLLLoss,
                             HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
                             MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss,
                             SmoothL1Loss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss)
from symgrad.nn.loss import CTCLoss
from symgrad.nn.module import Module, Parameter
from symgrad.nn import parameter
from symgrad.nn.parameter import UninitializedBuffer, UninitializedParameter
from symgrad.nn.lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d,
                             LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d,
                             LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear)
from symgrad.nn.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from symgrad.nn.unpooling import MaxUnpool1d, MaxUnpool2d, MaxUnpool3d
from symgrad.nn.transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                                   TransformerEncoderLayer)

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
           "EmbeddingBag", "Fold", "Unfold",
           "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "RMSNorm", "LocalResponseNorm",
           "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
           "CircularPad1d", "CircularPad2d", "CircularPad3d",
           "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer",
           "ParameterList", "ParameterDict", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout", "LPPool1d", "LPPool2d", "LPPool3d",
           "FractionalMaxPool2d", "FractionalMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
           "parameter", "UninitializedParameter", "UninitializedBuffer", "LazyLinear", "LazyConv1d", "LazyConv2d",
           "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d",
           "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]
