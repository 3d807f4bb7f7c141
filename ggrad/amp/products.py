"""Autocast's matrix products (linear, matmul): x @ w^T from low precision copies of the operands, with
the gradients going straight to the tensors they were copied from.

Casting the operands with differentiable casts and multiplying the copies costs the backward four casts
a product: each gradient comes out of GGML's mul_mat in float32, is cast to the copy's dtype (the
gradient of a float16 tensor is float16) and then back to float32 by the cast's backward. Here one
Function takes both: the operands' sources (`x`, `w`: what gets the gradients, float32 master weights
among them) and their low precision copies (`x_low`, `w_low`: what GGML multiplies; the weight's is
the autocast region's cached cast, made once a step and read by forward and backward). Its backward's
float32 products are the sources' gradients, with no cast (a weight used twice sums two float32
gradients). It keeps x's low precision rows for the weight gradient, as PyTorch does (half the bytes of
a float32 source held from forward to backward); where the backend takes weight gradients from out_prod
(CUDA), x's gradient is out_prod of the float32 master weight too (_master_weight). The result is float32
(bias added before the one rounding) and, for autocast, that rounded to its dtype (PyTorch's result) as a
second output; the rounding is noted (autograd/roundings.py) so that an op computing in float32 next reads
the float32 value instead of casting back. A gradient that reaches only the rounding (an op computing in
half read it: attention's kernels, GELU's) goes to the half kernel's products as it came.
"""

from ..autograd import autocast_hook, grad_mode
from ..autograd.function import Function
from ..autograd.ops import views as mv
from ..autograd.ops.broadcast import reduce_to
from ..autograd.ops.products import (HalfColumnSums, RoundedHalfLinear, linear_grads, product_with_bias,
                                      rounded_half_linear_fits)
from ..autograd.ops.unary import cast
from ..autograd.lowering import choice, names
from ..autograd.memory import pending_graph
from ..autograd.roundings import note, source_of, widen
from ..autograd.tensor import Tensor
from ..ggml import bf16, f16, f32


class LowPrecisionProduct(Function):
    """y = x_low @ w_low^T (+ bias) in float32, and y rounded to `rounded_to` where given; gradients to x and w
    (the copies' sources) and bias.

    x (..., M, K); w (N, K), or (..., N, K) with x's batch dims, or read transposed where `w_transposed`
    (matmul's b, (..., K, N)). A 2-D weight multiplies x's rows over all its batch dims as one product
    and takes its gradient from them in one product too (linalg.WeightGrad): no reshapes."""
    _replayable = True

    @staticmethod
    def forward(ctx, x, w, bias, x_low, w_low, w_transposed=False, rounded_to=None):
        # the low precision rows, as PyTorch saves them (half the bytes of x's float32 source, which is then
        # scratch after the forward); a backend that takes the weight gradient from out_prod (float32
        # only there) casts them back in the backward: one cast, no transposed copies
        ctx.save_for_backward(x_low, _saved_weight(pending_graph(w.device), x, w, x_low, w_low, w_transposed))
        ctx.sources = (x.dtype, w.shape, w.dtype, w_transposed)
        if bias is not None:
            ctx.bias = (bias.shape, bias.dtype)
        if rounded_to is not None:
            ctx.set_materialize_grads(False)
            if not w_transposed and _rounds_itself(pending_graph(w.device)) \
                    and rounded_half_linear_fits(x_low, w_low, bias):
                # the half kernel writes the rounded result itself (the bias rounded first, as PyTorch's); an
                # op computing in float32 next reads it widened: PyTorch's value, for two casts fewer
                low = RoundedHalfLinear.apply(x_low, w_low, None if bias is None else bias.to(rounded_to))
                return cast(low, f32), low
        out = product_with_bias(x_low, w_low, None if bias is None else widen(bias, f32), w_transposed)
        return out if rounded_to is None else (out, cast(out, rounded_to))

    @staticmethod
    def backward(ctx, g, g_low=None):
        x_rows, w_saved = ctx.saved_tensors
        x_dtype, w_shape, w_dtype, w_transposed = ctx.sources
        gx, gw, gb = _gradients(pending_graph(x_rows.device), ctx, (g, g_low), x_rows, w_saved)
        return (None if gx is None else _as(gx, x_dtype), None if gw is None else _as(gw, w_dtype),
                None if gb is None else _as(gb, ctx.bias[1]), None, None, None, None)


def _same_half(a, b):
    return a.dtype is b.dtype and a.dtype in (f16, bf16)


_rounds_itself = names("half_matmul", "kernel")   # the half kernel writes a product's rounded result


@choice("half_matmul")
def _saved_weight(graph, x, w, x_low, w_low, w_transposed):
    """The weight the backward reads for x's gradient: as the weight gradient's product wants it
    (_weight_for_gradients), or where ggrad's half kernel takes the backward's products, the low precision
    copy (below)."""
    return _weight_for_gradients(graph, x, w, w_low, w_transposed)


@_saved_weight.alternative("kernel", fits=lambda x, w, x_low, w_low, w_transposed: _same_half(x_low, w_low))
def _low_precision_weight(graph, x, w, x_low, w_low, w_transposed):
    return w_low


@choice("weight_grad")
def _weight_for_gradients(graph, x, w, w_low, w_transposed):
    return w_low


def _master_fits(x, w, w_low, w_transposed):
    return (not w_transposed and w.dtype is f32 and w.ndim == 2 and w.is_contiguous()
            and x.dtype.is_float)


@_weight_for_gradients.alternative("out_prod", fits=_master_fits)
def _master_weight(graph, x, w, w_low, w_transposed):
    """x's gradient g @ w reads the float32 master weight `w` itself: where the backend takes weight
    gradients from out_prod (CUDA: cuBLAS in float32 on TF32 tensor cores, whose operands keep float16's
    10-bit mantissa, and float32 accumulation, as PyTorch's float16 products), out_prod of w's rows and
    g's transposed view reads both in place: no transposed copy of the low precision weight, no float16
    copy of g made inside GGML's float16 product (which accumulates in float16 on CUDA), and the low
    precision weight is scratch after the forward."""
    return w


def _summed(grads, dtype):
    """The gradient of the product in `dtype` from `grads`: (its float32 result's, its rounding's), either
    None (an output nobody used). A gradient that reached only the rounding stays in its own dtype where
    the half kernel reads it: no float32 round trip through the rounding's backward."""
    g, g_low = grads
    if g is None:
        return _as(g_low, dtype)
    return _as(g if g_low is None else g + _as(g_low, f32), dtype)


@choice("half_matmul")
def _gradients(graph, ctx, grads, x_rows, w_saved):
    """(x's, w's, bias's gradients; None where not wanted) in float32 products of the saved operands
    (_float32_gradients), or where ggrad's half kernel takes them, of the half operands (below)."""
    return _float32_gradients(graph, ctx, _summed(grads, f32), x_rows, w_saved)


@_gradients.alternative("kernel", fits=lambda ctx, grads, x_rows, w_saved: _same_half(x_rows, w_saved))
def _gradients_by_half_kernel(graph, ctx, grads, x_rows, w_low):
    # g rounded once to the operands' dtype, as PyTorch's gradient of a half result; both products then read
    # half operands in place and sum in float32, and so does the bias's sum (HalfColumnSums: no float32 copy
    # of g; a recorded backward sums g in float32 by reduce_to, which has a gradient)
    need_x, need_w, need_bias = ctx.needs_input_grad[:3]
    g = _summed(grads, x_rows.dtype)
    gx, gw, _ = linear_grads(g, x_rows, w_low, ctx.sources[1], None, (need_x, need_w, False), ctx.sources[3])
    if not need_bias:
        return gx, gw, None
    if grad_mode.is_grad_enabled():
        return gx, gw, reduce_to(_summed(grads, f32), ctx.bias[0])
    return gx, gw, HalfColumnSums.apply(g)   # the bias is (N,): amp.linear takes no other


@choice("weight_grad")
def _float32_gradients(graph, ctx, g, x_rows, w_saved):
    # x's gradient from the float32 master weight where it was saved (_master_weight)
    needs = tuple(ctx.needs_input_grad[:3])
    return linear_grads(g, x_rows, w_saved, ctx.sources[1], ctx.bias[0] if needs[2] else None, needs,
                        ctx.sources[3])


@_float32_gradients.alternative("out_prod", fits=lambda ctx, g, x_rows, w_saved: x_rows.dtype is not f32
                                and ctx.needs_input_grad[1])
def _gradients_from_float32_rows(graph, ctx, g, x_rows, w_saved):
    # out_prod (float32 only on CUDA) reads x's and g's rows in place: one cast of the saved rows instead of
    # transposed copies of x and of g, and of a float32 x held from forward
    return _float32_gradients.default(graph, ctx, g, x_rows.to(f32), w_saved)


def _as(g, dtype):
    return g if g.dtype is dtype else g.to(dtype)


def product(policy, x, w, bias=None, w_transposed=False):
    """x @ w^T (+ bias) in the policy's low precision, rounded to it. x (..., M, K) and w (..., N, K) (with
    the same batch dims, or none; (..., K, N) where `w_transposed`) come as `_operand` pairs."""
    out, low = LowPrecisionProduct.apply(x[0], w[0], bias, x[1], w[1], w_transposed, policy.dtype)
    note(low, out)
    return low


def _operand(policy, t):
    """(the tensor that gets the gradient, its low precision copy) for operand `t`. The product sends its
    gradients to the first and none to the copy; the copy keeps its history (the cast), so that a backward
    recorded with create_graph differentiates the saved copy back to its source, as PyTorch's does."""
    if t.dtype is policy.dtype:
        source = source_of(t)
        return (t if source is None else source), t
    return t, policy.cast(t, policy.dtype)


def linear(policy, fn, x, weight, bias=None):
    """`linear` under autocast: one low precision product on x's rows (other cases: `fn`, the op)."""
    if not _float_operands(x, weight, bias) or x.ndim < 1 or weight.ndim != 2 or x.shape[-1:] != weight.shape[-1:] \
            or (bias is not None and bias.shape != weight.shape[:1]):
        return fn(*_cast_all(policy, (x, weight, bias)))
    if x.ndim == 1:
        return mv.squeeze(linear(policy, fn, mv.unsqueeze(x, 0), weight, bias), 0)
    if x.ndim > 4:
        lead = x.shape[:-1]
        shaped = linear(policy, fn, mv.reshape(x, -1, x.shape[-1]), weight, bias)
        out = mv.reshape(shaped, lead + (weight.shape[0],))
        note(out, mv.reshape(source_of(shaped), out.shape))
        return out
    return product(policy, _operand(policy, x), _operand(policy, weight), bias)


def matmul(policy, fn, a, b):
    """`matmul` under autocast: one low precision product for operands of 2+ dims whose batch dims agree
    or that multiply by a matrix (other cases: `fn`, the op)."""
    if not _float_operands(a, b) or a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2] \
            or (b.ndim > 2 and a.shape[:-2] != b.shape[:-2]):
        return fn(*_cast_all(policy, (a, b)))
    return product(policy, _operand(policy, a), _operand(policy, b), w_transposed=True)


def _float_operands(*ts):
    return all(t is None or (isinstance(t, Tensor) and t.dtype.is_float and not t.dtype.is_quantized)
               for t in ts)


def _cast_all(policy, args):
    return tuple(policy.cast(a, policy.dtype) for a in args)


def unrounded(name, fn, args, kwargs):
    """The policy inside autocast's attention (PyTorch's fused SDPA): a matmul multiplies its operands in
    the dtypes they have (q, k, v already low precision; the softmax float32) and gives the float32
    product unrounded; every other op runs as written."""
    if name == "matmul" and not kwargs and len(args) == 2 and _float_operands(*args):
        a, b = args
        if a.ndim >= 2 and b.ndim >= 2 and a.shape[-1] == b.shape[-2] and a.shape[:-2] == b.shape[:-2] \
                and (b.dtype is a.dtype or a.dtype is f32):   # mul_mat takes the left one in f32 or b's dtype
            return LowPrecisionProduct.apply(a, b, None, a.detach(), b.detach(), True)
    with autocast_hook.suspended():
        return fn(*args, **kwargs)
