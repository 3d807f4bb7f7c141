"""The differentiable operations of ggrad, as functions (`ggrad.exp(x)`) and as Tensor methods.

Modules by kind: unary (math, activations), binary (arithmetic, pow, masked selection), broadcast,
reduce, views (reshape, permute, slices), joins (cat, split), indexing, linalg, nn, conv, loss; and for
PyTorch's wider op set: math (rounding, trigonometry, erf, float tests), activations, arith (div with
rounding_mode, clamp with tensor bounds), scan (cumsum, cumprod), sorting, shape_ops (flip, roll,
repeat, tril/triu, pad, one_hot), scatter_ops, sampling (bernoulli, multinomial), vector_norms,
einsum_lowering, resample (interpolate).
"""

from .unary import neg, abs, exp, log, sqrt, sin, cos, tanh, sigmoid, relu, leaky_relu, gelu, silu, square, sign
from .binary import add, sub, mul, reciprocal, rsqrt
from .selection import masked_fill, where
from .broadcast import broadcast_shapes
from .reduce import sum, mean, var, std, amax, amin, argmax, argmin, logsumexp
from .extrema import max, min
from .views import reshape, permute, transpose, contiguous, flatten, squeeze, unsqueeze, expand, narrow, select, unbind
from .joins import cat, stack, split, chunk
from .indexing import index_select, embedding, gather, getitem, setitem, diagonal
from .products import matmul, linear
from .quant import quantize, dequantize
from .neural import softmax, softmax_ext, log_softmax, layer_norm, rms_norm, dropout, max_pool2d, avg_pool2d
from .conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d
from .loss import (cross_entropy, nll_loss, mse_loss, l1_loss, huber_loss, smooth_l1_loss, kl_div,
                   binary_cross_entropy_with_logits, binary_cross_entropy)
from .math import (floor, ceil, trunc, fix, round, frac, expm1, log1p, log2, log10, exp2, tan, sinh, cosh, atan,
                   asin, acos, asinh, acosh, atanh, arctan, arcsin, arccos, arcsinh, arccosh, arctanh, erf, erfc,
                   atan2, arctan2,
                   isnan, isinf, isposinf, isneginf, isfinite, nan_to_num)
from .activations import (elu, selu, celu, softplus, logsigmoid, mish, hardsigmoid, hardswish, hardtanh, relu6,
                          softsign, tanhshrink, glu, prelu, hardshrink, softshrink)
from .extrema import maximum, minimum, fmax, fmin
from .arith import div, floor_divide, remainder, fmod, clamp, pow, bitwise_left_shift, bitwise_right_shift
from .scan import cumsum, cumprod
from .sorting import sort, argsort, msort, topk
from .shape_ops import flip, fliplr, flipud, roll, repeat, repeat_interleave, tril, triu, pad, one_hot
from .scatter_ops import scatter, scatter_add, index_add
from .sampling import bernoulli, multinomial, normal, poisson
from .membership import isin
from .inverse_erf import erfinv
from .gamma_functions import lgamma, digamma
from .incomplete_gamma import igamma, igammac
from .array_builders import (atleast_1d, atleast_2d, atleast_3d, column_stack, dstack, hsplit, vsplit, dsplit,
                             cartesian_prod, block_diag, diag_embed, tril_indices, triu_indices, hann_window,
                             hamming_window, blackman_window, bartlett_window, kaiser_window)
from .numeric_extras import (clone, hypot, logaddexp2, rad2deg, deg2rad, signbit, heaviside, aminmax, trace, cov,
                             corrcoef, addmv, addr, chain_matmul)
from .special_functions import logit, xlogy, xlog1py, sinc, entr, ndtr, log_ndtr, multigammaln
from .statistics import (var_mean, std_mean, median, nanmedian, kthvalue, quantile, nanquantile, cummax, cummin,
                         histc, bincount)
from .search import bucketize, searchsorted, unique, unique_consecutive
from .tensor_products import tensordot, kron, cdist
from .calculus import trapezoid, trapz, cumulative_trapezoid
from .float_parts import copysign, frexp
from .rotation import rot90
from .reduce_into import scatter_reduce
from .vector_norms import norm, vector_norm
from .einsum_lowering import einsum
from .resample import interpolate
from .mask_index import masked_select
from .torch_composites import *  # noqa: F401,F403  (mm, bmm, outer, view_as, lerp, ...)
from .torch_composites import METHODS as _COMPOSITE_METHODS

clip = clamp
concat = concatenate = cat   # PyTorch's aliases

__all__ = [name for name in dir() if not name.startswith("_") and name not in
           ("unary", "binary", "broadcast", "reduce", "views", "joins", "indexing", "products", "neural", "loss", "math",
            "activations", "arith", "scan", "sorting", "shape_ops", "scatter_ops", "sampling", "vector_norms",
            "extrema", "einsum_lowering", "resample", "quant", "conv", "torch_composites", "mask_index", "membership",
            "inverse_erf", "gamma_functions", "incomplete_gamma", "special_functions", "array_builders", "numeric_extras", "statistics", "search", "tensor_products", "windows", "reduce_into",
            "calculus",
            "float_parts", "rotation",
            "indexing", "logical", "mask_positions", "advanced_index", "host_index", "convert")]
