"""ggrad.nn: modules, layers, losses, initialisation and the functional API (PyTorch's torch.nn)."""
# flake8: noqa: F401  (this module re-exports)

from . import functional, init
from ..autograd import Parameter
from .module import Module
from .containers import ModuleList, ModuleDict, ParameterList, ParameterDict
from .linear import Identity, Linear, Flatten, Unflatten
from .activation import (ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, ELU, Softplus, Softmax, LogSoftmax, SELU, CELU,
                         Mish, Hardswish, Hardsigmoid, Hardtanh, ReLU6, LogSigmoid, GLU, PReLU, Softsign, Tanhshrink,
                         Threshold, Hardshrink, Softshrink, Softmin, Softmax2d)
from .normalization import LayerNorm, RMSNorm, Dropout
from .batch_norm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .lp_pool import LPPool1d, LPPool2d
from .group_norm import GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm
from .adaptive_pool import AdaptiveAvgPool1d, AdaptiveAvgPool2d
from .sparse import Embedding
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .pooling import MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d
from .attention import MultiHeadAttention, MultiheadAttention
from .transformer import TransformerBlock
from .rnn import RNN, LSTM, GRU
from .transformer_layers import (TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
                                 TransformerDecoder, Transformer)
from .rnn_cells import RNNCell, LSTMCell, GRUCell
from .kv_cache import KVCache, LayerKVCache
from . import generation
from .generation import GenerationMixin
from .quantized import quantize_, repack_, QuantizedParameter
from .lora import LoRALinear, lora_
from .loss import (MSELoss, L1Loss, HuberLoss, SmoothL1Loss, CrossEntropyLoss, NLLLoss, BCEWithLogitsLoss,
                   BCELoss, KLDivLoss)
from .similarity import CosineSimilarity, PairwiseDistance
from .sequential import Sequential

from . import utils  # noqa: E402,F401  (ggrad.nn.utils.clip_grad_norm_)
from .dropout_channels import Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout  # noqa: E402
from .pooling3d import MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d  # noqa: E402
from .unpool import MaxUnpool1d, MaxUnpool2d  # noqa: E402
from .padding import (ZeroPad1d, ZeroPad2d, ZeroPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,  # noqa: E402
                      ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
                      ReplicationPad3d, CircularPad1d, CircularPad2d, CircularPad3d)
from .resampling import (Upsample, UpsamplingNearest2d, UpsamplingBilinear2d, PixelShuffle,  # noqa: E402
                         PixelUnshuffle, ChannelShuffle)
from .bilinear import Bilinear  # noqa: E402
from .fold import Fold, Unfold  # noqa: E402
from .embedding_bag import EmbeddingBag  # noqa: E402
from .adaptive_max_pool import AdaptiveMaxPool1d, AdaptiveMaxPool2d  # noqa: E402
from .conv3d import Conv3d  # noqa: E402
from .conv_transpose3d import ConvTranspose3d  # noqa: E402
from .lazy import (LazyLinear, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d,  # noqa: E402
                   LazyConvTranspose2d, LazyConvTranspose3d, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d,
                   LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d, UninitializedParameter)
from .ctc import CTCLoss  # noqa: E402
from .adaptive_softmax import AdaptiveLogSoftmaxWithLoss  # noqa: E402
from .rrelu import RReLU  # noqa: E402
from .margin_loss_modules import (MarginRankingLoss, SoftMarginLoss, HingeEmbeddingLoss,  # noqa: E402
                                  CosineEmbeddingLoss, TripletMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss,
                                  PoissonNLLLoss, GaussianNLLLoss, TripletMarginWithDistanceLoss)
from . import modules, parameter  # noqa: E402  (PyTorch's paths: torch.nn.modules.linear, torch.nn.parameter)
from . import parallel  # noqa: E402  (torch.nn.parallel.DistributedDataParallel)
