/* Flash attention's blocks on vectors of W floats (flash_attn.c includes this once per width through
   each_width.h; simd.h names VF, VFU, PER_W; flash_attn.c defines the loads and fa_* helpers used here). */

#include "exp_width.h"

/* C (+)= A B for C m x n (rows ldc apart), A m x k (element (r, t) at a[r ars + t aks]), B k x n (rows ldb
   apart), n a multiple of W: tiles of 4 rows x 4 (or 2, 1) vectors in registers, A's elements broadcast against B's
   vectors, so no sum across lanes; each element sums over t in order (after C's value where `accumulate`). */
ALWAYS_INLINE void PER_W(fa_gemm)(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t aks,
                                  const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate) {
    int64_t r = 0;
    for (; r + 4 <= m; r += 4) {
        const float *a0 = a + r * ars;
        float *c0 = c + r * ldc;
        int64_t col = 0;
        for (; col + 4 * W <= n; col += 4 * W) {
            VF x[4][4];
            for (int i = 0; i < 4; i++)
                for (int v = 0; v < 4; v++)
                    x[i][v] = accumulate ? (VF) * (const VFU *)(c0 + i * ldc + col + v * W) : (VF){};
            const float *bp = b + col, *ap = a0;
            for (int64_t t = 0; t < k; t++, bp += ldb, ap += aks) {
                VF b0 = *(const VFU *)bp, b1 = *(const VFU *)(bp + W), b2 = *(const VFU *)(bp + 2 * W),
                   b3 = *(const VFU *)(bp + 3 * W);
                for (int i = 0; i < 4; i++) {
                    const float s = ap[i * ars];
                    x[i][0] += s * b0;
                    x[i][1] += s * b1;
                    x[i][2] += s * b2;
                    x[i][3] += s * b3;
                }
            }
            for (int i = 0; i < 4; i++)
                for (int v = 0; v < 4; v++)
                    *(VFU *)(c0 + i * ldc + col + v * W) = x[i][v];
        }
        for (; col + 2 * W <= n; col += 2 * W) {
            VF x[4][2];
            for (int i = 0; i < 4; i++)
                for (int v = 0; v < 2; v++)
                    x[i][v] = accumulate ? (VF) * (const VFU *)(c0 + i * ldc + col + v * W) : (VF){};
            const float *bp = b + col, *ap = a0;
            for (int64_t t = 0; t < k; t++, bp += ldb, ap += aks) {
                VF b0 = *(const VFU *)bp, b1 = *(const VFU *)(bp + W);
                for (int i = 0; i < 4; i++) {
                    const float s = ap[i * ars];
                    x[i][0] += s * b0;
                    x[i][1] += s * b1;
                }
            }
            for (int i = 0; i < 4; i++)
                for (int v = 0; v < 2; v++)
                    *(VFU *)(c0 + i * ldc + col + v * W) = x[i][v];
        }
        for (; col < n; col += W) {
            VF x[4];
            for (int i = 0; i < 4; i++)
                x[i] = accumulate ? (VF) * (const VFU *)(c0 + i * ldc + col) : (VF){};
            const float *bp = b + col, *ap = a0;
            for (int64_t t = 0; t < k; t++, bp += ldb, ap += aks) {
                VF b0 = *(const VFU *)bp;
                for (int i = 0; i < 4; i++)
                    x[i] += ap[i * ars] * b0;
            }
            for (int i = 0; i < 4; i++)
                *(VFU *)(c0 + i * ldc + col) = x[i];
        }
    }
    for (; r < m; r++) {
        const float *a0 = a + r * ars;
        float *c0 = c + r * ldc;
        for (int64_t col = 0; col < n; col += W) {
            VF x = accumulate ? (VF) * (const VFU *)(c0 + col) : (VF){};
            const float *bp = b + col, *ap = a0;
            for (int64_t t = 0; t < k; t++, bp += ldb, ap += aks)
                x += *ap * *(const VFU *)bp;
            *(VFU *)(c0 + col) = x;
        }
    }
}

/* the largest of n floats (n a multiple of W); a nan is passed over (it reaches the row through e^x) */
ALWAYS_INLINE float PER_W(fa_max)(const float *s, int64_t n) {
    VF vmax = (VF){} - __builtin_inff();
    for (int64_t j = 0; j < n; j += W) {
        VF v = *(const VFU *)(s + j);
        vmax = vselect(v > vmax, v, vmax);
    }
    float m = vmax[0];
    for (int j = 1; j < W; j++)
        m = vmax[j] > m ? vmax[j] : m;
    return m;
}

/* s[j] = e^(s[j] - shift) for j < n (a multiple of W), returning their sum; shift -inf (no key in the row):
   zeros */
ALWAYS_INLINE float PER_W(fa_exp)(float *s, int64_t n, float shift) {
    if (shift == -__builtin_inff()) {
        memset(s, 0, n * sizeof(float));
        return 0.0f;
    }
    VF sum = (VF){};
    for (int64_t j = 0; j < n; j += W) {
        VF e = PER_W(vexp)(*(const VFU *)(s + j) - shift);
        *(VFU *)(s + j) = e;
        sum += e;
    }
    return hsum(sum);
}

/* rows of S (scaled scores of the block [q0, q0 + nq) x [k0, k0 + nk)) made into the probabilities
   e^(s + mask - shift[i]): the mask added, keys a row may not see (causal) and the block's padding -inf */
ALWAYS_INLINE void PER_W(fa_probabilities)(const struct fa_args *a, float *s, int64_t nq, int64_t nk, int64_t nkp,
                                           int64_t q0, int64_t k0, int64_t ih, int64_t ib, const float *shift) {
    for (int64_t i = 0; i < nq; i++) {
        float *row = s + i * FA_BK;
        fa_mask_row(a, row, nk, nkp, q0 + i, k0, ih, ib);
        PER_W(fa_exp)(row, nkp, shift[i]);
    }
}

/* O and L of queries [q0, q0 + nq) of head ih, batch ib: key blocks in order, each row's running maximum m
   and sum l of e^(s - m), O's accumulator rescaled when m grows (the online softmax) */
ALWAYS_INLINE void PER_W(fa_forward_block)(const struct fa_args *a, const struct fa_buffers *w, int64_t ib,
                                           int64_t ih, int64_t q0) {
    const int64_t nq = fa_min(FA_BQ, a->tq - q0), dp = a->dp, dvp = a->dvp;
    const int64_t ihk = ih / (a->hq / a->hk), ibk = ib / (a->b / a->bk);
    for (int64_t i = 0; i < nq; i++) {
        fa_load(w->qs + i * dp, &a->q, q0 + i, ih, ib, a->d, dp, a->scale);
        w->m[i] = -__builtin_inff();
        w->l[i] = 0.0f;
    }
    memset(w->acc, 0, nq * dvp * sizeof(float));
    const int64_t kend = fa_key_end(a, q0 + nq - 1);
    for (int64_t k0 = 0; k0 < kend; k0 += FA_BK) {
        const int64_t nk = fa_min(FA_BK, kend - k0), nkp = fa_round(nk);
        fa_load_keys_t(w->kt, &a->k, k0, nk, nkp, ihk, ibk, a->d, 1.0f);
        for (int64_t j = 0; j < nk; j++)
            fa_load(w->vs + j * dvp, &a->v, k0 + j, ihk, ibk, a->dv, dvp, 1.0f);
        PER_W(fa_gemm)(nq, nkp, a->d, w->qs, dp, 1, w->kt, FA_BK, w->s, FA_BK, 0);
        for (int64_t i = 0; i < nq; i++) {
            float *row = w->s + i * FA_BK;
            fa_mask_row(a, row, nk, nkp, q0 + i, k0, ih, ib);
            const float mx = PER_W(fa_max)(row, nkp), m = w->m[i];
            const float mnew = mx > m ? mx : m;
            const float sum = PER_W(fa_exp)(row, nkp, mnew);
            if (mnew == -__builtin_inff())
                continue;   /* no key seen yet: O's row and l stay 0 */
            const float alpha = expf(m - mnew);   /* 0 where m was -inf */
            if (alpha != 1.0f) {
                float *o = w->acc + i * dvp;
                for (int64_t t = 0; t < dvp; t += W)
                    *(VFU *)(o + t) = *(const VFU *)(o + t) * alpha;
            }
            w->l[i] = w->l[i] * alpha + sum;
            w->m[i] = mnew;
        }
        PER_W(fa_gemm)(nq, dvp, nk, w->s, FA_BK, 1, w->vs, dvp, w->acc, dvp, 1);
    }
    for (int64_t i = 0; i < nq; i++) {
        const float l = w->l[i], inv = l == 0.0f ? 0.0f : 1.0f / l;   /* l 0: no key (O 0, L -inf); nan stays */
        float *out = fa_out_row(&a->out, q0 + i, ih, ib);
        const float *o = w->acc + i * dvp;
        for (int64_t t = 0; t < a->dv; t++)
            out[t] = o[t] * inv;
        a->lse_out[(ib * a->hq + ih) * a->tq + q0 + i] = l == 0.0f ? -__builtin_inff() : w->m[i] + logf(l);
    }
}

/* the rows of queries [q0, q0 + nq) the backward reads: q scaled, dO, L and D = rowsum(dO O) */
ALWAYS_INLINE void PER_W(fa_load_queries)(const struct fa_args *a, const struct fa_buffers *w, int64_t ib, int64_t ih,
                                          int64_t q0, int64_t nq) {
    for (int64_t i = 0; i < nq; i++) {
        fa_load(w->qs + i * a->dp, &a->q, q0 + i, ih, ib, a->d, a->dp, a->scale);
        fa_load(w->dos + i * a->dvp, &a->dout, q0 + i, ih, ib, a->dv, a->dvp, 1.0f);
        w->lse[i] = *(const float *)(a->lse.data + (q0 + i) * sizeof(float) + ih * a->lse.nb1 + ib * a->lse.nb2);
        const float *o = (const float *)(a->o.data + (q0 + i) * a->o.nb1 + ih * a->o.nb2 + ib * a->o.nb3);
        const float *g = w->dos + i * a->dvp;
        float dsum = 0.0f;
        for (int64_t t = 0; t < a->dv; t++)
            dsum += g[t] * o[t];
        w->drow[i] = dsum;
    }
}

/* dS = P (dP - D) in place in dP, for nq rows of nkp */
ALWAYS_INLINE void PER_W(fa_score_grads)(const struct fa_buffers *w, int64_t nq, int64_t nkp) {
    for (int64_t i = 0; i < nq; i++) {
        const float *p = w->s + i * FA_BK;
        float *g = w->dp + i * FA_BK;
        const float dsum = w->drow[i];
        for (int64_t j = 0; j < nkp; j += W)
            *(VFU *)(g + j) = *(const VFU *)(p + j) * (*(const VFU *)(g + j) - dsum);
    }
}

/* dK and dV of keys [k0, k0 + FA_BK) of kv head ihk, batch ibk: every query of the heads (and batches) that
   read them, block by block, P recomputed from L */
ALWAYS_INLINE void PER_W(fa_dkdv_block)(const struct fa_args *a, const struct fa_buffers *w, int64_t ibk, int64_t ihk,
                                        int64_t k0) {
    const int64_t nk = fa_min(FA_BK, a->tk - k0), nkp = fa_round(nk), dp = a->dp, dvp = a->dvp;
    const int64_t groups = a->hq / a->hk, repeats = a->b / a->bk;
    fa_load_keys_t(w->kt, &a->k, k0, nk, nkp, ihk, ibk, a->d, 1.0f);
    fa_load_keys_t(w->vt, &a->v, k0, nk, nkp, ihk, ibk, a->dv, 1.0f);
    memset(w->acc, 0, nk * dp * sizeof(float));
    memset(w->acc2, 0, nk * dvp * sizeof(float));
    const int64_t first = a->causal ? fa_max_i(0, k0 - a->offset) / FA_BQ * FA_BQ : 0;
    for (int64_t r = 0; r < repeats; r++) {
        for (int64_t g = 0; g < groups; g++) {
            const int64_t ib = ibk * repeats + r, ih = ihk * groups + g;
            for (int64_t q0 = first; q0 < a->tq; q0 += FA_BQ) {
                const int64_t nq = fa_min(FA_BQ, a->tq - q0);
                PER_W(fa_load_queries)(a, w, ib, ih, q0, nq);
                PER_W(fa_gemm)(nq, nkp, a->d, w->qs, dp, 1, w->kt, FA_BK, w->s, FA_BK, 0);
                PER_W(fa_probabilities)(a, w->s, nq, nk, nkp, q0, k0, ih, ib, w->lse);
                PER_W(fa_gemm)(nk, dvp, nq, w->s, 1, FA_BK, w->dos, dvp, w->acc2, dvp, 1);   /* dV += P^T dO */
                PER_W(fa_gemm)(nq, nkp, a->dv, w->dos, dvp, 1, w->vt, FA_BK, w->dp, FA_BK, 0);   /* dP = dO V^T */
                PER_W(fa_score_grads)(w, nq, nkp);
                PER_W(fa_gemm)(nk, dp, nq, w->dp, 1, FA_BK, w->qs, dp, w->acc, dp, 1);   /* dK += dS^T (q s) */
            }
        }
    }
    for (int64_t j = 0; j < nk; j++) {
        memcpy(fa_out_row(&a->dk, k0 + j, ihk, ibk), w->acc + j * dp, a->d * sizeof(float));
        memcpy(fa_out_row(&a->dv_out, k0 + j, ihk, ibk), w->acc2 + j * dvp, a->dv * sizeof(float));
    }
}

/* dQ (and D) of queries [q0, q0 + FA_BQ) of head ih, batch ib: the key blocks it sees, P recomputed */
ALWAYS_INLINE void PER_W(fa_dq_block)(const struct fa_args *a, const struct fa_buffers *w, int64_t ib, int64_t ih,
                                      int64_t q0) {
    const int64_t nq = fa_min(FA_BQ, a->tq - q0), dp = a->dp;
    const int64_t ihk = ih / (a->hq / a->hk), ibk = ib / (a->b / a->bk);
    PER_W(fa_load_queries)(a, w, ib, ih, q0, nq);
    memset(w->acc, 0, nq * dp * sizeof(float));
    const int64_t kend = fa_key_end(a, q0 + nq - 1);
    for (int64_t k0 = 0; k0 < kend; k0 += FA_BK) {
        const int64_t nk = fa_min(FA_BK, kend - k0), nkp = fa_round(nk);
        fa_load_keys_t(w->kt, &a->k, k0, nk, nkp, ihk, ibk, a->d, 1.0f);
        fa_load_keys_t(w->vt, &a->v, k0, nk, nkp, ihk, ibk, a->dv, 1.0f);
        for (int64_t j = 0; j < nk; j++)
            fa_load(w->ks + j * dp, &a->k, k0 + j, ihk, ibk, a->d, dp, a->scale);
        PER_W(fa_gemm)(nq, nkp, a->d, w->qs, dp, 1, w->kt, FA_BK, w->s, FA_BK, 0);
        PER_W(fa_probabilities)(a, w->s, nq, nk, nkp, q0, k0, ih, ib, w->lse);
        PER_W(fa_gemm)(nq, nkp, a->dv, w->dos, a->dvp, 1, w->vt, FA_BK, w->dp, FA_BK, 0);   /* dP = dO V^T */
        PER_W(fa_score_grads)(w, nq, nkp);
        PER_W(fa_gemm)(nq, dp, nk, w->dp, FA_BK, 1, w->ks, dp, w->acc, dp, 1);   /* dQ += dS (k s) */
    }
    for (int64_t i = 0; i < nq; i++) {
        memcpy(fa_out_row(&a->dq, q0 + i, ih, ib), w->acc + i * dp, a->d * sizeof(float));
        a->dsum[(ib * a->hq + ih) * a->tq + q0 + i] = w->drow[i];
    }
}

#include "flash_attn_rows_width.h"

/* thread ith of nth: its share of the forward's blocks (pairs of query blocks, see fa_unit), or of its rows
   where they are few (flash_attn_rows_width.h) */
ALWAYS_INLINE void PER_W(fa_forward_thread)(const struct fa_args *a, int ith, int nth) {
    if (a->tq <= FA_ROWS_MAX) {
        PER_W(fa_forward_rows_thread)(a, ith, nth);
        return;
    }
    struct fa_buffers w;
    void *memory = fa_buffers_alloc(a, &w);
    if (!memory)
        return;
    const int64_t blocks = fa_blocks(a->tq, FA_BQ), pairs = (blocks + 1) / 2, units = a->b * a->hq * pairs;
    for (int64_t u = ith; u < units; u += nth) {
        const int64_t ib = u / (a->hq * pairs), ih = u / pairs % a->hq, p = u % pairs;
        PER_W(fa_forward_block)(a, &w, ib, ih, p * FA_BQ);
        if (blocks - 1 - p != p)
            PER_W(fa_forward_block)(a, &w, ib, ih, (blocks - 1 - p) * FA_BQ);
    }
    free(memory);
}

/* thread ith of nth: its share of the backward's units, the key blocks' (dK, dV) and then the query
   blocks' (dQ), in pairs of blocks as the forward's */
ALWAYS_INLINE void PER_W(fa_backward_thread)(const struct fa_args *a, int ith, int nth) {
    struct fa_buffers w;
    void *memory = fa_buffers_alloc(a, &w);
    if (!memory)
        return;
    const int64_t kblocks = fa_blocks(a->tk, FA_BK), kpairs = (kblocks + 1) / 2;
    const int64_t qblocks = fa_blocks(a->tq, FA_BQ), qpairs = (qblocks + 1) / 2;
    const int64_t kunits = a->bk * a->hk * kpairs, units = kunits + a->b * a->hq * qpairs;
    for (int64_t u = ith; u < units; u += nth) {
        if (u < kunits) {
            const int64_t ib = u / (a->hk * kpairs), ih = u / kpairs % a->hk, p = u % kpairs;
            PER_W(fa_dkdv_block)(a, &w, ib, ih, p * FA_BK);
            if (kblocks - 1 - p != p)
                PER_W(fa_dkdv_block)(a, &w, ib, ih, (kblocks - 1 - p) * FA_BK);
        } else {
            const int64_t v = u - kunits, ib = v / (a->hq * qpairs), ih = v / qpairs % a->hq, p = v % qpairs;
            PER_W(fa_dq_block)(a, &w, ib, ih, p * FA_BQ);
            if (qblocks - 1 - p != p)
                PER_W(fa_dq_block)(a, &w, ib, ih, (qblocks - 1 - p) * FA_BQ);
        }
    }
    free(memory);
}
