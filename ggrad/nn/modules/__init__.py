"""PyTorch's `torch.nn.modules` paths (`from torch.nn.modules.linear import Linear`) for the modules ggrad has.

Each submodule re-exports, under PyTorch's module name, the classes ggrad defines in its own modules."""

from .activation import (Threshold, ReLU, RReLU, Hardtanh, ReLU6, Sigmoid, Hardsigmoid, Tanh, SiLU, Mish, Hardswish,
                         ELU, CELU, SELU, GLU, GELU, Hardshrink, LeakyReLU, LogSigmoid, Softplus, Softshrink,
                         MultiheadAttention, PReLU, Softsign, Tanhshrink, Softmin, Softmax, LogSoftmax,
                         Softmax2d)
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d
from .channelshuffle import ChannelShuffle
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, LazyConv1d, LazyConv2d,
                   LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d)
from .distance import PairwiseDistance, CosineSimilarity
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout
from .fold import Fold, Unfold
from .flatten import Flatten, Unflatten
from .instancenorm import (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d,
                           LazyInstanceNorm3d)
from .linear import Bilinear, Identity, LazyLinear, Linear
from .loss import (L1Loss, NLLLoss, PoissonNLLLoss, GaussianNLLLoss, KLDivLoss, MSELoss, BCELoss, BCEWithLogitsLoss,
                   HingeEmbeddingLoss, SmoothL1Loss, HuberLoss, SoftMarginLoss, CrossEntropyLoss,
                   MultiLabelSoftMarginLoss, CosineEmbeddingLoss, MarginRankingLoss, MultiMarginLoss,
                   TripletMarginLoss, TripletMarginWithDistanceLoss, CTCLoss)
from .module import Module
from .normalization import LocalResponseNorm, LayerNorm, GroupNorm, RMSNorm
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
                      ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
                      ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .pooling import (MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, AvgPool1d, AvgPool2d, AvgPool3d,
                      AdaptiveMaxPool3d, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
                      AdaptiveMaxPool2d, LPPool1d, LPPool2d)
from .rnn import RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell
from .sparse import Embedding, EmbeddingBag
from .transformer import (Transformer, TransformerEncoder, TransformerDecoder, TransformerEncoderLayer,
                          TransformerDecoderLayer)
from .upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d

__all__ = ["Fold", "Unfold", "Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh",
           "SiLU", "Mish", "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid",
           "Softplus", "Softshrink", "MultiheadAttention", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax",
           "LogSoftmax", "Softmax2d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "ChannelShuffle", "Sequential", "ModuleList", "ModuleDict",
           "ParameterList", "ParameterDict", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
           "PairwiseDistance", "CosineSimilarity", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout", "Flatten", "Unflatten", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Bilinear", "Identity",
           "Linear", "L1Loss", "NLLLoss", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss", "MSELoss", "BCELoss",
           "BCEWithLogitsLoss", "HingeEmbeddingLoss", "SmoothL1Loss", "HuberLoss", "SoftMarginLoss",
           "CrossEntropyLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
           "MultiMarginLoss", "TripletMarginLoss", "CTCLoss", "Module", "LocalResponseNorm", "LayerNorm", "GroupNorm", "RMSNorm",
           "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "PixelShuffle", "PixelUnshuffle", "MaxPool1d",
           "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveMaxPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveAvgPool1d", "LPPool1d", "LPPool2d", "AdaptiveAvgPool2d",
           "AdaptiveAvgPool3d", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "Embedding", "EmbeddingBag",
           "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear", "TripletMarginWithDistanceLoss",
           "AdaptiveLogSoftmaxWithLoss"]
