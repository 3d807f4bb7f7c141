/* Flash attention forward and backward on GGML's CPU backend, as custom ops: softmax(q k^T scale + mask) v
   without a T x T tensor, and its gradients from q, k, v, O, dO and the rows' logsumexp L.

   Forward (ggrad_flash_attn): a block of FA_BQ queries walks the key blocks in order, keeping each row's
   running maximum and sum of e^(s - max) and rescaling its accumulated output when the maximum grows (the
   online softmax); it writes O and L = max + log(sum). Backward (ggrad_flash_attn_back) recomputes the
   probabilities block by block from L, P = e^(s - L), with D = rowsum(dO O):
       dV = P^T dO,   dP = dO V^T,   dS = P (dP - D),   dK = scale dS^T Q,   dQ = scale dS K.
   Its units are of two kinds, both computed whole by one thread: a block of keys (its dK and dV, over every
   query that reads it, all heads of a grouped-query group) and a block of queries (its dQ and D). So no
   two threads write one output and no unit waits for another (GGML gives a custom op no barrier); the
   products of P and dP are taken twice, once per kind. Every output is summed in an order fixed by the
   shape alone: results do not depend on the thread count. Causal attention skips the blocks above the
   diagonal, and a thread takes query (or key) blocks in pairs from both ends, so that its share of a
   causal head's work is even.

   Operands: q [d, tq, hq, b], k [d, tk, hk, bk], v [dv, tk, hk, bk] of one type (f32, f16 or bf16) with
   contiguous rows, hq a multiple of hk (grouped-query attention: query head h reads kv head h / (hq/hk)),
   b of bk; an optional additive f32 mask [tk, >= tq, 1 or hq, 1 or b] with contiguous rows; the scale,
   causality (query i sees keys j <= i + offset) and the results' layout in userdata (kernels.py:
   _attention_bits): head-major (O [dv, tq, hq, b]; dQ, dK, dV shaped as q, k, v, one after the other) or
   token-major (O [dv, hq, tq, b]; dQ, dK, dV side by side in each row, [d, hq, 3, tq, b], the layout of the
   fused projection q, k and v are the heads of; then tq = tk, hq = hk, b = bk and d = dv). Products are
   f32 register tiles (flash_attn_width.h: 4 rows x 2 vectors, broadcasting one operand's elements), half
   operands converted to f32 as their blocks are packed. ggrad/ggml/cuda/flash_attn.cu is the CUDA twin. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flash_attn.h"
#include "half.h"
#include "ggml.h"
#include "simd.h"

static inline int64_t fa_min(int64_t a, int64_t b) {
    return a < b ? a : b;
}

static inline int64_t fa_max_i(int64_t a, int64_t b) {
    return a > b ? a : b;
}

static inline int64_t fa_round(int64_t n) {
    return (n + FA_PAD - 1) / FA_PAD * FA_PAD;
}

static inline int64_t fa_blocks(int64_t n, int64_t block) {
    return (n + block - 1) / block;
}

/* the keys before which query `i` (and every earlier one) sees all it sees */
static inline int64_t fa_key_end(const struct fa_args *a, int64_t i) {
    return a->causal ? fa_max_i(0, fa_min(a->tk, i + a->offset + 1)) : a->tk;
}

static inline float *fa_out_row(const struct fa_out *t, int64_t i1, int64_t i2, int64_t i3) {
    return t->data + i1 * t->s1 + i2 * t->s2 + i3 * t->s3;
}

static inline struct fa_out fa_out_of(float *data, int64_t s1, int64_t s2, int64_t s3) {
    struct fa_out o = {data, s1, s2, s3};
    return o;
}

static inline const char *fa_row(const struct fa_operand *t, int64_t i1, int64_t i2, int64_t i3) {
    return t->data + i1 * t->nb1 + i2 * t->nb2 + i3 * t->nb3;
}

/* out[0, n) = the row's n values times mul, as f32; out[n, padded) = 0 */
static void fa_load(float *out, const struct fa_operand *t, int64_t i1, int64_t i2, int64_t i3, int64_t n,
                    int64_t padded, float mul) {
    const char *p = fa_row(t, i1, i2, i3);
    if (t->type == GGML_TYPE_F32) {
        for (int64_t i = 0; i < n; i++)
            out[i] = ((const float *)p)[i] * mul;
    } else if (t->type == GGML_TYPE_F16) {
        for (int64_t i = 0; i < n; i++)
            out[i] = half_to_f32(((const uint16_t *)p)[i]) * mul;
    } else {
        for (int64_t i = 0; i < n; i++)
            out[i] = bf16_to_f32(((const uint16_t *)p)[i]) * mul;
    }
    for (int64_t i = n; i < padded; i++)
        out[i] = 0.0f;
}

/* rows [j0, j0 + nk) of t (n values each) as the columns of out [n][FA_BK], times mul, columns [nk, nkp)
   zero */
static void fa_load_keys_t(float *out, const struct fa_operand *t, int64_t j0, int64_t nk, int64_t nkp, int64_t i2,
                           int64_t i3, int64_t n, float mul) {
    float row[FA_PAD];
    for (int64_t j = 0; j < nk; j++) {
        const char *p = fa_row(t, j0 + j, i2, i3);
        for (int64_t d0 = 0; d0 < n; d0 += FA_PAD) {
            const int64_t m = fa_min(FA_PAD, n - d0);
            if (t->type == GGML_TYPE_F32) {
                for (int64_t i = 0; i < m; i++)
                    row[i] = ((const float *)p)[d0 + i];
            } else if (t->type == GGML_TYPE_F16) {
                for (int64_t i = 0; i < m; i++)
                    row[i] = half_to_f32(((const uint16_t *)p)[d0 + i]);
            } else {
                for (int64_t i = 0; i < m; i++)
                    row[i] = bf16_to_f32(((const uint16_t *)p)[d0 + i]);
            }
            for (int64_t i = 0; i < m; i++)
                out[(d0 + i) * FA_BK + j] = row[i] * mul;
        }
    }
    for (int64_t d = 0; d < n; d++)
        for (int64_t j = nk; j < nkp; j++)
            out[d * FA_BK + j] = 0.0f;
}

/* the mask's row i from key k0 added to row (nk keys); keys query i may not see (causal) and the padding
   [nk, nkp) set to -inf */
static void fa_mask_row(const struct fa_args *a, float *row, int64_t nk, int64_t nkp, int64_t i, int64_t k0,
                        int64_t ih, int64_t ib) {
    if (a->mask.data) {
        const float *m = (const float *)fa_row(&a->mask, i, a->mask_heads == 1 ? 0 : ih,
                                               a->mask_batches == 1 ? 0 : ib) + k0;
        for (int64_t j = 0; j < nk; j++)
            row[j] += m[j];
    }
    int64_t end = nk;
    if (a->causal)
        end = fa_max_i(0, fa_min(nk, i + a->offset - k0 + 1));
    for (int64_t j = end; j < nkp; j++)
        row[j] = -__builtin_inff();
}

/* one thread's work buffers, in one allocation (returned, for free), or NULL */
static void *fa_buffers_alloc(const struct fa_args *a, struct fa_buffers *w) {
    const int64_t dp = a->dp, dvp = a->dvp, widest = dp > dvp ? dp : dvp;
    const int64_t sizes[] = {FA_BQ * dp, FA_BQ * dvp, dp * FA_BK, FA_BK * dp, dvp * FA_BK, FA_BK * dvp,
                             FA_BQ * FA_BK, FA_BQ * FA_BK, (FA_BQ > FA_BK ? FA_BQ : FA_BK) * widest, FA_BK * dvp,
                             FA_BQ, FA_BQ, FA_BQ, FA_BQ};
    float **slots[] = {&w->qs, &w->dos, &w->kt, &w->ks, &w->vt, &w->vs, &w->s, &w->dp, &w->acc, &w->acc2,
                       &w->m, &w->l, &w->lse, &w->drow};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += fa_round(sizes[i]);
    float *memory = aligned_alloc(64, (size_t)total * sizeof(float));
    if (!memory)
        return NULL;
    float *at = memory;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *slots[i] = at;
        at += fa_round(sizes[i]);
    }
    return memory;
}

#define WIDTH_BODY "flash_attn_width.h"
#include "each_width.h"

typedef void (*thread_fn)(const struct fa_args *a, int ith, int nth);
WIDTH_VARIANTS(fa_forward_thread, thread_fn, (const struct fa_args *a, int ith, int nth), (a, ith, nth))
WIDTH_VARIANTS(fa_backward_thread, thread_fn, (const struct fa_args *a, int ith, int nth), (a, ith, nth))

static struct fa_operand fa_operand_of(const struct ggml_tensor *t) {
    struct fa_operand o = {NULL, 0, 0, 0, GGML_TYPE_F32};
    if (t) {
        o.data = (const char *)t->data;
        o.nb1 = (int64_t)t->nb[1];
        o.nb2 = (int64_t)t->nb[2];
        o.nb3 = (int64_t)t->nb[3];
        o.type = t->type;
    }
    return o;
}

/* the sizes, the operands q, k, v (and the mask, src[mask_src] where the node has it) and userdata's
   scale and causality (kernels.py: _attention_bits); returns userdata's layout bit (1: token-major) */
static int fa_args_of(struct fa_args *a, const struct ggml_tensor *dst, int mask_src, void *userdata) {
    const struct ggml_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[mask_src];
    memset(a, 0, sizeof *a);
    a->d = q->ne[0];
    a->tq = q->ne[1];
    a->hq = q->ne[2];
    a->b = q->ne[3];
    a->tk = k->ne[1];
    a->hk = k->ne[2];
    a->bk = k->ne[3];
    a->dv = v->ne[0];
    a->dp = fa_round(a->d);
    a->dvp = fa_round(a->dv);
    a->q = fa_operand_of(q);
    a->k = fa_operand_of(k);
    a->v = fa_operand_of(v);
    a->mask = fa_operand_of(mask);
    a->mask_heads = mask ? mask->ne[2] : 1;
    a->mask_batches = mask ? mask->ne[3] : 1;
    const uint64_t bits = (uint64_t)(uintptr_t)userdata;
    const uint32_t scale_bits = (uint32_t)bits;
    memcpy(&a->scale, &scale_bits, sizeof a->scale);
    a->causal = (int)((bits >> 32) & 1);
    a->offset = (int64_t)((bits >> 33) & (((uint64_t)1 << 30) - 1)) - ((int64_t)1 << 29);
    return (int)(bits >> 63);
}

/* ggml_custom_op_t: dst (f32, O [dv, tq, hq, b], or token-major [dv, hq, tq, b], then L [tq, hq, b],
   contiguous) from src q, k, v and an optional mask (src[3]) */
void ggrad_flash_attn(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    struct fa_args a;
    const int token_major = fa_args_of(&a, dst, 3, userdata);
    float *data = (float *)dst->data;
    a.out = token_major ? fa_out_of(data, a.hq * a.dv, a.dv, a.tq * a.hq * a.dv)
                        : fa_out_of(data, a.dv, a.tq * a.dv, a.hq * a.tq * a.dv);
    a.lse_out = data + a.dv * a.tq * a.hq * a.b;
    fa_forward_thread_for(ggrad_isa)(&a, ith, nth);
}

/* ggml_custom_op_t: dst (f32, dQ as q, dK as k, dV as v, or token-major the three side by side in each row
   [d, hq, 3, tq, b]; then D = rowsum(dO O) [tq, hq, b], contiguous) from src q, k, v, O (f32), dO (f32),
   L (f32 [tq, hq, b]) and an optional mask (src[6]) */
void ggrad_flash_attn_back(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    struct fa_args a;
    const int token_major = fa_args_of(&a, dst, 6, userdata);
    a.o = fa_operand_of(dst->src[3]);
    a.dout = fa_operand_of(dst->src[4]);
    a.lse = fa_operand_of(dst->src[5]);
    float *data = (float *)dst->data;
    if (token_major) {   /* kernels.flash_attn_back checked d = dv, tq = tk, hq = hk, b = bk */
        const int64_t width = a.hq * a.d, s1 = 3 * width, s3 = a.tq * s1;
        a.dq = fa_out_of(data, s1, a.d, s3);
        a.dk = fa_out_of(data + width, s1, a.d, s3);
        a.dv_out = fa_out_of(data + 2 * width, s1, a.d, s3);
        a.dsum = data + s3 * a.b;
    } else {
        const int64_t nq = a.d * a.tq * a.hq * a.b, nk = a.d * a.tk * a.hk * a.bk;
        a.dq = fa_out_of(data, a.d, a.tq * a.d, a.hq * a.tq * a.d);
        a.dk = fa_out_of(data + nq, a.d, a.tk * a.d, a.hk * a.tk * a.d);
        a.dv_out = fa_out_of(data + nq + nk, a.dv, a.tk * a.dv, a.hk * a.tk * a.dv);
        a.dsum = data + nq + nk + a.dv * a.tk * a.hk * a.bk;
    }
    fa_backward_thread_for(ggrad_isa)(&a, ith, nth);
}
