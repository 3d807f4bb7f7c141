"""The differentiable operations of ggrad, as functions (`ggrad.exp(x)`) and as Tensor methods."""

from .elementwise import (add, sub, mul, div, pow, neg, abs, exp, log, sqrt, rsqrt, reciprocal, sin, cos, tanh,
                          sigmoid, relu, leaky_relu, elu, gelu, silu, softplus, clamp, square, sign,
                          broadcast_shapes)
from .reduce import sum, mean, var, std, amax, amin, max, min, argmax, argmin, logsumexp, maximum, minimum
from .movement import (reshape, permute, transpose, contiguous, flatten, squeeze, unsqueeze, expand, narrow,
                       cat, stack, split, chunk, index_select, embedding, gather, masked_fill, where)
from .indexing import getitem, setitem
from .linalg import matmul, linear
from .quant import quantize, dequantize
from .nn import (softmax, softmax_ext, log_softmax, layer_norm, rms_norm, dropout, conv1d, conv2d, max_pool2d,
                 avg_pool2d)
from .loss import (cross_entropy, nll_loss, mse_loss, l1_loss, huber_loss, smooth_l1_loss,
                   binary_cross_entropy_with_logits, binary_cross_entropy)

__all__ = [name for name in dir() if not name.startswith("_") and name not in
           ("elementwise", "reduce", "movement", "indexing", "linalg", "nn", "loss", "quant")]
