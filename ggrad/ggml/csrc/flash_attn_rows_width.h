/* Flash attention's forward for few query rows (a decode step), on vectors of W floats: flash_attn_width.h
   includes it, once per width. Each (batch, head, query) row is one unit: its scores against the keys it
   sees, their maximum, e^(s - max) and sum, and the weighted sum of V's rows, all in one pass over the keys
   (no blocks to pack: a row reads each key once). Keys whose mask lies more than FA_SKIP_GAP below the row's
   largest mask value are skipped without reading K or V: e^(s - max) is exactly 0 for them in float32 for
   any score below FA_SKIP_GAP / 4 in magnitude, so the result is the tiled path's (up to rounding), while a
   static cache's unfilled slots (masked by -inf or nn's -1e30) cost nothing; their values never reach the
   result (the tiled path multiplies them by 0: a nan there would give nan). A row past FA_ROWS_MAX reads K
   and V once per row where the tiled path reads them once per block of rows: measured on 8 heads, rows are
   faster up to 8 (benchmarks/README.md). */

/* the f32 row j of K or V (head ihk, batch ibk): the operand's own memory where it is f32 and n a multiple
   of W, else converted into buf (padded with zeros to a multiple of W) */
ALWAYS_INLINE const float *PER_W(fa_key_row)(const struct fa_operand *t, int64_t j, int64_t ihk, int64_t ibk,
                                             int64_t n, float *buf) {
    if (t->type == GGML_TYPE_F32 && n % W == 0)
        return (const float *)fa_row(t, j, ihk, ibk);
    fa_load(buf, t, j, ihk, ibk, n, (n + W - 1) / W * W, 1.0f);
    return buf;
}

/* q . k over n floats (a multiple of W) */
ALWAYS_INLINE float PER_W(fa_dot)(const float *q, const float *k, int64_t n) {
    VF acc = *(const VFU *)q * *(const VFU *)k;
    for (int64_t t = W; t < n; t += W)
        acc += *(const VFU *)(q + t) * *(const VFU *)(k + t);
    return hsum(acc);
}

/* the largest of m[0, n) (-inf where n is 0); a nan is passed over */
ALWAYS_INLINE float PER_W(fa_row_max)(const float *m, int64_t n) {
    VF vmax = (VF){} - __builtin_inff();
    int64_t j = 0;
    for (; j + W <= n; j += W) {
        VF x = *(const VFU *)(m + j);
        vmax = vselect(x > vmax, x, vmax);
    }
    float top = vmax[0];
    for (int k = 1; k < W; k++)
        top = vmax[k] > top ? vmax[k] : top;
    for (; j < n; j++)
        top = m[j] > top ? m[j] : top;
    return top;
}

/* the keys [0, kend) that a row whose mask row is m (NULL: none) reads, into keep[], their count returned:
   those whose mask is within FA_SKIP_GAP of the row's largest (nan kept, it reaches the result); none where
   every key is masked by -inf */
ALWAYS_INLINE int64_t PER_W(fa_row_keys)(const float *m, int64_t kend, int32_t *keep) {
    int64_t n = 0;
    if (!m) {
        for (int64_t j = 0; j < kend; j++)
            keep[n++] = (int32_t)j;
        return n;
    }
    const float top = PER_W(fa_row_max)(m, kend);
    for (int64_t j = 0; j < kend; j++)   /* m - top: nan where both are -inf (then m's test skips it) */
        if (m[j] != -__builtin_inff() && !(m[j] - top <= -FA_SKIP_GAP))
            keep[n++] = (int32_t)j;
    return n;
}

/* acc[0, n) = sum over t < keys of p[t] v_t, v_t the f32 row keep[t] of V (head ihk, batch ibk), n a
   multiple of W: up to 4 vectors of acc in registers at a time */
ALWAYS_INLINE void PER_W(fa_weigh_values)(const struct fa_args *a, float *acc, int64_t n, const float *p,
                                          const int32_t *keep, int64_t keys, int64_t ihk, int64_t ibk,
                                          float *buf) {
    const int direct = a->v.type == GGML_TYPE_F32 && a->dv % W == 0;
    if (!direct) {   /* rows converted once each: accumulate in memory */
        memset(acc, 0, n * sizeof(float));
        for (int64_t t = 0; t < keys; t++) {
            const float *v = PER_W(fa_key_row)(&a->v, keep[t], ihk, ibk, a->dv, buf);
            const VF pt = (VF){} + p[t];
            for (int64_t c = 0; c < n; c += W)
                *(VFU *)(acc + c) += pt * *(const VFU *)(v + c);
        }
        return;
    }
    int64_t c = 0;
    for (; c + 4 * W <= n; c += 4 * W) {
        VF x0 = {}, x1 = {}, x2 = {}, x3 = {};
        for (int64_t t = 0; t < keys; t++) {
            const float *v = (const float *)fa_row(&a->v, keep[t], ihk, ibk) + c;
            const VF pt = (VF){} + p[t];
            x0 += pt * *(const VFU *)v;
            x1 += pt * *(const VFU *)(v + W);
            x2 += pt * *(const VFU *)(v + 2 * W);
            x3 += pt * *(const VFU *)(v + 3 * W);
        }
        *(VFU *)(acc + c) = x0;
        *(VFU *)(acc + c + W) = x1;
        *(VFU *)(acc + c + 2 * W) = x2;
        *(VFU *)(acc + c + 3 * W) = x3;
    }
    for (; c + 2 * W <= n; c += 2 * W) {
        VF x0 = {}, x1 = {};
        for (int64_t t = 0; t < keys; t++) {
            const float *v = (const float *)fa_row(&a->v, keep[t], ihk, ibk) + c;
            const VF pt = (VF){} + p[t];
            x0 += pt * *(const VFU *)v;
            x1 += pt * *(const VFU *)(v + W);
        }
        *(VFU *)(acc + c) = x0;
        *(VFU *)(acc + c + W) = x1;
    }
    for (; c < n; c += W) {
        VF x0 = {};
        for (int64_t t = 0; t < keys; t++)
            x0 += p[t] * *(const VFU *)((const float *)fa_row(&a->v, keep[t], ihk, ibk) + c);
        *(VFU *)(acc + c) = x0;
    }
}

/* row i's mask row (head ih, batch ib), or NULL */
ALWAYS_INLINE const float *PER_W(fa_mask_of)(const struct fa_args *a, int64_t i, int64_t ih, int64_t ib) {
    if (!a->mask.data)
        return NULL;
    return (const float *)fa_row(&a->mask, i, a->mask_heads == 1 ? 0 : ih, a->mask_batches == 1 ? 0 : ib);
}

/* O and L of query row i of head ih, batch ib over the keys keep[0, n) (fa_row_keys) with mask row m; w's
   qs holds one query row, s the scores (n rounded up to W), acc O's row, ks and vs converted rows */
ALWAYS_INLINE void PER_W(fa_forward_row)(const struct fa_args *a, const struct fa_buffers *w, int64_t ib, int64_t ih,
                                         int64_t i, const float *m, const int32_t *keep, int64_t n) {
    const int64_t ihk = ih / (a->hq / a->hk), ibk = ib / (a->b / a->bk);
    const int64_t dw = (a->d + W - 1) / W * W, dvw = (a->dv + W - 1) / W * W, np = (n + W - 1) / W * W;
    fa_load(w->qs, &a->q, i, ih, ib, a->d, dw, a->scale);
    for (int64_t t = 0; t < n; t++) {
        const float *k = PER_W(fa_key_row)(&a->k, keep[t], ihk, ibk, a->d, w->ks);
        w->s[t] = PER_W(fa_dot)(w->qs, k, dw) + (m ? m[keep[t]] : 0.0f);
    }
    for (int64_t t = n; t < np; t++)
        w->s[t] = -__builtin_inff();
    const float mx = PER_W(fa_max)(w->s, np);
    const float l = PER_W(fa_exp)(w->s, np, mx);
    PER_W(fa_weigh_values)(a, w->acc, dvw, w->s, keep, n, ihk, ibk, w->vs);
    const float inv = l == 0.0f ? 0.0f : 1.0f / l;   /* l 0: no key (O 0, L -inf); nan stays */
    float *out = fa_out_row(&a->out, i, ih, ib);
    for (int64_t c = 0; c < a->dv; c++)
        out[c] = w->acc[c] * inv;
    a->lse_out[(ib * a->hq + ih) * a->tq + i] = l == 0.0f ? -__builtin_inff() : mx + logf(l);
}

/* thread ith of nth: its share of the rows (b * hq * tq, in order), each whole */
ALWAYS_INLINE void PER_W(fa_forward_rows_thread)(const struct fa_args *a, int ith, int nth) {
    const int64_t rows = a->b * a->hq * a->tq;
    int64_t begin, end;
    share(rows, 1, ith, nth, &begin, &end);
    if (begin >= end)
        return;
    const int64_t dp = a->dp, dvp = a->dvp, tkp = fa_round(a->tk);
    float *memory = aligned_alloc(64, (size_t)(dp + dvp + dp + dvp + tkp) * sizeof(float)
                                          + (size_t)tkp * sizeof(int32_t));
    if (!memory)
        return;
    struct fa_buffers w = {0};
    w.qs = memory;
    w.acc = w.qs + dp;
    w.ks = w.acc + dvp;
    w.vs = w.ks + dp;
    w.s = w.vs + dvp;
    int32_t *keep = (int32_t *)(w.s + tkp);
    const float *keep_mask = NULL;   /* the mask row and key end that keep[0, n) was made for */
    int64_t keep_end = -1, n = 0;
    for (int64_t r = begin; r < end; r++) {
        const int64_t ib = r / (a->hq * a->tq), ih = r / a->tq % a->hq, i = r % a->tq;
        const float *m = PER_W(fa_mask_of)(a, i, ih, ib);
        const int64_t kend = fa_key_end(a, i);
        if (m != keep_mask || kend != keep_end) {   /* heads that share a mask row share its keys */
            n = PER_W(fa_row_keys)(m, kend, keep);
            keep_mask = m;
            keep_end = kend;
        }
        PER_W(fa_forward_row)(a, &w, ib, ih, i, m, keep, n);
    }
    free(memory);
}
