"""Self-attention over the heads of one fused projection: one recorded op forward, one backward.

MultiHeadAttention's general path records about a dozen ops a layer forward (the heads' reshape, permute
and slices, two products, the softmax, the output's permute and reshape) and twice as many backward. Here
the same GGML nodes are built inside one op each way: a training step's host time is paid per recorded op.
The backward recomputes the attention weights from q and k, as fused attention kernels do, rather than
keeping a (B, H, T, S) tensor alive from the forward to the backward: one more small product a layer, and
that memory free for the rest of the step.

The formulas are written once over their operations: `_Nodes` builds them as GGML nodes inside one op,
`_Tensors` as differentiable Tensor ops, for a backward that is itself differentiated (create_graph).
Shapes are numpy's: qkv (B, T, 3E) holds q, k and v side by side, each of H heads of Dh = E / H.
"""

from ...ggml import f32, kernels, ops
from .. import grad_mode
from . import flash_attention
from ..lowering import choice
from ..primitive import Primitive
from .concat import join_nodes
from .joins import cat
from .products import MatMulNT
from .neural import SoftmaxBack, SoftmaxExt, softmax_node


def _forward(qkv, mask, scale, heads, op):
    """softmax(q k^T * scale + mask) v for the heads of qkv, as (B, T, E)."""
    q, k, v = (op.heads(qkv, heads, 3, part) for part in range(3))
    p = op.softmax(op.product(q, k), mask, scale)
    return op.merge_heads(op.product(p, v, tb=True))


def _backward(g, qkv, mask, scale, heads, op, dtype=None):
    """The gradient at qkv of `_forward` given g (B, T, E), as (B, T, 3E) in `dtype` (qkv's by default); the
    weights recomputed."""
    q, k, v = (op.heads(qkv, heads, 3, part) for part in range(3))
    p = op.softmax(op.product(q, k), mask, scale)
    gh = op.heads(g, heads, 1, 0)
    ds = op.softmax_back(op.product(gh, v), p, scale)             # at the scaled, masked scores
    dq = op.product(ds, k, tb=True)                               # dS K
    dk = op.product(ds, q, ta=True, tb=True)                      # dS^T Q
    dv = op.product(p, gh, ta=True, tb=True)                      # P^T dO
    return op.merge_heads(dq, dk, dv, dtype=dtype or qkv.dtype)


def _by_kernel(graph, qkv, mask, heads, causal):
    """Whether the heads of qkv attend by ggrad's flash attention kernels (Lowering.attention): the scores are
    then never materialised, the causal mask (`causal`) becomes the kernels' own rule."""
    return (flash_attention.by_kernel(graph, qkv.dtype)
            and (causal or mask is None or (mask.ne[2] in (1, heads) and mask.ne[3] in (1, qkv.ne[2]))))


def _kernel_parts(graph, qkv, mask, scale, heads, causal):
    """(q, k, v heads, the kernels' mask, O token-major [Dh, H, T, B] and L) of qkv by the forward kernel."""
    op = _Nodes(graph)
    q, k, v = (op.heads(qkv, heads, 3, part) for part in range(3))
    mask = None if causal or mask is None else flash_attention.rows_node(graph, mask)
    return q, k, v, mask, *kernels.flash_attn(graph.ctx, q, k, v, mask, scale, causal, token_major=True)


def _kernel_forward(graph, qkv, mask, scale, heads, causal):
    """O as (B, T, E): the kernel writes it token-major, so the heads merge by a reshape (a view)."""
    o = _kernel_parts(graph, qkv, mask, scale, heads, causal)[4]
    dh, h, t, b = o.ne
    return ops.reshape_3d(graph.ctx, o, dh * h, t, b)


def _kernel_backward(graph, g, qkv, mask, scale, heads, causal, dtype):
    """The gradient at qkv by the backward kernel, which writes it in qkv's layout (no joining or permuting
    copy), cast to `dtype`; O and L recomputed (SelfAttention keeps qkv only)."""
    q, k, v, mask, o, lse = _kernel_parts(graph, qkv, mask, scale, heads, causal)
    c = graph.ctx
    do = _Nodes(graph).heads(g, heads, 1, 0)
    grad = kernels.flash_attn_back(c, q, k, v, ops.permute(c, o, 0, 2, 1, 3), do, lse, mask, scale, causal,
                                   joined=True)
    return grad if dtype is f32 else ops.cast(c, grad, dtype)


@choice("weight_grad")
def _operand_node(graph, qkv):
    """qkv as the products read it: itself, or a half qkv in float32 where the backend takes the products of v
    and k themselves by out_prod (CUDA: float32 only, see `_heads_product`), one cast instead of transposed
    half copies of v, k, P and dS."""
    return qkv


@_operand_node.alternative("out_prod", fits=lambda qkv: qkv.dtype is not f32)
def _operand_in_f32(graph, qkv):
    return ops.cast(graph.ctx, qkv, f32)


@choice("weight_grad")
def _heads_product(graph, a, b, ta, tb):
    """A @ B^T, A = a^T where ta, B = b^T where tb (MatMulNT's flags). A product of b itself (tb), whose
    mul_mat would copy b transposed (its rows are the contraction's columns), is out_prod where the backend
    reads both operands in place that way (CUDA, f32; as products.weight_grad): a^T b as out_prod(b, a), and
    a b as out_prod(b, a^T)."""
    return MatMulNT.build(None, graph, a, b, ta, tb)


@_heads_product.alternative("out_prod", fits=lambda a, b, ta, tb: tb and a.dtype is f32 and b.dtype is f32)
def _heads_product_by_out_prod(graph, a, b, ta, tb):
    return _out_prod(graph.ctx, b, a if ta else ops.transpose(graph.ctx, a))


def _out_prod(c, a, b):
    """out_prod(a, b) of heads [., ., H, B]. GGML's CUDA out_prod runs one batched GEMM per index of dim 3,
    so the larger of the two batch dims is put in dim 2 (views), and swapped back in the result."""
    if a.ne[3] <= a.ne[2]:
        return ops.out_prod(c, a, b)
    a, b = (ops.permute(c, x, 0, 1, 3, 2) for x in (a, b))
    return ops.permute(c, ops.out_prod(c, a, b), 0, 1, 3, 2)


class _Nodes:
    """The formulas' operations as GGML nodes of `graph` (dimensions in GGML's order, innermost first)."""

    def __init__(self, graph):
        self.graph = graph

    def operand(self, qkv):
        return _operand_node(self.graph, qkv)

    def heads(self, x, heads, parts, part):
        """Part `part` of the `parts` side by side in x [parts * E, T, B], as the heads [Dh, T, H, B] (a view)."""
        width = x.ne[0] // parts
        dh, size = width // heads, x.nb[0]
        c = self.graph.ctx
        split = ops.view_4d(c, x, dh, heads, x.ne[1], x.ne[2], dh * size, x.nb[1], x.nb[2], part * width * size)
        return ops.permute(c, split, 0, 2, 1, 3)

    def product(self, a, b, ta=False, tb=False):
        return _heads_product(self.graph, a, b, ta, tb)

    def softmax(self, x, mask, scale):
        return softmax_node(self.graph, x, mask, scale)

    def softmax_back(self, g, y, scale):
        return ops.soft_max_ext_back(self.graph.ctx, g, y, scale, 0.0)

    def merge_heads(self, *parts, dtype=f32):
        """Heads [Dh, T, H, B] (one part or several side by side) as [parts * H * Dh, T, B], in `dtype`."""
        c = self.graph.ctx
        dh, t, h, b = parts[0].ne
        laid = [ops.permute(c, x, 0, 2, 1, 3) for x in parts]      # [Dh, H, T, B] views
        out = ops.cont(c, laid[0]) if len(laid) == 1 else join_nodes(self.graph, laid[0], laid[1], 1)
        for x in laid[2:]:
            out = join_nodes(self.graph, out, x, 1)
        out = ops.reshape_3d(self.graph.ctx, out, dh * h * len(parts), t, b)
        return out if dtype is f32 else ops.cast(c, out, dtype)


class _Tensors:
    """The formulas' operations as differentiable Tensor ops (numpy order)."""

    @staticmethod
    def heads(x, heads, parts, part):
        b, t, width = x.shape
        dh = width // parts // heads
        return x.reshape(b, t, parts * heads, dh).narrow(2, part * heads, heads).permute(0, 2, 1, 3)

    @staticmethod
    def product(a, b, ta=False, tb=False):
        return MatMulNT.apply(a, b, ta, tb)

    @staticmethod
    def softmax(x, mask, scale):
        return SoftmaxExt.apply(x, mask, scale, 0.0)

    @staticmethod
    def softmax_back(g, y, scale):
        return SoftmaxBack.apply(g, y, scale)

    @staticmethod
    def merge_heads(*parts, dtype=f32):
        b, h, t, dh = parts[0].shape
        joined = parts[0] if len(parts) == 1 else cat(parts, dim=1)
        out = joined.permute(0, 2, 1, 3).reshape(b, t, len(parts) * h * dh)
        return out if dtype is f32 else out.to(dtype)


class SelfAttention(Primitive):
    """softmax(q k^T * scale + mask) v of the `heads` heads of qkv (B, T, 3E), as (B, T, E) float32.

    `mask`: None or a constant additive float32 mask fitted to the scores (B, H, T, T) by
    nn.functional.fit_mask. `rounded`: None, or the low precision Tensor that a float32 qkv was rounded to
    (autocast's product result): the op computes from it and keeps it for backward, and qkv's gradient comes
    back in float32, not rounded to the low precision and cast back for the product's backward. `causal`: the
    mask is exactly the causal one (query i sees keys j <= i), which flash attention's kernels apply by
    themselves, skipping the blocks it hides."""
    saves = (0, 1)   # qkv (or `rounded`) and the mask: see saved

    @staticmethod
    def build(ctx, graph, qkv, mask, scale, heads, rounded=None, causal=False):
        qkv = qkv if rounded is None else rounded
        if _by_kernel(graph, qkv, mask, heads, causal):
            return _kernel_forward(graph, qkv, mask, scale, heads, causal)
        op = _Nodes(graph)
        return _forward(op.operand(qkv), mask, scale, heads, op)

    @staticmethod
    def shape(qkv, mask, scale, heads, rounded=None, causal=False):
        b, t, width = qkv.shape
        return (b, t, width // 3)

    @staticmethod
    def result_dtype(qkv, mask, scale, heads, rounded=None, causal=False):
        return f32

    @classmethod
    def saved(cls, ctx, args, out):
        ctx.scale, ctx.heads, ctx.grad_dtype = args[2], args[3], args[0].dtype
        ctx.causal = len(args) > 5 and args[5]
        kept = args[4] if len(args) > 4 and args[4] is not None else args[0]
        return kept, args[1]

    @staticmethod
    def backward(ctx, g):
        qkv, mask = ctx.saved_tensors
        rest = (None,) * (len(ctx.needs_input_grad) - 1)
        if grad_mode.is_grad_enabled():   # create_graph: a backward of differentiable ops
            return (_backward(g, qkv, mask, ctx.scale, ctx.heads, _Tensors, ctx.grad_dtype),) + rest
        return (SelfAttentionBack.apply(g, qkv, mask, ctx.scale, ctx.heads, ctx.grad_dtype, ctx.causal),) + rest


class SelfAttentionBack(Primitive):
    """SelfAttention's gradient at qkv given g, in `dtype` (qkv's by default): one recorded op (no backward of
    its own: a backward that is itself differentiated takes `_backward` in Tensor ops)."""

    @staticmethod
    def build(ctx, graph, g, qkv, mask, scale, heads, dtype=None, causal=False):
        if _by_kernel(graph, qkv, mask, heads, causal):
            return _kernel_backward(graph, g, qkv, mask, scale, heads, causal, dtype or qkv.dtype)
        op = _Nodes(graph)
        return _backward(g, op.operand(qkv), mask, scale, heads, op, dtype or qkv.dtype)

    @staticmethod
    def shape(g, qkv, mask, scale, heads, dtype=None, causal=False):
        return qkv.shape

    @staticmethod
    def result_dtype(g, qkv, mask, scale, heads, dtype=None, causal=False):
        return dtype or qkv.dtype
