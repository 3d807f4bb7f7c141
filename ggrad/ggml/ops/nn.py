"""Neural-network builders: normalizations, softmax, rotary embeddings, attention, losses, arange."""

import math

from .._lib import ffi, lib
from . import _check as C
from ._check import make, tensor, optional, CTX_DOC

__all__ = ["soft_max", "soft_max_inplace", "soft_max_ext", "soft_max_ext_inplace", "flash_attn_ext",
           "cross_entropy_loss", "timestep_embedding", "arange"]

_INT32_MAX = 2**31 - 1
_INPLACE_NOTE = "\n\nIn place: the result is a view of `a`; computing it overwrites `a`'s memory."


def _export(fn):
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)
    return fn


# ----------------------------------------------------------------------------------------------------
# normalizations along rows

_NORMS = {
    "norm": "(a - mean) / sqrt(var + eps) over each row (no affine part)",
    "rms_norm": "a / sqrt(mean(a^2) + eps) over each row",
    "l2_norm": "a / max(||a||_2, eps) over each row",
}


def _norm(name, formula, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, eps):
        pa = tensor(name, "a", a)
        if pa.type != C.F32:
            C.bad_type(name, "a", pa, C.ONLY_F32)
        if pa.nb[0] != 4:
            C.contiguous_rows(name, "a", pa)
        eps = float(eps)
        if not eps >= 0.0:
            raise C.ArgumentError(f"{name}: eps must be >= 0, got {eps}")
        return make(ctx, name, fn, pa, eps)

    doc = (f"Normalization {formula}.{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: f32 tensor with contiguous rows.\n    eps: small constant >= 0.\n")
    return C.finish(builder, doc, name, __name__)


for _name, _formula in _NORMS.items():
    _export(_norm(_name, _formula, False))
    _export(_norm(_name + "_inplace", _formula, True))


def _group_norm(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, n_groups, eps):
        pa = tensor(name, "a", a)
        C.types(name, "a", pa, C.ONLY_F32)
        C.contiguous_rows(name, "a", pa)
        C.integer(name, "n_groups", n_groups, 1, _INT32_MAX)
        eps = float(eps)
        if not eps >= 0.0:
            raise C.ArgumentError(f"{name}: eps must be >= 0, got {eps}")
        return make(ctx, name, fn, pa, n_groups, eps)

    doc = (f"Group normalization: dimension 2 (channels) is split into `n_groups` groups and each group's "
           f"ne0*ne1*channels elements are normalized to zero mean and unit variance."
           f"{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: f32 tensor [W, H, C, N] with contiguous rows.\n"
           f"    n_groups: number of channel groups (>= 1).\n    eps: small constant >= 0.\n")
    return C.finish(builder, doc, name, __name__)


_export(_group_norm("group_norm", False))
_export(_group_norm("group_norm_inplace", True))


# ----------------------------------------------------------------------------------------------------
# softmax

def _soft_max_checks(op, pa, pm, max_bias):
    if pa.type != C.F32:
        C.bad_type(op, "a", pa, C.ONLY_F32)
    if not lib.ggml_is_contiguous(pa):
        C.contiguous(op, "a", pa)
    if pm != ffi.NULL:
        if pm.type != C.F32 and pm.type != C.F16:
            C.bad_type(op, "mask", pm, C.F32_F16)
        C.contiguous(op, "mask", pm)
        na, nm = pa.ne, pm.ne
        if nm[0] != na[0] or nm[1] < na[1] or not C.divides(nm[2], na[2]) or not C.divides(nm[3], na[3]):
            C.fail(op, f"mask ne={C.ne(pm)} does not fit a ne={C.ne(pa)} (need mask.ne[0] == a.ne[0], "
                       "mask.ne[1] >= a.ne[1], and a.ne[2], a.ne[3] multiples of mask.ne[2], mask.ne[3])")
    elif max_bias > 0.0:
        raise C.ArgumentError(f"{op}: max_bias={max_bias} (ALiBi) needs a mask")


def _soft_max(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a):
        pa = tensor(name, "a", a)
        _soft_max_checks(name, pa, ffi.NULL, 0.0)
        return make(ctx, name, fn, pa)

    doc = (f"Softmax along rows (dim 0).{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: contiguous f32 tensor.\n")
    return C.finish(builder, doc, name, __name__)


soft_max = _soft_max("soft_max", False)
soft_max_inplace = _soft_max("soft_max_inplace", True)


def _soft_max_ext(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, mask, scale, max_bias):
        pa = tensor(name, "a", a)
        pm = optional(name, "mask", mask)
        scale = float(scale)
        max_bias = float(max_bias)
        _soft_max_checks(name, pa, pm, max_bias)
        return make(ctx, name, fn, pa, pm, scale, max_bias)

    doc = (f"Fused `softmax(a * scale + mask * slope)` along rows; slope is 1 without ALiBi (max_bias = 0), "
           f"else head h (= dimension 2) gets ALiBi's slope m^(h+1) from max_bias.{_INPLACE_NOTE if inplace else ''}"
           f"\n\nArgs:\n    {CTX_DOC}\n    a: contiguous f32 scores [n_kv, n_q, n_head, ne3].\n"
           f"    mask: None or a contiguous f16/f32 additive mask [n_kv, >= n_q, n_head / k, ne3 / j] "
           f"(broadcast over dims 2 and 3).\n    scale: factor applied to `a` first.\n"
           f"    max_bias: ALiBi maximum bias (0 for none; > 0 needs a mask).\n")
    return C.finish(builder, doc, name, __name__)


soft_max_ext = _soft_max_ext("soft_max_ext", False)
soft_max_ext_inplace = _soft_max_ext("soft_max_ext_inplace", True)


# ----------------------------------------------------------------------------------------------------
# rotary position embedding

ROPE_MODES = {"normal": lib.GGML_ROPE_TYPE_NORMAL, "neox": lib.GGML_ROPE_TYPE_NEOX}
ROPE_MULTI_MODES = {"mrope": lib.GGML_ROPE_TYPE_MROPE, "vision": lib.GGML_ROPE_TYPE_VISION,
                    "imrope": lib.GGML_ROPE_TYPE_IMROPE}
_YARN = ("n_ctx_orig", "freq_base", "freq_scale", "ext_factor", "attn_factor", "beta_fast", "beta_slow")
_YARN_DOC = ("    n_ctx_orig: the context length the model was trained with (YaRN).\n"
             "    freq_base: base of the rotation frequencies (10000 in the original RoPE).\n"
             "    freq_scale: position scaling (1 for none).\n"
             "    ext_factor: YaRN extrapolation mix (0 for none).\n"
             "    attn_factor: YaRN attention magnitude scaling (1 for none).\n"
             "    beta_fast: YaRN low correction dimension (0 disables YaRN).\n"
             "    beta_slow: YaRN high correction dimension.\n")


def rope_checks(op, pa, pb, pc, n_dims, mode, sections):
    """Rules shared by the rope builders (also used by the backward ones). Returns the mode value."""
    multi = sections is not None
    code = C.enum(op, "mode", mode, ROPE_MULTI_MODES if multi else ROPE_MODES)
    C.types(op, "a", pa, C.F32_F16)
    if pa.nb[0] != lib.ggml_type_size(pa.type):
        C.contiguous_rows(op, "a", pa)
    C.types(op, "b", pb, frozenset({C.I32}))
    nb = pb.ne
    if nb[1] != 1 or nb[2] != 1 or nb[3] != 1:
        C.fail(op, f"positions b must be a vector, got ne={C.ne(pb)}")
    per_token = 4 if code & lib.GGML_ROPE_TYPE_MROPE else 1
    if nb[0] != pa.ne[2] * per_token:
        C.fail(op, f"positions b ne={C.ne(pb)} must hold {per_token} per token: b.ne[0] == {per_token} * "
                   f"a.ne[2] = {per_token * pa.ne[2]} (a ne={C.ne(pa)})")
    C.integer(op, "n_dims", n_dims, 0, pa.ne[0])
    if n_dims % 2:
        raise C.ArgumentError(f"{op}: n_dims={n_dims} must be even")
    if pc != ffi.NULL:
        C.types(op, "c", pc, C.ONLY_F32)
        if pc.ne[0] < n_dims // 2:
            C.fail(op, f"frequency factors c ne={C.ne(pc)} need c.ne[0] >= n_dims / 2 = {n_dims // 2}")
    if multi:
        if sum(sections) <= 0 or max(sections[:3]) <= 0 or sum(sections) > pa.ne[0]:
            C.fail(op, f"sections {sections} need a positive entry among the first three and a sum <= a.ne[0]")
        if code == lib.GGML_ROPE_TYPE_VISION and n_dims != pa.ne[0] // 2:
            C.fail(op, f"vision rope needs n_dims == a.ne[0] / 2 = {pa.ne[0] // 2}, got {n_dims}")
    return code


def _floats(values):
    return [float(v) for v in values]


def _rope_simple(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, b, n_dims, mode):
        pa, pb = tensor(name, "a", a), tensor(name, "b", b)
        code = rope_checks(name, pa, pb, ffi.NULL, n_dims, mode, None)
        return make(ctx, name, fn, pa, pb, n_dims, code)

    doc = (f"Rotary position embedding with GGML's defaults (freq_base 10000, no YaRN)."
           f"{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: f32/f16 [head_dim, n_head, n_tokens, ne3] with contiguous rows.\n"
           f"    b: i32 positions [n_tokens].\n    n_dims: how many leading dims of each head rotate (even).\n"
           f"    mode: \"normal\" (pairs of adjacent dims) or \"neox\" (first half with second half).\n")
    return C.finish(builder, doc, name, __name__)


_export(_rope_simple("rope", False))
_export(_rope_simple("rope_inplace", True))


def _rope_ext(name, inplace, with_c=True, back=False):
    fn = getattr(lib, "ggml_" + name)
    if with_c:
        def builder(ctx, a, b, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                    beta_fast, beta_slow):
            pa, pb, pc = tensor(name, "a", a), tensor(name, "b", b), optional(name, "c", c)
            code = rope_checks(name, pa, pb, pc, n_dims, mode, None)
            C.integer(name, "n_ctx_orig", n_ctx_orig, 0, _INT32_MAX)
            return make(ctx, name, fn, pa, pb, pc, n_dims, code, n_ctx_orig,
                        *_floats((freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow)))
    else:
        def builder(ctx, a, b, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                    beta_fast, beta_slow):
            pa, pb = tensor(name, "a", a), tensor(name, "b", b)
            code = rope_checks(name, pa, pb, ffi.NULL, n_dims, mode, None)
            C.integer(name, "n_ctx_orig", n_ctx_orig, 0, _INT32_MAX)
            return make(ctx, name, fn, pa, pb, n_dims, code, n_ctx_orig,
                        *_floats((freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow)))
    what = ("Backward of ops.rope_ext: the gradient with respect to rope_ext's input `a`, given the gradient "
            "of its result (the inverse rotation)" if back else
            "Rotary position embedding with YaRN scaling options" + (" (deprecated: use rope_ext)" if not with_c else ""))
    a_doc = ("gradient of rope_ext's result (f32/f16, contiguous rows) - the GRADIENT COMES FIRST" if back else
             "f32/f16 [head_dim, n_head, n_tokens, ne3] with contiguous rows")
    doc = (f"{what}.{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: {a_doc}.\n    b: i32 positions [n_tokens].\n"
           + ("    c: None or f32 frequency factors (>= n_dims/2 values) dividing the frequencies.\n" if with_c else "")
           + "    n_dims: how many leading dims of each head rotate (even).\n"
           "    mode: \"normal\" (pairs of adjacent dims) or \"neox\" (first half with second half).\n" + _YARN_DOC)
    return C.finish(builder, doc, name, __name__)


_export(_rope_ext("rope_ext", False))
_export(_rope_ext("rope_ext_inplace", True))
_export(_rope_ext("rope_custom", False, with_c=False))
_export(_rope_ext("rope_custom_inplace", True, with_c=False))


def _rope_multi(name, inplace, back=False):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                attn_factor, beta_fast, beta_slow):
        pa, pb, pc = tensor(name, "a", a), tensor(name, "b", b), optional(name, "c", c)
        sec = C.ints(name, "sections", sections, lib.GGML_MROPE_SECTIONS)
        code = rope_checks(name, pa, pb, pc, n_dims, mode, sec)
        C.integer(name, "n_ctx_orig", n_ctx_orig, 0, _INT32_MAX)
        arr = ffi.new("int[]", sec)
        return make(ctx, name, fn, pa, pb, pc, n_dims, arr, code, n_ctx_orig,
                    *_floats((freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow)))

    what = ("Backward of ops.rope_multi: the gradient with respect to its input, given the gradient of its result"
            if back else "Multi-section rotary embedding (M-RoPE, vision RoPE; Qwen-VL)")
    a_doc = ("gradient of rope_multi's result - the GRADIENT COMES FIRST" if back else
             "f32/f16 [head_dim, n_head, n_tokens, ne3] with contiguous rows")
    doc = (f"{what}.{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: {a_doc}.\n    b: i32 positions, 4 per token [4 * n_tokens].\n"
           "    c: None or f32 frequency factors.\n    n_dims: how many leading dims of each head rotate (even).\n"
           "    sections: 4 ints, cos/sin pairs per section (t, y, x, extra); their sum is n_dims/2 for M-RoPE.\n"
           "    mode: \"mrope\", \"vision\" or \"imrope\" (or the GGML_ROPE_TYPE_* value).\n" + _YARN_DOC)
    return C.finish(builder, doc, name, __name__)


_export(_rope_multi("rope_multi", False))
_export(_rope_multi("rope_multi_inplace", True))


# ----------------------------------------------------------------------------------------------------
# attention

def flash_attn_ext(ctx, q, k, v, mask, scale, max_bias, logit_softcap):
    """Fused attention softmax(q k^T * scale + mask) v; result [n_embd_v, n_head, n_batch, ne3] (permuted!).

    Args:
        ctx: the Context the result is made in.
        q: f32 queries [n_embd_k, n_batch, n_head, ne3] with contiguous rows.
        k: keys [n_embd_k, n_kv, n_head_kv, ne3] (f16/f32/quantized), n_head a multiple of n_head_kv.
        v: values [n_embd_v, n_kv, n_head_kv, ne3] (not transposed).
        mask: None or contiguous f16 [>= n_kv, >= n_batch, n_head / k, ne3 / j] additive mask.
        scale: factor on q k^T (usually 1/sqrt(n_embd_k)).
        max_bias: ALiBi maximum bias (0 for none; > 0 needs a mask).
        logit_softcap: if > 0, scores become softcap * tanh(scores / softcap).
    """
    op = "flash_attn_ext"
    pq, pk, pv = tensor(op, "q", q), tensor(op, "k", k), tensor(op, "v", v)
    pm = optional(op, "mask", mask)
    nq, nk, nv = C.ne(pq), C.ne(pk), C.ne(pv)
    if nk[0] != nq[0] or not C.divides(nk[2], nq[2]) or not C.divides(nk[3], nq[3]):
        C.fail(op, f"q ne={nq} and k ne={nk} don't match (need k.ne[0] == q.ne[0] and q's heads a multiple of k's)")
    if nq[3] != nk[3] or nq[3] != nv[3] or nv[1] != nk[1] or nv[2] != nk[2]:
        C.fail(op, f"q ne={nq}, k ne={nk} and v ne={nv} don't match (need equal ne[3], v.ne[1] == k.ne[1], "
                   "v.ne[2] == k.ne[2])")
    C.types(op, "q", pq, C.ONLY_F32)
    if pk.type != C.F32 and pk.type != C.F16 and not C.is_quantized(pk.type):
        raise C.DTypeError(f"{op}: k has type {C.tname(pk)}, expected f32, f16 or quantized")
    if pv.type != C.F32 and pv.type != C.F16 and not C.is_quantized(pv.type):
        raise C.DTypeError(f"{op}: v has type {C.tname(pv)}, expected f32, f16 or quantized")
    for name, p in (("q", pq), ("k", pk), ("v", pv)):
        if p.nb[0] != lib.ggml_type_size(p.type):
            C.contiguous_rows(op, name, p)
    max_bias = float(max_bias)
    if pm != ffi.NULL:
        C.types(op, "mask", pm, frozenset({C.F16}))
        C.contiguous(op, "mask", pm)
        nm = C.ne(pm)
        if nm[0] < nk[1] or nm[1] < nq[1] or not C.divides(nm[2], nq[2]) or not C.divides(nm[3], nq[3]):
            C.fail(op, f"mask ne={nm} does not fit q ne={nq} and k ne={nk} (need mask.ne[0] >= n_kv, "
                       "mask.ne[1] >= n_batch, and q.ne[2], q.ne[3] multiples of mask.ne[2], mask.ne[3])")
    elif max_bias > 0.0:
        raise C.ArgumentError(f"{op}: max_bias={max_bias} (ALiBi) needs a mask")
    return make(ctx, op, lib.ggml_flash_attn_ext, pq, pk, pv, pm, float(scale), max_bias, float(logit_softcap))


# ----------------------------------------------------------------------------------------------------
# losses and generators

def cross_entropy_loss(ctx, a, b):
    """Mean over rows of the cross entropy -sum(b * log_softmax(a)) of each row: an f32 scalar.

    Args:
        ctx: the Context the result is made in.
        a: f32 logits [n_classes, n_rows, ...] with contiguous rows.
        b: f32 target probabilities (labels), same shape.
    """
    op = "cross_entropy_loss"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    C.same_shape(op, pa, pb)
    C.types(op, "a", pa, C.ONLY_F32)
    C.types(op, "b", pb, C.ONLY_F32)
    C.contiguous_rows(op, "a", pa)
    C.contiguous_rows(op, "b", pb)
    return make(ctx, op, lib.ggml_cross_entropy_loss, pa, pb)


def timestep_embedding(ctx, timesteps, dim, max_period):
    """Sinusoidal timestep embeddings (diffusion models): f32 [dim, N] from timesteps [N].

    Args:
        ctx: the Context the result is made in.
        timesteps: f32 vector of N timesteps with contiguous elements.
        dim: embedding size (>= 1); the first half holds cosines, the second sines.
        max_period: the longest period (10000 in Stable Diffusion).
    """
    op = "timestep_embedding"
    pt = tensor(op, "timesteps", timesteps)
    C.types(op, "timesteps", pt, C.ONLY_F32)
    C.contiguous_rows(op, "timesteps", pt)
    C.integer(op, "dim", dim, 1, _INT32_MAX)
    C.integer(op, "max_period", max_period, 1, _INT32_MAX)
    return make(ctx, op, lib.ggml_timestep_embedding, pt, dim, max_period)


def arange(ctx, start, stop, step):
    """f32 values start, start + step, ... below stop (ceil((stop - start) / step) of them).

    Args:
        ctx: the Context the result is made in.
        start: first value.
        stop: end (exclusive), > start.
        step: increment, > 0.
    """
    start, stop, step = float(start), float(stop), float(step)
    if not (stop > start and step > 0 and math.isfinite(stop - start)):
        raise C.ArgumentError(f"arange: need stop > start and step > 0, got start={start}, stop={stop}, step={step}")
    n = math.ceil((stop - start) / step)
    if n > 2**40:
        raise C.ArgumentError(f"arange: {n} elements is too many")
    return make(ctx, "arange", lib.ggml_arange, start, stop, step)
