"""The differentiable operations of ggrad, as functions (`ggrad.exp(x)`) and as Tensor methods.

Modules by kind: unary (math, activations), binary (arithmetic, pow, masked selection), broadcast,
reduce, views (reshape, permute, slices), joins (cat, split), indexing, linalg, nn, loss.
"""

from .unary import (neg, abs, exp, log, sqrt, sin, cos, tanh, sigmoid, relu, leaky_relu, elu, gelu, silu, softplus,
                    clamp, square, sign)
from .binary import add, sub, mul, div, pow, reciprocal, rsqrt, masked_fill, where
from .broadcast import broadcast_shapes
from .reduce import sum, mean, var, std, amax, amin, max, min, argmax, argmin, logsumexp, maximum, minimum
from .views import reshape, permute, transpose, contiguous, flatten, squeeze, unsqueeze, expand, narrow
from .joins import cat, stack, split, chunk
from .indexing import index_select, embedding, gather, getitem, setitem
from .linalg import matmul, linear
from .quant import quantize, dequantize
from .nn import (softmax, softmax_ext, log_softmax, layer_norm, rms_norm, dropout, conv1d, conv2d, max_pool2d,
                 avg_pool2d)
from .loss import (cross_entropy, nll_loss, mse_loss, l1_loss, huber_loss, smooth_l1_loss,
                   binary_cross_entropy_with_logits, binary_cross_entropy)

__all__ = [name for name in dir() if not name.startswith("_") and name not in
           ("unary", "binary", "broadcast", "reduce", "views", "joins", "indexing", "linalg", "nn", "loss",
            "quant")]
