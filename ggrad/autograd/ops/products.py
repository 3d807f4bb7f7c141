"""Matrix products on GGML's `mul_mat` (rows of a dotted with rows of b) with batch broadcasting.

`x @ w.T` is GGML's native form (`mul_mat(w, x)`), so `linear` and `q @ k.T` need no transpose
copy; a general `a @ b` reads `b` transposed. Both gradients are products of transposed operands. The
product takes its operands' transposes as flags and makes those views inside its build: a gradient's
transposed operand is no recorded op (no Python op per transpose, a third of a transformer step's ops
before). On the CPU, f32 products run on ggrad's own kernel (lowering.matmul), which reads those in
place; with GGML's mul_mat they are copies, which on the CPU is still about twice as fast as `out_prod`
for the weight gradient (784x512 from a batch of 128: 0.8-1.8 ms vs 1.6-2.2 ms), and CUDA has no f16
out_prod. A weight broadcast over a batch of inputs (linear on (B, T, K)) multiplies their rows as one
product, forward and backward (WeightGrad): no reshapes, and no per-batch products summed afterwards.
"""

from ...ggml import bf16, f16, f32, kernels, ops
from ...ggml.errors import ShapeError
from ..autocast_hook import LOWER, autocast_op
from ..dtype_rules import require_float
from ..primitive import Primitive
from ..tensor import Tensor
from .. import grad_mode, sizes
from .broadcast import broadcast_shapes, leading_sums_node, reduce_to
from . import folding, quant
from .complex_operands import complex_form
from ..pending import contiguous_node, copy_node
from ..memory import pending_graph
from ..lowering import choice
from . import views as mv
from ..declaration import declare


class MatMulNT(Primitive):
    """y = A @ B^T for A (..., M, K) and B (..., N, K); B's batch dims broadcast into A's.

    A is `a`, or `a` (..., K, M) read transposed where `ta`; B is `b`, or `b` (..., K, N) read transposed
    where `tb`. Operands come with their strides: where the backend's mul_mat reads strided rows
    (lowering.py) a view whose rows are contiguous (attention heads of a fused projection, a double
    transpose) is read in place; other views are copied."""
    saves = "inputs"
    views = True

    @staticmethod
    def build(ctx, graph, a, b, ta=False, tb=False):
        if ta:
            a = ops.transpose(graph.ctx, a)
        if tb:
            b = ops.transpose(graph.ctx, b)
        return _product(graph, a, b)

    @staticmethod
    def shape(a, b, ta=False, tb=False):
        return a.shape[:-2] + (a.shape[-1] if ta else a.shape[-2], b.shape[-1] if tb else b.shape[-2])

    @staticmethod
    def result_dtype(a, b, ta=False, tb=False):
        return f32

    @classmethod
    def saved(cls, ctx, args, out):
        """Only what a wanted gradient reads, as PyTorch's mm: b for da, a for db."""
        a, b = args[:2]
        ctx.transposes = (args[2] if len(args) > 2 else False, args[3] if len(args) > 3 else False)
        return (a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return product_grads(g, a, b, *ctx.transposes, ctx.shapes[1], *ctx.needs_input_grad[:2]) + (None, None)


def product_grads(g, a, b, ta, tb, b_shape, need_a, need_b):
    """The gradients (a's, b's; None where not needed) of MatMulNT's A @ B^T given g, for its operands a and
    b (of shape `b_shape`) with their transpose flags: dA = g @ B, and dB = g^T @ A summed over the batch
    dims B was broadcast along; each in its operand's own layout."""
    ga = gb = None
    if need_a:   # a transposed a comes from gradient products only, whose operands share their batch dims
        if ta:
            ga = MatMulNT.apply(b, g, not tb, False)
        else:
            ga = MatMulNT.apply(g, b, False, False) if tb else input_grad(g, b)
    if need_b:
        if b_shape[:-2] == g.shape[:-2] and not ta:
            gb = weight_grad(a, g) if tb else weight_grad(g, a)   # A^T @ g, or g^T @ A
        elif b_shape[:-2] == g.shape[:-2]:
            gb = MatMulNT.apply(a, g, False, True) if tb else MatMulNT.apply(g, a, True, False)
        elif not ta and all(n == 1 for n in b_shape[:-2]):   # a weight shared by A's batch: one product
            gb = WeightGrad.apply(a, g, b_shape) if tb else WeightGrad.apply(g, a, b_shape)
        else:
            dims = b_shape[:-2] + ((b_shape[-1], b_shape[-2]) if tb else b_shape[-2:])
            gb = reduce_to(MatMulNT.apply(g, a, True, not ta), dims)
            gb = mv.transpose(gb, -1, -2) if tb else gb
    return ga, gb


class Linear(Primitive):
    """y = x @ w^T + bias for x (..., K), w (N, K) and a float32 bias (N,): the product and the bias in one op
    (GGML's add broadcasts the bias over the rows), its gradients as MatMulNT's and the bias's row sum. The
    result is float32: half operands' products sum in it, and the bias joins before any rounding."""
    views = True
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, x, w, bias):
        return _product(graph, x, w, _packed(graph, bias))

    @staticmethod
    def shape(x, w, bias):
        return x.shape[:-1] + (w.shape[0],)

    @staticmethod
    def result_dtype(x, w, bias):
        return f32

    @classmethod
    def saved(cls, ctx, args, out):
        x, w, _ = args
        return (x if ctx.needs_input_grad[1] else None, w if ctx.needs_input_grad[0] else None)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return linear_grads(g, x, w, ctx.shapes[1], ctx.shapes[2], ctx.needs_input_grad)


class RoundedHalfLinear(Primitive):
    """x @ w^T (+ bias) for float16 or bfloat16 x (..., K), w (N, K) and bias (N,) of that one dtype, in it:
    the float32 sums plus the bias rounded once by ggrad's half kernel (kernels.matmul_half, rounded), as
    PyTorch's half linear. Autocast's product where the lowering's half kernel writes its rounded result
    (amp/products.py, which takes the gradients: this op is built under no_grad only)."""
    views = True

    @staticmethod
    def build(ctx, graph, x, w, bias):
        x, w = _half_operand(graph, x), _half_operand(graph, w)
        bias = None if bias is None else _packed(graph, bias)
        return _batched(graph, x, w, lambda x: kernels.matmul_half(graph.ctx, w, x, bias, rounded=True))

    @staticmethod
    def shape(x, w, bias):
        return x.shape[:-1] + (w.shape[0],)


class HalfColumnSums(Primitive):
    """The f32 sums of a float16 or bfloat16 g (..., N) over its leading dimensions, (N,), by ggrad's half
    kernel: g's rows times a half column of ones, summing in f32 (a half linear's bias gradient, with no f32
    copy of g). Built by autocast's backward where the lowering's half kernel takes it (no gradient of its
    own: a recorded backward sums otherwise)."""

    @staticmethod
    def build(ctx, graph, g):
        c = graph.ctx
        g = _packed(graph, g)
        rows = ops.reshape_2d(c, g, g.ne[0], g.nelements // g.ne[0])
        ones = ops.reshape_2d(c, graph.ones(rows.ne[1], g.dtype), rows.ne[1], 1)
        return ops.reshape_1d(c, kernels.matmul_half(c, ops.transpose(c, rows), ones), rows.ne[0])

    @staticmethod
    def shape(g):
        return g.shape[-1:]

    @staticmethod
    def result_dtype(g):
        return f32


def rounded_half_linear_fits(x, w, bias):
    """Whether RoundedHalfLinear takes these operands (the bias once rounded to x's dtype: any float dtype)."""
    return (x.dtype is w.dtype and x.dtype in (f16, bf16) and w.ndim == 2 and 2 <= x.ndim <= 4
            and x.shape[-1] == w.shape[1] and (bias is None or (bias.dtype.is_float and bias.shape == w.shape[:1])))


def linear_grads(g, x, w, w_shape, bias_shape, needs, w_transposed=False):
    """The gradients (x's, w's, the bias's; None where not wanted by `needs`) of x @ w^T (+ bias) given g:
    one op (LinearGrads) for a first-order backward of float32 tensors and a 2-D weight read as it is, else
    product_grads' and reduce_to's ops. x is read for w's gradient only, w for x's only."""
    need_x, need_w, need_bias = needs
    x_read, w_read = (x if need_w else None), (w if need_x else None)
    if (not grad_mode.is_grad_enabled() and not w_transposed and len(w_shape) == 2 and g.dtype is f32
            and (x_read is None or x_read.dtype is f32) and (w_read is None or w_read.dtype is f32)):
        grads = iter(LinearGrads.apply(g, x_read, w_read, w_shape, bias_shape if need_bias else None, needs))
        return tuple(next(grads) if need else None for need in needs)
    gx, gw = product_grads(g, x, w, False, w_transposed, w_shape, need_x, need_w)
    return gx, gw, reduce_to(g, bias_shape) if need_bias else None


class LinearGrads(Primitive):
    """Linear's wanted gradients (x's, w's, the bias's, in that order) as one recorded op: the nodes that
    product_grads and reduce_to record an op each for, for float32 operands and a backward that is not itself
    differentiated (then each has its own op, with a gradient of its own)."""
    multiple_results = True
    views = True

    @staticmethod
    def build(ctx, graph, g, x, w, w_shape, bias_shape, needs):
        grads = []
        if needs[0]:
            grads.append(input_grad_node(graph, g, w))
        if needs[1]:
            grads.append(weight_grad_node(graph, g, x))
        if needs[2]:
            grads.append(leading_sums_node(graph, _packed(graph, g), bias_shape))
        return tuple(grads)

    @staticmethod
    def shape(g, x, w, w_shape, bias_shape, needs):
        shapes = (g.shape[:-1] + (w_shape[1],), w_shape, bias_shape)
        return tuple(s for s, need in zip(shapes, needs) if need)

    @staticmethod
    def result_dtype(g, x, w, w_shape, bias_shape, needs):
        return (f32,) * sum(bool(n) for n in needs)


class WeightGrad(Primitive):
    """dw = sum over the batch of g^T @ x, for g (..., M, N) and x (..., M, K): the gradient of x @ w^T with
    respect to a weight w broadcast over x's batch (`shape`: w's, (N, K) after any leading ones).

    The batches' rows are folded into one contraction: one product (weight_grad_node)."""
    views = True
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, g, x, shape):
        return weight_grad_node(graph, g, x)

    @staticmethod
    def shape(g, x, shape):
        return tuple(shape)

    @staticmethod
    def result_dtype(g, x, shape):
        return f32

    @staticmethod
    def backward(ctx, gw):
        g, x = ctx.saved_tensors
        need_g, need_x = ctx.needs_input_grad[:2]
        return (MatMulNT.apply(x, gw) if need_g else None,                # x @ gw^T
                MatMulNT.apply(g, gw, False, True) if need_x else None,   # g @ gw
                None)


def _both_f32(a, b):
    return a.dtype is f32 and b.dtype is f32


@choice("weight_grad")
def weight_grad_node(graph, g, x):
    """The node of WeightGrad's sum over the batch of g^T @ x: the product of their transposed rows, or
    out_prod of the folded rows where the backend runs it fast on f32 (below)."""
    g, x = folded_rows(graph, g), folded_rows(graph, x)
    return _product(graph, ops.transpose(graph.ctx, g), ops.transpose(graph.ctx, x))


@weight_grad_node.alternative("out_prod", fits=_both_f32)
def _weight_grad_by_out_prod(graph, g, x):
    x, g = folded_rows(graph, _packed(graph, x)), folded_rows(graph, _packed(graph, g))
    return ops.out_prod(graph.ctx, x, g)


class InputGrad(Primitive):
    """g @ w for g (..., M, N) and w (N, K), both float32: GGML out_prod of w and g's transposed rows (over
    all g's batch dims), each read in place (`input_grad`)."""
    views = True
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, g, w):
        return _input_grad_by_out_prod(graph, g, w)

    @staticmethod
    def shape(g, w):
        return g.shape[:-1] + (w.shape[1],)

    @staticmethod
    def result_dtype(g, w):
        return f32

    @staticmethod
    def backward(ctx, gy):
        g, w = ctx.saved_tensors
        need_g, need_w = ctx.needs_input_grad
        return (MatMulNT.apply(gy, w) if need_g else None,               # gy @ w^T
                WeightGrad.apply(g, gy, w.shape) if need_w else None)   # g^T @ gy over g's rows


def _out_prod_reads(g, w):
    """Whether out_prod takes g @ w for nodes or Tensors g and w: both float32, w a contiguous matrix."""
    if isinstance(w, Tensor):
        return _both_f32(g, w) and w.ndim == 2 and w.is_contiguous()
    return _both_f32(g, w) and w.ne[2] * w.ne[3] == 1 and w.is_packed


@choice("weight_grad")
def input_grad_node(graph, g, w):
    """The node of g @ w for nodes g (..., M, N) and a 2-D w (N, K): rows of g against rows of w^T (a
    transposed copy of w for GGML's mul_mat; the CPU's kernel reads it in place), or where the backend takes
    products' gradients from out_prod, out_prod of w and g's transposed rows (below)."""
    return _product(graph, g, ops.transpose(graph.ctx, w))


@input_grad_node.alternative("out_prod", fits=_out_prod_reads)
def _input_grad_by_out_prod(graph, g, w):
    g = _packed(graph, g)
    rows = folded_rows(graph, g)
    out = ops.out_prod(graph.ctx, w, ops.transpose(graph.ctx, rows))
    return out if rows is g else ops.reshape_4d(graph.ctx, out, out.ne[0], *g.ne[1:])


def input_grad(g, w):
    """g @ w for g (..., M, N) and a 2-D w (N, K): the gradient of x @ w^T with respect to x, as one op
    (InputGrad where the backend takes it from out_prod (CUDA: cuBLAS reads w's rows and g's transposed view in
    place), else MatMulNT)."""
    return _input_grad_op(pending_graph(g.device), g, w)


@choice("weight_grad")
def _input_grad_op(graph, g, w):
    return MatMulNT.apply(g, w, False, True)


@_input_grad_op.alternative("out_prod", fits=_out_prod_reads)
def _input_grad_op_by_out_prod(graph, g, w):
    return InputGrad.apply(g, w)


def _product(graph, a, b, bias=None):
    """The node of a @ b^T (+ bias, f32 [N] for b [K, N]) for nodes a [K, M, ...] and b [K, N, ...] (GGML's
    order; b broadcast over a's batch dims), as the backend's lowering takes it (_product_node)."""
    gctx = graph.ctx
    if a.dtype is not f32 and a.dtype is not b.dtype:
        # mul_mat multiplies a low precision operand only as its first (b's place), against float32 or its
        # own type: the product transposed, (b a^T)^T, or where b is broadcast over a's batch, a in float32
        if a.ne[2:] == b.ne[2:]:
            out = ops.cont(gctx, ops.transpose(gctx, _product(graph, b, a)))
            return out if bias is None else ops.add(gctx, out, bias)
        a = ops.cast(gctx, a, f32)
    return _product_node(graph, a, b, bias)


@choice("matmul")
def _product_node(graph, a, b, bias):
    """a @ b^T (+ bias) by GGML's mul_mat or ggrad's half kernel (_half_product_node), or for f32 operands by
    ggrad's f32 kernel where the backend's lowering says so (below)."""
    return _half_product_node(graph, a, b, bias)


@_product_node.alternative("kernel", fits=lambda a, b, bias: _both_f32(a, b))
def _product_by_f32_kernel(graph, a, b, bias):
    # any strides: no copies; the bias in the kernel
    return _batched(graph, a, b, lambda a: kernels.matmul_f32(graph.ctx, b, a, bias))


def _same_half(a, b, bias):
    return a.dtype is b.dtype and (a.dtype is f16 or a.dtype is bf16)


@choice("half_matmul")
def _half_product_node(graph, a, b, bias):
    """a @ b^T (+ bias) by GGML's mul_mat (its operands read strided as the backend allows: _strided_rows),
    or for two float16 or two bfloat16 operands by ggrad's half kernel where the lowering says so (below)."""
    b, a = _strided_rows(graph, b, a)
    return _with_bias(graph, _batched(graph, a, b, lambda a: _mul_mat(graph, a, b)), bias)


@_half_product_node.alternative("kernel", fits=_same_half)
def _product_by_half_kernel(graph, a, b, bias):
    # sums in float32; operands whose rows or columns are contiguous read in place
    a, b = _half_operand(graph, a), _half_operand(graph, b)
    return _with_bias(graph, _batched(graph, a, b, lambda a: kernels.matmul_half(graph.ctx, b, a)), bias)


def _mul_mat(graph, a, b):
    out = ops.mul_mat(graph.ctx, b, a)
    # float16 operands summed in float32, as PyTorch's products: GGML's CUDA and Vulkan products of them
    # would sum in float16 (bfloat16's already sum in float32). CUDA then converts them to float32 for
    # its TF32 product, whose 10-bit mantissa holds float16's values exactly
    return out.set_prec("f32") if b.dtype is f16 else out


def _with_bias(graph, out, bias):
    """out + bias, added to the product in its final shape (after _batched unfolds the batches): so placed,
    GGML's allocator plans the big GPT's autocast step under CUDA's twins in 64 MiB less memory than with the
    bias added to the folded product (benchmarks/plan_peak.py)."""
    return out if bias is None else ops.add(graph.ctx, out, bias)


def _batched(graph, a, b, product):
    """`product(a)`, the node of a @ b^T; with b unbatched and a's batches one run of rows, the batches are
    one product of all their rows (GGML's mul_mat would otherwise run a product per batch on some backends,
    and the kernels pack b for each)."""
    if a.ne[2] * a.ne[3] > 1 and b.ne[2] * b.ne[3] == 1 and _rows_follow(a):
        out = product(folded_rows(graph, a))
        return ops.reshape_4d(graph.ctx, out, out.ne[0], *a.ne[1:])
    return product(a)


@choice("strided_matmul")
def _strided_rows(graph, b, a):
    """(b, a) as GGML's mul_mat reads them: each itself when packed, or a view with contiguous rows that is
    not transposed (GGML asserts that of its first operand, b) read in place where the backend reads such
    strided operands (the default: both), else a contiguous copy."""
    return _rows(graph, b, True, True), _rows(graph, a, True, False)


@_strided_rows.alternative("both_but_bf16")
def _strided_rows_but_bf16(graph, b, a):
    """Vulkan's mul_mat reads only float32 and float16 second operands strided (an attention product of
    bfloat16 heads fell back to the CPU)."""
    return _rows(graph, b, True, True), _rows(graph, a, a.dtype is not bf16, False)


@_strided_rows.alternative("first")
def _strided_first(graph, b, a):
    return _rows(graph, b, True, True), _rows(graph, a, False, False)


@_strided_rows.alternative("none")
def _strided_none(graph, b, a):
    return _rows(graph, b, False, True), _rows(graph, a, False, False)


def _half_operand(graph, g):
    """`g` as kernels.matmul_half reads it: itself where its rows or its columns are contiguous, else a
    contiguous copy."""
    size = g.dtype.type_size
    return g if g.nb[0] == size or g.nb[1] == size else contiguous_node(graph.ctx, g)


def _rows_follow(g):
    """Whether node g's rows over all its batches are one run of equally spaced rows, each contiguous (a 2-D
    view of them is then g itself: GGML's views take their elements as adjacent)."""
    if g.nb[0] != g.dtype.type_size:
        return False
    stride = g.nb[1] * g.ne[1]
    for d in (2, 3):
        if g.ne[d] > 1 and g.nb[d] != stride:
            return False
        stride *= g.ne[d]
    return True


def folded_rows(graph, g):
    """Node g [C, R, ...] as the 2-D [C, R * batches] of all its rows (a view, or of a contiguous copy)."""
    if g.ne[2] * g.ne[3] == 1:
        return g
    if not _rows_follow(g):
        g = contiguous_node(graph.ctx, g)
    return ops.view_2d(graph.ctx, g, g.ne[0], g.ne[1] * g.ne[2] * g.ne[3], g.nb[1], 0)


def _packed(graph, g):
    return g if g.is_packed else contiguous_node(graph.ctx, g)


def _rows(graph, g, strided, first):
    """`g` as mul_mat reads it: itself when packed, or (`strided`) a view with contiguous rows that is
    not transposed (GGML asserts that of its first operand); else a contiguous copy."""
    if g.is_packed:
        return g
    nb = g.nb
    if strided and nb[0] == g.dtype.type_size and not (first and nb[0] > nb[1]):
        return g
    return copy_node(graph, g)


class OutProd(Primitive):
    """y = g^T @ x for x (..., N, K) and g (..., N, M): GGML out_prod, with no transposed copies."""
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, x, g):
        return ops.out_prod(graph.ctx, x, g)

    @staticmethod
    def shape(x, g):
        return g.shape[:-2] + (g.shape[-1], x.shape[-1])

    @staticmethod
    def backward(ctx, gy):
        x, g = ctx.saved_tensors
        need_x, need_g = ctx.needs_input_grad
        return (MatMulNT.apply(g, mv.transpose(gy, -1, -2)) if need_x else None,   # g @ gy
                MatMulNT.apply(x, gy) if need_g else None)                         # x @ gy^T


def weight_grad(g, x):
    """g^T @ x for g (..., R, N) and x (..., R, K) of the same batch dims: the gradient of x @ w^T with
    respect to w (before summing x's extra batch dims): rows of g^T against rows of x^T (MatMulNT), or OutProd
    where the backend runs it fast on f32 (lowering.py)."""
    return _weight_grad_op(pending_graph(g.device), g, x)


@choice("weight_grad")
def _weight_grad_op(graph, g, x):
    return MatMulNT.apply(g, x, True, True)


@_weight_grad_op.alternative("out_prod", fits=_both_f32)
def _weight_grad_op_by_out_prod(graph, g, x):
    return OutProd.apply(x, g)


def matmul_nt(x, w, bias=None, w_transposed=False):
    """x @ w.T (+ bias) with numpy broadcasting of the batch dimensions; `w_transposed`: w is given as
    (..., K, N), and this is x @ w."""
    if w.dtype.is_quantized:
        w = mv.transpose(w, -1, -2) if w_transposed else w
        out = quant.matmul_nt_quantized(x, w)
        return out if bias is None else out + bias
    require_float(x, "matmul")
    require_float(w, "matmul")
    if x.ndim < 2 or w.ndim < 2:
        raise ShapeError(f"matmul: expected at least 2-D operands, got {x.shape} and {w.shape}")
    inner = w.shape[-2] if w_transposed else w.shape[-1]
    if x.shape[-1] != inner:
        shown = w.shape if w_transposed else tuple(w.shape[:-2]) + (w.shape[-1], w.shape[-2])
        raise ShapeError(f"matmul: shapes {x.shape} and {shown} don't match "
                         f"(inner dims {x.shape[-1]} != {inner})")
    batch = broadcast_shapes(x.shape[:-2], w.shape[:-2], "matmul")
    sizes.check("matmul", batch + (x.shape[-2], w.shape[-1] if w_transposed else w.shape[-2]), f32)
    if x.shape[:-2] != batch:
        x = mv.expand(x, batch + x.shape[-2:])
    if x.dtype is w.dtype and x.dtype.name in ("f16", "bf16"):
        # GGML takes b in a's dot-product type and gives f32: a bias joins before the one rounding
        return product_with_bias(x, w, bias, w_transposed).to(x.dtype)
    if x.dtype is not f32:
        x = x.to(f32)
    if w.dtype.name not in ("f32", "f16"):
        w = w.to(f32)
    out = MatMulNT.apply(x, w, False, w_transposed)
    return out if bias is None else out + bias


def product_with_bias(x, w, bias, w_transposed=False):
    """x @ w^T (+ bias) in float32 for MatMulNT's operands: one op (Linear) where w is a 2-D weight read as it
    is and the bias fits it, else the product and a float32 addition."""
    if bias is not None and not w_transposed and w.ndim == 2 and 2 <= x.ndim <= 4 and bias.shape == w.shape[:1]:
        return Linear.apply(x, w, bias if bias.dtype is f32 else bias.to(f32))
    out = MatMulNT.apply(x, w, False, w_transposed)
    return out if bias is None else out + bias.to(f32)


@declare(method=True)
@autocast_op("matmul", LOWER)
def matmul(a, b):
    """a @ b with PyTorch's rules for 1-D operands and broadcast batch dimensions."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        form = complex_form("matmul", a, b)
        if form is not None:
            return form(a, b)
        raise TypeError(f"matmul: expected Tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got {a.shape} and {b.shape}")
    squeeze = []
    if a.ndim == 1:
        a = mv.unsqueeze(a, 0)
        squeeze.append(-2)
    if b.ndim == 1:
        b = mv.unsqueeze(b, 1)
        squeeze.append(-1)
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} don't match "
                         f"(inner dims {a.shape[-1]} != {b.shape[-2]})")
    if a.ndim > 4 or b.ndim > 4:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], "matmul")
        out = folding.matmul(matmul, a, b, batch)
    else:
        out = matmul_nt(a, b, w_transposed=True)
    if a.dtype is b.dtype and a.dtype.name in ("f16", "bf16"):
        out = out.to(a.dtype)   # half @ half is half, as PyTorch (GGML accumulates in float32)
    for d in squeeze:
        out = mv.squeeze(out, d)
    return out


@declare()
@autocast_op("linear", LOWER)
def linear(x, weight, bias=None):
    """x @ weight.T + bias, weight of shape (out_features, in_features): x's rows over all its batch
    dims are one product (MatMulNT folds them), with no reshape recorded where x has 2 to 4 dims."""
    if x.shape[-1:] != weight.shape[-1:]:
        raise ShapeError(f"linear: input of shape {x.shape} does not match weight of shape {weight.shape} "
                         f"(in_features {weight.shape[-1]})")
    if 2 <= x.ndim <= 4 and weight.ndim == 2:
        if bias is not None and x.dtype is weight.dtype is bias.dtype is f32 and bias.shape == weight.shape[:1]:
            return Linear.apply(x, weight, bias)
        return matmul_nt(x, weight, bias)
    lead = x.shape[:-1]
    flat = mv.reshape(x, -1, x.shape[-1])
    out = matmul_nt(flat, weight, bias)
    return mv.reshape(out, lead + (weight.shape[0],))
