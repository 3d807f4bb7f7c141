/* Layer normalisation's core on rows of f32, for GGML's CPU backend as custom ops, one pass over a row's
   memory each way: y = (x - mean) / sqrt(var + eps), and its gradient
   dx = r (g - mean(g) - y mean(g y)) with r = 1 / sqrt(var + eps). GGML's norm has no backward, and its
   composition (rms_norm_back of the centred input, then centring's own backward) takes nine nodes. */

#include <math.h>
#include <string.h>

#include "ggml.h"
#include "simd.h"

/* mean and 1 / sqrt(var + eps) of a row of n floats */
ALWAYS_INLINE void moments(const float *x, int64_t n, float eps, float *mean, float *r) {
    vf s = {0};
    int64_t i = 0;
    for (; i + VL <= n; i += VL)
        s += *(const vf_unaligned *)(x + i);
    float m = hsum(s);
    for (; i < n; i++)
        m += x[i];
    m /= (float)n;
    vf q = {0};
    for (i = 0; i + VL <= n; i += VL) {
        vf d = *(const vf_unaligned *)(x + i) - m;
        q += d * d;
    }
    float var = hsum(q);
    for (; i < n; i++)
        var += (x[i] - m) * (x[i] - m);
    *mean = m;
    *r = 1.0f / sqrtf(var / (float)n + eps);
}

ALWAYS_INLINE void forward_body(float *y, const float *x, const float *unused, int64_t n, float eps) {
    (void)unused;
    float m, r;
    moments(x, n, eps, &m, &r);
    int64_t i = 0;
    for (; i + VL <= n; i += VL)
        *(vf_unaligned *)(y + i) = (*(const vf_unaligned *)(x + i) - m) * r;
    for (; i < n; i++)
        y[i] = (x[i] - m) * r;
}

ALWAYS_INLINE void backward_body(float *dx, const float *g, const float *x, int64_t n, float eps) {
    float m, r;
    moments(x, n, eps, &m, &r);
    vf sg = {0}, sgy = {0};
    int64_t i = 0;
    for (; i + VL <= n; i += VL) {
        vf gv = *(const vf_unaligned *)(g + i);
        sg += gv;
        sgy += gv * ((*(const vf_unaligned *)(x + i) - m) * r);
    }
    float mg = hsum(sg), mgy = hsum(sgy);
    for (; i < n; i++) {
        mg += g[i];
        mgy += g[i] * ((x[i] - m) * r);
    }
    mg /= (float)n;
    mgy /= (float)n;
    for (i = 0; i + VL <= n; i += VL) {
        vf y = (*(const vf_unaligned *)(x + i) - m) * r;
        *(vf_unaligned *)(dx + i) = (*(const vf_unaligned *)(g + i) - mg - y * mgy) * r;
    }
    for (; i < n; i++)
        dx[i] = (g[i] - mg - (x[i] - m) * r * mgy) * r;
}

typedef void (*row_fn)(float *out, const float *a, const float *b, int64_t n, float eps);

ISA_VARIANTS(forward, row_fn, (float *out, const float *a, const float *b, int64_t n, float eps),
             (out, a, b, n, eps))
ISA_VARIANTS(backward, row_fn, (float *out, const float *a, const float *b, int64_t n, float eps),
             (out, a, b, n, eps))

/* thread ith of nth takes its share of the rows; eps travels as the bits of a float in userdata */
static void run(row_fn fn, struct ggml_tensor *dst, const float *a, const float *b, void *userdata, int ith,
                int nth) {
    uint32_t bits = (uint32_t)(uintptr_t)userdata;
    float eps;
    memcpy(&eps, &bits, sizeof eps);
    const int64_t n = dst->ne[0], rows = ggml_nrows(dst);
    for (int64_t row = rows * ith / nth; row < rows * (ith + 1) / nth; row++)
        fn((float *)dst->data + row * n, a + row * n, b ? b + row * n : NULL, n, eps);
}

/* ggml_custom_op_t: dst = layer_norm's core of src[0] over dimension 0; contiguous f32 */
void ggrad_layer_norm_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    run(forward_for(ggrad_isa), dst, (const float *)dst->src[0]->data, NULL, userdata, ith, nth);
}

/* ggml_custom_op_t: dst = the gradient of layer_norm's core at src[1] given src[0] (the gradient first) */
void ggrad_layer_norm_back_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    run(backward_for(ggrad_isa), dst, (const float *)dst->src[0]->data, (const float *)dst->src[1]->data,
        userdata, ith, nth);
}
