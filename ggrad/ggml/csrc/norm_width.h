/* Layer normalisation's rows on vectors of W floats (norm.c includes this once per width through
   each_width.h; simd.h names VF, VFU, PER_W). */

/* mean and 1 / sqrt(var + eps) of a row of n floats */
ALWAYS_INLINE void PER_W(moments)(const float *x, int64_t n, float eps, float *mean, float *r) {
    VF s = {0};
    int64_t i = 0;
    for (; i + W <= n; i += W)
        s += *(const VFU *)(x + i);
    float m = hsum(s);
    for (; i < n; i++)
        m += x[i];
    m /= (float)n;
    VF q = {0};
    for (i = 0; i + W <= n; i += W) {
        VF d = *(const VFU *)(x + i) - m;
        q += d * d;
    }
    float var = hsum(q);
    for (; i < n; i++)
        var += (x[i] - m) * (x[i] - m);
    *mean = m;
    *r = 1.0f / sqrtf(var / (float)n + eps);
}

ALWAYS_INLINE void PER_W(forward)(float *y, const float *x, const float *unused, int64_t n, float eps) {
    (void)unused;
    float m, r;
    PER_W(moments)(x, n, eps, &m, &r);
    int64_t i = 0;
    for (; i + W <= n; i += W)
        *(VFU *)(y + i) = (*(const VFU *)(x + i) - m) * r;
    for (; i < n; i++)
        y[i] = (x[i] - m) * r;
}

ALWAYS_INLINE void PER_W(backward)(float *dx, const float *g, const float *x, int64_t n, float eps) {
    float m, r;
    PER_W(moments)(x, n, eps, &m, &r);
    VF sg = {0}, sgy = {0};
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        VF gv = *(const VFU *)(g + i);
        sg += gv;
        sgy += gv * ((*(const VFU *)(x + i) - m) * r);
    }
    float mg = hsum(sg), mgy = hsum(sgy);
    for (; i < n; i++) {
        mg += g[i];
        mgy += g[i] * ((x[i] - m) * r);
    }
    mg /= (float)n;
    mgy /= (float)n;
    for (i = 0; i + W <= n; i += W) {
        VF y = (*(const VFU *)(x + i) - m) * r;
        *(VFU *)(dx + i) = (*(const VFU *)(g + i) - mg - y * mgy) * r;
    }
    for (; i < n; i++)
        dx[i] = (g[i] - mg - (x[i] - m) * r * mgy) * r;
}
