"""Nodes computed by ggrad's own CPU kernels (C in ggrad/ggml/csrc, compiled into the cffi module), built
as GGML custom ops: the CPU backend runs them on its threads like any node. A CUDA backend runs those that
have a CUDA twin registered with it (gpu_twins.py); other backends cannot run them (an RPC server has no
such function), so only graphs on the CPU backend, or on CUDA for registered twins, may hold them.
"""

import struct

from ._lib import ffi, lib
from .ops import _check as C
from .ops import custom_4d, custom_inplace, view_3d, view_4d
from .ops._check import tensor

__all__ = ["matmul_f32", "gelu_tanh_f32", "gelu_tanh_back_f32", "gelu_tanh_half", "gelu_tanh_back_half", "concat_f32",
           "layer_norm_f32", "layer_norm_back_f32", "adamw_f32", "class_labels_f32", "relu_f32", "relu_back_f32",
           "softmax_f32", "matmul_half", "flash_attn", "flash_attn_back", "argmax_f32", "layer_norm_affine_f32",
           "cpu_function", "nonfinite_f32", "kernel_name", "isa"]

ISAS = {"best": 0, "generic": 1, "avx2": 2, "avx512": 3}   # instruction sets of the kernels (csrc/isa.c)
_ISA_NAMES = {v: k for k, v in ISAS.items()}
_FUNCTIONS = {name: ffi.addressof(lib, f"ggrad_{name}") for name in (
    "matmul_f32", "gelu_tanh_f32", "gelu_tanh_back_f32", "concat_f32", "layer_norm_f32", "layer_norm_back_f32",
    "adamw_f32", "class_labels_f32", "relu_f32", "relu_back_f32", "softmax_f32", "matmul_half", "flash_attn",
    "flash_attn_back", "argmax_f32", "layer_norm_affine_f32", "nonfinite_f32", "gelu_tanh_half",
    "gelu_tanh_back_half")}
_HALF = frozenset({C.F16, C.BF16})
_TYPE_SIZE = {C.F32: 4, C.F16: 2, C.BF16: 2}
_INT_MAX = 2**31 - 1   # cuBLAS takes sizes and leading dimensions as int
_NAMES = {int(ffi.cast("intptr_t", fn)): name for name, fn in _FUNCTIONS.items()}


def matmul_f32(ctx, a, b, bias=None):
    """`b @ a.T` (+ `bias`) batched over dims 2 and 3, as ops.mul_mat, for f32 operands read with any strides.

    a [k, n, q, r] and b [k, m, q*x, r*y] (a broadcast over b's batch dims) give f32 [n, m, q*x, r*y].
    Transposed and permuted views are read in place: no contiguous copy is needed, unlike mul_mat.

    Args:
        ctx: the Context the result is made in.
        a: f32 [k, n, q, r], any strides.
        b: f32 [k, m, q*x, r*y], any strides.
        bias (optional): f32 [n], contiguous: added to every row of the result after its sums (a linear
            layer in one node).
    """
    op = "matmul_f32"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    na, nb = C.ne(pa), C.ne(pb)
    _f32(op, pa, pb)
    if na[0] != nb[0] or 0 in (na[2], na[3]) or nb[2] % na[2] or nb[3] % na[3]:
        C.fail(op, f"a ne={na} and b ne={nb} don't match (equal ne[0], b's batch dims multiples of a's)")
    args = [a, b]
    if bias is not None:
        pbias = _contiguous_f32(op, {"bias": bias})["bias"]
        if C.ne(pbias) != [na[1], 1, 1, 1]:
            C.fail(op, f"bias ne={C.ne(pbias)} must be [{na[1]}, 1, 1, 1], one value per row of a")
        args.append(bias)
    return custom_4d(ctx, "f32", na[1], nb[1], nb[2], nb[3], args, len(args), _FUNCTIONS[op], -1)


def matmul_half(ctx, a, b, bias=None, rounded=False):
    """`b @ a.T` in float32 for float16 (or bfloat16) operands, sums in float32, batched over dims 2 and 3.

    a [k, m, q, r] and b [k, n, q*x, r*y] (a broadcast over b's batch dims) give f32 [m, n, q*x, r*y], as
    ops.mul_mat; unlike it, every product sums in float32 (GGML's CUDA product of float16 sums in float16, or
    converts both operands to float32 first) and transposed views are read in place. On CUDA the node runs
    cuBLAS (its twin, ggrad/ggml/cuda/twins.cu); on the CPU a plain loop that defines the result.

    Args:
        ctx: the Context the result is made in.
        a: f16 or bf16 [k, m, q, r] whose rows (along k) or columns (along m) are contiguous.
        b: b's dtype, [k, n, q*x, r*y], likewise.
        bias: None, or a's dtype [m], contiguous, added to every row of the sums (`rounded` only).
        rounded: give the result in a's dtype, the sums (plus bias) rounded once, as PyTorch's half linear,
            instead of float32: its half result without a float32 one in between (a cast and an add).
    """
    op = "matmul_half"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    if pa.type not in _HALF or pb.type != pa.type:
        raise C.DTypeError(f"{op}: a ({C.tname(pa)}) and b ({C.tname(pb)}) must both be f16 or both bf16")
    na, nb = C.ne(pa), C.ne(pb)
    if na[0] != nb[0] or 0 in (na[2], na[3]) or nb[2] % na[2] or nb[3] % na[3]:
        C.fail(op, f"a ne={na} and b ne={nb} don't match (equal ne[0], b's batch dims multiples of a's)")
    for name, p in (("a", pa), ("b", pb)):
        strides = list(p.nb)
        if 2 not in strides[:2] or any(s % 2 for s in strides) or max(C.ne(p)) > _INT_MAX \
                or max(strides) // 2 > _INT_MAX:
            C.fail(op, f"{name} ne={C.ne(p)} nb={strides}: needs contiguous rows or columns (nb[0] or nb[1] "
                       "of one element) and sizes and strides below 2**31 elements")
    args = [a, b]
    if bias is not None:
        pbias = tensor(op, "bias", bias)
        if not rounded or pbias.type != pa.type or C.ne(pbias) != [na[1], 1, 1, 1] \
                or not lib.ggml_is_contiguous(pbias):
            C.fail(op, f"bias ({C.tname(pbias)}, ne={C.ne(pbias)}) must be contiguous {C.tname(pa)} "
                       f"[{na[1]}] and come with rounded=True")
        args.append(bias)
    return custom_4d(ctx, C.tname(pa) if rounded else "f32", na[1], nb[1], nb[2], nb[3], args, len(args),
                     _FUNCTIONS[op], -1)


ATTENTION_HEAD_MAX = 256   # the widest head (q's and k's, or v's) the attention kernels take (the CUDA twin's)
_CAUSAL_OFFSET = 2**29     # causality's offset travels biased by it in 30 bits of userdata


def flash_attn(ctx, q, k, v, mask=None, scale=1.0, causal=False, offset=0, token_major=False):
    """softmax(q k^T * scale + mask) v without the scores: flash attention's forward (csrc/flash_attn.c; on
    CUDA its twin, cuda/flash_attn.cu), one node whose f32 result holds the output O and the logsumexp L of
    each row of scores (what flash_attn_back reads).

    Args:
        ctx: the Context the result is made in.
        q: f32, f16 or bf16 [d, tq, hq, b] with contiguous rows (any other strides).
        k: q's type, [d, tk, hk, bk]: hq a multiple of hk (grouped-query attention: query head h reads head
            h // (hq / hk)) and b of bk (likewise), contiguous rows.
        v: q's type, [dv, tk, hk, bk], contiguous rows. d and dv at most ATTENTION_HEAD_MAX.
        mask: None, or an additive f32 mask [tk, >= tq, 1 or hq, 1 or b] with contiguous rows (-inf blocks).
        scale: multiplies the scores q k^T before the mask is added.
        causal: query i sees keys j <= i + offset only (PyTorch's is_causal: offset 0).
        offset: see causal (|offset| < 2**29).
        token_major: O laid out token-major, [dv, hq, tq, b] (numpy's (b, tq, hq, dv)): the heads of each
            query side by side, as the projection that follows attention reads them, with no permuting copy.

    Returns:
        (O f32 [dv, tq, hq, b], or [dv, hq, tq, b] where token_major, L f32 [tq, hq, b]), contiguous views of
        the node. A row that sees no key gives zeros and L = -inf.
    """
    op = "flash_attn"
    pq, pk, pv = _attention_operands(op, q, k, v)
    d, tq, hq, b = C.ne(pq)
    dv = C.ne(pv)[0]
    args = [q, k, v] + _attention_mask(op, mask, C.ne(pk)[1], tq, hq, b)
    n = dv * tq * hq * b
    node = custom_4d(ctx, "f32", n + tq * hq * b, 1, 1, 1, args, len(args), _FUNCTIONS[op], -1,
                     _attention_bits(op, scale, causal, offset, token_major))
    inner = hq if token_major else tq   # O's dimension 1; the other of tq and hq is its dimension 2
    o = view_4d(ctx, node, dv, inner, tq * hq // inner, b, dv * 4, dv * inner * 4, dv * tq * hq * 4, 0)
    return o, view_3d(ctx, node, tq, hq, b, tq * 4, tq * hq * 4, n * 4)


def flash_attn_back(ctx, q, k, v, o, do, lse, mask=None, scale=1.0, causal=False, offset=0, joined=False):
    """The gradients of flash_attn's O at q, k and v given dO (flash attention's backward: the scores'
    probabilities recomputed block by block from L, no T x T tensor), one node.

    Args:
        ctx: the Context the result is made in.
        q, k, v, mask, scale, causal, offset: flash_attn's.
        o: flash_attn's O: f32 [dv, tq, hq, b] with contiguous rows (a token-major O permuted: a view).
        do: the gradient at O: f32 [dv, tq, hq, b] with contiguous rows.
        lse: flash_attn's L: f32 [tq, hq, b] with contiguous rows.
        joined: where q, k and v are the heads of one fused projection qkv (numpy's (b, tq, 3 hq d): d = dv,
            tq = tk, hq = hk, b = bk), the gradients laid out as qkv: token-major and side by side, so that
            qkv's gradient needs no joining or permuting copy.

    Returns:
        (dq, dk, dv): f32, shaped as q, k and v, contiguous views of the node (whose last part holds
        rowsum(dO O), the twin's scratch); where joined, the gradient at qkv instead: f32 [3 hq d, tq, b], one
        contiguous view.
    """
    op = "flash_attn_back"
    pq, pk, pv = _attention_operands(op, q, k, v)
    d, tq, hq, b = nq = C.ne(pq)
    _, tk, hk, bk = nk = C.ne(pk)
    dv = C.ne(pv)[0]
    if joined and (dv, tk, hk, bk) != (d, tq, hq, b):
        C.fail(op, f"joined needs q, k and v of one shape, the heads of one fused qkv (no grouped-query or "
                   f"broadcast batches), got q ne={nq}, k ne={nk}, v ne={C.ne(pv)}")
    for name, t, want in (("o", o, [dv, tq, hq, b]), ("do", do, [dv, tq, hq, b]), ("lse", lse, [tq, hq, b, 1])):
        p = tensor(op, name, t)
        if p.type != C.F32 or p.nb[0] != 4 or C.ne(p) != want:
            C.fail(op, f"{name} must be f32 with contiguous rows and ne={want}, got {C.tname(p)} ne={C.ne(p)} "
                       f"nb={list(p.nb)}")
    args = [q, k, v, o, do, lse] + _attention_mask(op, mask, tk, tq, hq, b)
    sizes = [d * tq * hq * b, d * tk * hk * bk, dv * tk * hk * bk]
    node = custom_4d(ctx, "f32", sum(sizes) + tq * hq * b, 1, 1, 1, args, len(args), _FUNCTIONS[op], -1,
                     _attention_bits(op, scale, causal, offset, joined))
    if joined:
        width = 3 * hq * d
        return view_3d(ctx, node, width, tq, b, width * 4, width * tq * 4, 0)
    parts, at = [], 0
    for size, (w, rows, heads, batches) in zip(sizes, (nq, nk, [dv, tk, hk, bk])):
        parts.append(view_4d(ctx, node, w, rows, heads, batches, w * 4, w * rows * 4, w * rows * heads * 4, at * 4))
        at += size
    return tuple(parts)


def _attention_operands(op, q, k, v):
    """q, k and v's GTensor pointers, checked (flash_attn's Args)."""
    pq, pk, pv = tensor(op, "q", q), tensor(op, "k", k), tensor(op, "v", v)
    if pq.type not in (C.F32, C.F16, C.BF16) or pk.type != pq.type or pv.type != pq.type:
        raise C.DTypeError(f"{op}: q, k and v must be of one type, f32, f16 or bf16; got {C.tname(pq)}, "
                           f"{C.tname(pk)}, {C.tname(pv)}")
    nq, nk, nv = C.ne(pq), C.ne(pk), C.ne(pv)
    if (nk[0] != nq[0] or nv[1:] != nk[1:] or 0 in nk[2:] or nq[2] % nk[2] or nq[3] % nk[3]
            or max(nq[0], nv[0]) > ATTENTION_HEAD_MAX):
        C.fail(op, f"q ne={nq}, k ne={nk} and v ne={nv} don't fit (q [d, tq, hq, b], k [d, tk, hk, bk], "
                   f"v [dv, tk, hk, bk], hq a multiple of hk, b of bk, d and dv <= {ATTENTION_HEAD_MAX})")
    for name, p in (("q", pq), ("k", pk), ("v", pv)):
        if p.nb[0] != _TYPE_SIZE[p.type]:
            C.fail(op, f"{name} (ne={C.ne(p)}, nb={list(p.nb)}) needs contiguous rows")
    return pq, pk, pv


def _attention_mask(op, mask, tk, tq, hq, b):
    """[mask] checked (flash_attn's Args), or []."""
    if mask is None:
        return []
    p = tensor(op, "mask", mask)
    nm = C.ne(p)
    if p.type != C.F32 or p.nb[0] != 4 or nm[0] != tk or nm[1] < tq or nm[2] not in (1, hq) or nm[3] not in (1, b):
        C.fail(op, f"mask must be f32 [tk={tk}, >= tq={tq}, 1 or {hq}, 1 or {b}] with contiguous rows, got "
                   f"{C.tname(p)} ne={nm} nb={list(p.nb)}")
    return [mask]


def _attention_bits(op, scale, causal, offset, token_major=False):
    """flash_attn's userdata: the scale's 32 bits, causality in bit 32, the offset biased in bits 33-62, the
    results token-major (flash_attn's token_major, flash_attn_back's joined) in bit 63."""
    C.integer(op, "offset", offset, 1 - _CAUSAL_OFFSET, _CAUSAL_OFFSET - 1)
    bits = struct.unpack("<I", struct.pack("<f", float(scale)))[0]
    return ffi.cast("void *", bits | (bool(causal) << 32) | ((offset + _CAUSAL_OFFSET) << 33)
                    | (bool(token_major) << 63))


def cpu_function(name):
    """The CPU function of kernel `name` (`"matmul_half"`, ...): what its custom nodes name."""
    return _FUNCTIONS[name]


def gelu_tanh_f32(ctx, x):
    """GELU's tanh form of contiguous f32 `x`, exact in f32 (GGML's gelu reads an f16 table).

    Args:
        ctx: the Context the result is made in.
        x: f32, contiguous.
    """
    return _same_shape(ctx, "gelu_tanh_f32", x=x)


def gelu_tanh_back_f32(ctx, g, x):
    """g times the derivative of GELU's tanh form at x (the gradient first, as GGML's backward ops).

    Args:
        ctx: the Context the result is made in.
        g: f32, contiguous, x's shape.
        x: f32, contiguous.
    """
    return _same_shape(ctx, "gelu_tanh_back_f32", g=g, x=x)


def gelu_tanh_half(ctx, x):
    """GELU's tanh form of contiguous float16 or bfloat16 `x`, computed in f32 and rounded once to x's dtype
    (as PyTorch's GELU of a half tensor): autocast's MLP keeps its activation in half precision, with no
    f32 copy of it either way.

    Args:
        ctx: the Context the result is made in.
        x: f16 or bf16, contiguous.
    """
    return _same_half_shape(ctx, "gelu_tanh_half", x=x)


def gelu_tanh_back_half(ctx, g, x):
    """gelu_tanh_back_f32's value for float16 or bfloat16 g and x (one dtype), in f32, rounded once to it.

    Args:
        ctx: the Context the result is made in.
        g: x's dtype and shape, contiguous.
        x: f16 or bf16, contiguous.
    """
    return _same_half_shape(ctx, "gelu_tanh_back_half", g=g, x=x)


def relu_f32(ctx, x):
    """max(x, 0) of contiguous f32 `x` as PyTorch's relu: nan stays nan, -0 stays -0 (GGML's relu gives 0).

    Args:
        ctx: the Context the result is made in.
        x: f32, contiguous.
    """
    return _same_shape(ctx, "relu_f32", x=x)


def relu_back_f32(ctx, g, x):
    """g where x > 0 or x is nan, else 0 (even where g is not finite): relu's gradient, as PyTorch's.

    Args:
        ctx: the Context the result is made in.
        g: f32, contiguous, x's shape.
        x: f32, contiguous.
    """
    return _same_shape(ctx, "relu_back_f32", g=g, x=x)


def softmax_f32(ctx, a, mask, scale):
    """softmax(a * scale + mask) along dimension 0, as ops.soft_max_ext without ALiBi (max_bias 0).

    Args:
        ctx: the Context the result is made in.
        a: f32 scores [n, rows, heads, batch], contiguous.
        mask: None, or an f32 additive mask [n, >= rows, heads / k, batch / j] whose rows are contiguous
            (broadcast over dimensions 2 and 3).
        scale: multiplies `a` before the mask is added.
    """
    op = "softmax_f32"
    pa = _contiguous_f32(op, {"a": a})["a"]
    args = [a]
    if mask is not None:
        pm = tensor(op, "mask", mask)
        _f32(op, pm)
        na, nm = C.ne(pa), C.ne(pm)
        if (pm.nb[0] != 4 or nm[0] != na[0] or nm[1] < na[1] or 0 in (nm[2], nm[3]) or na[2] % nm[2]
                or na[3] % nm[3]):
            C.fail(op, f"mask ne={nm} nb={list(pm.nb)} does not fit a ne={na} (need contiguous rows, "
                       "mask.ne[0] == a.ne[0], mask.ne[1] >= a.ne[1], a.ne[2], a.ne[3] multiples of mask's)")
        args.append(mask)
    return custom_4d(ctx, "f32", *C.ne(pa), args, len(args), _FUNCTIONS[op], -1, _float_bits(scale))


def concat_f32(ctx, a, b, dim):
    """a and b joined along dimension `dim` (GGML's order) into a contiguous f32 tensor, as ops.concat.

    Args:
        ctx: the Context the result is made in.
        a: f32, any strides.
        b: f32, any strides, a's shape but for dimension `dim`.
        dim: 0 to 3.
    """
    op = "concat_f32"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    _f32(op, pa, pb)
    C.integer(op, "dim", dim, 0, 3)
    na, nb = C.ne(pa), C.ne(pb)
    if any(x != y for i, (x, y) in enumerate(zip(na, nb)) if i != dim):
        C.fail(op, f"a ne={na} and b ne={nb} differ beyond dimension {dim}")
    ne = list(na)
    ne[dim] += nb[dim]
    return custom_4d(ctx, "f32", *ne, [a, b], 2, _FUNCTIONS[op], -1, ffi.cast("void *", dim))


def argmax_f32(ctx, x):
    """int32 [rows]: the index of the first maximum of each row (dimension 0) of contiguous f32 `x`, or of
    its first nan, as PyTorch's argmax (GGML's argmax takes the last of ties and skips nan).

    Args:
        ctx: the Context the result is made in.
        x: f32, contiguous.
    """
    ptr = _contiguous_f32("argmax_f32", {"x": x})["x"]
    if ptr.ne[0] == 0:
        C.fail("argmax_f32", f"rows of x (ne={C.ne(ptr)}) must not be empty")
    rows = ptr.ne[1] * ptr.ne[2] * ptr.ne[3]
    return custom_4d(ctx, "i32", rows, 1, 1, 1, [x], 1, _FUNCTIONS["argmax_f32"], -1)


def layer_norm_f32(ctx, x, eps):
    """(x - mean) / sqrt(var + eps) over dimension 0 of contiguous f32 `x`, as ops.norm.

    Args:
        ctx: the Context the result is made in.
        x: f32, contiguous.
        eps: added to the variance.
    """
    return _same_shape(ctx, "layer_norm_f32", x=x, userdata=_float_bits(eps))


def layer_norm_affine_f32(ctx, x, w, b, eps):
    """layer_norm_f32(x) * w + b over dimension 0 of contiguous f32 `x` (nn.LayerNorm's forward), with the
    roundings of the three nodes it replaces.

    Args:
        ctx: the Context the result is made in.
        x: f32 [n, ...], contiguous.
        w, b: f32 [n], contiguous.
        eps: added to the variance.
    """
    op = "layer_norm_affine_f32"
    ptrs = _contiguous_f32(op, {"x": x, "w": w, "b": b})
    n = C.ne(ptrs["x"])[0]
    for name in ("w", "b"):
        if C.ne(ptrs[name]) != [n, 1, 1, 1]:
            C.fail(op, f"{name} ne={C.ne(ptrs[name])} must be [{n}, 1, 1, 1], one value per element of a row of x")
    return custom_4d(ctx, "f32", *C.ne(ptrs["x"]), [x, w, b], 3, _FUNCTIONS[op], -1, _float_bits(eps))


def layer_norm_back_f32(ctx, g, x, eps):
    """The gradient of layer_norm_f32 at x given g (the gradient first, as GGML's backward ops).

    Args:
        ctx: the Context the result is made in.
        g: f32, contiguous, x's shape.
        x: f32, contiguous.
        eps: added to the variance.
    """
    return _same_shape(ctx, "layer_norm_back_f32", g=g, x=x, userdata=_float_bits(eps))


def adamw_f32(ctx, a, grad, m, v, adamw_params, skip_if_nan=None):
    """One AdamW step on `a`, in place, `m` and `v` updated too, as ops.opt_step_adamw (its formula and
    its parameters) but vectorized. The result is a view of `a`.

    Args:
        ctx: the Context the result is made in.
        a: the parameter: f32, contiguous.
        grad: its gradient: f32, contiguous, a's shape.
        m: first-moment state: f32, contiguous, a's shape.
        v: second-moment state: f32, contiguous, a's shape.
        adamw_params: f32[7], contiguous: alpha, beta1, beta2, eps, wd, beta1h, beta2h.
        skip_if_nan: None, or one f32 (a GradScaler's check): where it is nan the step changes nothing, with
            no selection of the gradient or the parameters before it (update_guards).
    """
    op = "adamw_f32"
    operands = {"a": a, "grad": grad, "m": m, "v": v, "adamw_params": adamw_params}
    if skip_if_nan is not None:
        operands["skip_if_nan"] = skip_if_nan
    ptrs = _contiguous_f32(op, operands)
    _equal_shapes(op, {name: ptrs[name] for name in ("a", "grad", "m", "v")})
    if lib.ggml_nelements(ptrs["adamw_params"]) != 7:
        C.fail(op, f"adamw_params must hold 7 values, got ne={C.ne(ptrs['adamw_params'])}")
    if skip_if_nan is not None and lib.ggml_nelements(ptrs["skip_if_nan"]) != 1:
        C.fail(op, f"skip_if_nan must hold one value, got ne={C.ne(ptrs['skip_if_nan'])}")
    return custom_inplace(ctx, a, list(operands.values())[1:], None, _FUNCTIONS[op], -1)


NONFINITE_SLOTS = 64   # nonfinite_f32's result: one slot a thread (GGML runs it on at most this many)
NONFINITE_SOURCES = C.MAX_SRC - 1   # tensors one nonfinite_f32 node reads


def nonfinite_f32(ctx, xs):
    """f32 [NONFINITE_SLOTS] whose sum is nan exactly where an element of the f32 tensors `xs` is an inf or a
    nan, else 0: a GradScaler's check of several gradients in one node (and one read of each).

    Args:
        ctx: the Context the result is made in.
        xs: 1 to NONFINITE_SOURCES tensors, f32, contiguous, any shapes.
    """
    op = "nonfinite_f32"
    xs = list(xs)
    if not 1 <= len(xs) <= NONFINITE_SOURCES:
        C.fail(op, f"takes 1 to {NONFINITE_SOURCES} tensors, got {len(xs)}")
    _contiguous_f32(op, {f"xs[{i}]": x for i, x in enumerate(xs)})
    return custom_4d(ctx, "f32", NONFINITE_SLOTS, 1, 1, 1, xs, len(xs), _FUNCTIONS[op], NONFINITE_SLOTS)


def class_labels_f32(ctx, index, classes, ignore_index):
    """f32 [classes, rows]: per class index of `index` a row with 1 at it and 0 elsewhere, a zero row where
    the index is `ignore_index` (or outside [0, classes)): a classification loss's labels, one node.

    Args:
        ctx: the Context the result is made in.
        index: i32 [rows], contiguous.
        classes: the number of classes (> 0).
        ignore_index: the index whose rows are all zero (any int32).
    """
    op = "class_labels_f32"
    p = tensor(op, "index", index)
    if p.type != C.I32 or not lib.ggml_is_contiguous(p) or lib.ggml_nrows(p) != 1:
        C.fail(op, f"index must be a contiguous i32 vector, got {C.tname(p)} ne={C.ne(p)}")
    C.integer(op, "classes", classes, 1, 2**31 - 1)
    C.integer(op, "ignore_index", ignore_index, -2**31, 2**31 - 1)
    return custom_4d(ctx, "f32", classes, C.ne(p)[0], 1, 1, [index], 1, _FUNCTIONS[op], -1,
                     ffi.cast("void *", ffi.cast("intptr_t", ignore_index)))


def _float_bits(value):
    """A float passed to a kernel as its 32 bits in the userdata pointer."""
    return ffi.cast("void *", struct.unpack("<I", struct.pack("<f", float(value)))[0])


def kernel_name(node):
    """The name of the kernel computing the `struct ggml_tensor *` `node` ("matmul_f32", ...), or
    None for any other node (a custom op's parameters begin with its function)."""
    if node.op != lib.GGML_OP_CUSTOM:
        return None
    return _NAMES.get(int(ffi.cast("intptr_t", ffi.cast("void **", node.op_params)[0])))


def isa(name=None):
    """The instruction set the kernels use ("avx512", "avx2" or "generic"); with `name`, use that one from
    now on ("best": the fastest this CPU has). One the CPU lacks leaves the choice as it was."""
    if name is not None and name not in ISAS:
        raise ValueError(f"isa: name must be one of {sorted(ISAS)}, got {name!r}")
    return _ISA_NAMES[lib.ggrad_kernels_isa(ISAS[name] if name else -1)]


def _f32(op, *tensors):
    if any(t.type != C.F32 for t in tensors):
        raise C.DTypeError(f"{op}: expected f32 inputs, got {', '.join(C.tname(t) for t in tensors)}")


def _same_shape(ctx, op, userdata=None, **inputs):
    """The node of kernel `op` on contiguous f32 inputs of one shape, which is also its result's."""
    ne = _equal_shapes(op, _contiguous_f32(op, inputs))
    return custom_4d(ctx, "f32", *ne, list(inputs.values()), len(inputs), _FUNCTIONS[op], -1, userdata)


def _same_half_shape(ctx, op, **inputs):
    """The node of kernel `op` on contiguous inputs of one shape and one half dtype, its result's."""
    ptrs = {name: tensor(op, name, t) for name, t in inputs.items()}
    dtype = next(iter(ptrs.values())).type
    if dtype not in _HALF or any(p.type != dtype for p in ptrs.values()):
        raise C.DTypeError(f"{op}: expected f16 or bf16 inputs of one dtype, got "
                           f"{', '.join(C.tname(p) for p in ptrs.values())}")
    _check_contiguous(op, ptrs)
    ne = _equal_shapes(op, ptrs)
    return custom_4d(ctx, C.tname(dtype), *ne, list(inputs.values()), len(inputs), _FUNCTIONS[op], -1)


def _contiguous_f32(op, inputs):
    """{name: GTensor pointer} of `inputs` ({name: tensor}), each checked to be contiguous f32."""
    ptrs = {name: tensor(op, name, t) for name, t in inputs.items()}
    _f32(op, *ptrs.values())
    _check_contiguous(op, ptrs)
    return ptrs


def _check_contiguous(op, ptrs):
    for name, p in ptrs.items():
        if not lib.ggml_is_contiguous(p):
            C.fail(op, f"{name} (ne={C.ne(p)}, nb={list(p.nb)}) must be contiguous")


def _equal_shapes(op, ptrs):
    """The one shape (ne) of the tensors `ptrs` ({name: GTensor pointer}), which must all have it."""
    shapes = {name: C.ne(p) for name, p in ptrs.items()}
    if len({tuple(ne) for ne in shapes.values()}) > 1:
        C.fail(op, " and ".join(f"{name} ne={ne}" for name, ne in shapes.items()) + " must be equal")
    return next(iter(shapes.values()))


isa("best")
