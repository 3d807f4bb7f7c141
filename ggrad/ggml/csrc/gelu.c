/* GELU's tanh form and its gradient on f32, for GGML's CPU backend as custom ops, one pass each.

   gelu(x) = x sigmoid(z) with z = 2c (x + a x^3), c = sqrt(2/pi), a = 0.044715 (as 0.5 x (1 + tanh(z/2))),
   in f32 with a vectorized exp: GGML's own gelu looks x up in an f16 table (errors up to 4e-3), and its
   composition from f32 ops (unary.py) takes ~10 nodes forward and ~11 backward, each a pass over memory
   and most of them scalar (sigmoid). Results follow that composition: x is clamped to [-20, 20] inside
   the forward and what lies beyond is added back as d * step(d), d = x - clamp(x), so inf and nan come
   out as in PyTorch; the gradient is s (1 + h (1 - s)) with s = sigmoid(z), h = 2c x (1 + 3a x^2). */

#include <math.h>
#include <string.h>

#include "ggml.h"
#include "simd.h"

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_A 0.044715f
#define GELU_FLAT 20.0f

/* e^x to about 2 ulp: x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor polynomial of degree 7, 2^n by
   the exponent bits. Beyond [-87.3, 88.7] it is 0 (where e^x is subnormal) or inf, so that sigmoid
   reaches 0 and 1 exactly as 1 / (1 + expf(-z)) does. */
ALWAYS_INLINE vf vexp(vf x_in) {
    vf x = vselect(x_in < -87.3f, (vf){} - 87.3f, x_in);
    x = vselect(x > 88.7f, (vf){} + 88.7f, x);
    const float shifter = 12582912.0f;   /* 1.5 * 2^23: adding it rounds to an integer */
    vf t = x * 1.4426950408889634f + shifter;
    vf n = t - shifter;
    vi ni = (vi)t - (vi)((vf){} + shifter);
    vf r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;   /* ln2 in two parts */
    vf p = 1.0f / 5040 + r * 0.0f;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n as two factors, so that n = 128 (x near 88.7) stays representable */
    vi half = ni >> 1;
    vf s1 = (vf)((half + 127) << 23), s2 = (vf)((ni - half + 127) << 23);
    vf e = p * s1 * s2;
    e = vselect(x_in < -87.3f, (vf){}, e);
    return vselect(x_in > 88.7f, (vf){} + __builtin_inff(), e);
}

ALWAYS_INLINE vf vsigmoid(vf z) {
    return 1.0f / (1.0f + vexp(-z));
}

ALWAYS_INLINE vf gelu_forward(vf x) {
    const float c2 = 2.0f * SQRT_2_OVER_PI;
    vf inside = vselect(x < -GELU_FLAT, (vf){} - GELU_FLAT, x);
    inside = vselect(inside > GELU_FLAT, (vf){} + GELU_FLAT, inside);
    vf z = inside * (inside * inside * (c2 * GELU_A) + c2);
    vf beyond = x - inside;
    vf step = vselect(beyond > 0.0f, (vf){} + 1.0f, (vf){});
    return inside * vsigmoid(z) + beyond * step;
}

ALWAYS_INLINE vf gelu_backward(vf g, vf x) {
    const float c2 = 2.0f * SQRT_2_OVER_PI;
    vf x2 = x * x;
    vf s = vsigmoid(x * (x2 * (c2 * GELU_A) + c2));
    vf h = x * (x2 * (3.0f * c2 * GELU_A) + c2);
    return g * (s * (h * (1.0f - s) + 1.0f));
}

/* out[i] = f(a[i]) or f(a[i], b[i]) (b = a for the one-input f) for i in [begin, end): whole vectors,
   then the tail through one zero-padded vector */
#define ELEMENTWISE(NAME, EXPR)                                                                           \
    ALWAYS_INLINE void NAME##_body(float *out, const float *a, const float *b, int64_t begin, int64_t end) { \
        int64_t i = begin;                                                                                \
        for (; i + VL <= end; i += VL) {                                                                  \
            vf va = *(const vf_unaligned *)(a + i), vb = *(const vf_unaligned *)(b + i);                  \
            (void)vb;                                                                                     \
            *(vf_unaligned *)(out + i) = EXPR;                                                            \
        }                                                                                                 \
        if (i < end) {                                                                                    \
            float ta[VL] = {0}, tb[VL] = {0}, to[VL];                                                     \
            memcpy(ta, a + i, (end - i) * sizeof(float));                                                 \
            memcpy(tb, b + i, (end - i) * sizeof(float));                                                 \
            vf va = *(const vf_unaligned *)ta, vb = *(const vf_unaligned *)tb;                            \
            (void)vb;                                                                                     \
            *(vf_unaligned *)to = EXPR;                                                                   \
            memcpy(out + i, to, (end - i) * sizeof(float));                                               \
        }                                                                                                 \
    }

typedef void (*range_fn)(float *out, const float *a, const float *b, int64_t begin, int64_t end);

ELEMENTWISE(forward, gelu_forward(va))
ELEMENTWISE(backward, gelu_backward(va, vb))   /* a = g, b = x */
ISA_VARIANTS(forward, range_fn, (float *out, const float *a, const float *b, int64_t begin, int64_t end),
             (out, a, b, begin, end))
ISA_VARIANTS(backward, range_fn, (float *out, const float *a, const float *b, int64_t begin, int64_t end),
             (out, a, b, begin, end))

/* thread ith of nth takes its share of the elements, in whole vectors */
static void run(range_fn fn, struct ggml_tensor *dst, const float *a, const float *b, int ith, int nth) {
    int64_t n = ggml_nelements(dst), vectors = (n + VL - 1) / VL;
    int64_t begin = vectors * ith / nth * VL, end = vectors * (ith + 1) / nth * VL;
    if (end > n)
        end = n;
    if (begin < end)
        fn((float *)dst->data, a, b, begin, end);
}

/* ggml_custom_op_t: dst = gelu_tanh(src[0]), all contiguous f32 */
void ggrad_gelu_tanh_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    const float *x = (const float *)dst->src[0]->data;
    run(forward_for(ggrad_isa), dst, x, x, ith, nth);
}

/* ggml_custom_op_t: dst = src[0] * gelu_tanh'(src[1]) (the gradient g, then x), all contiguous f32 */
void ggrad_gelu_tanh_back_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    run(backward_for(ggrad_isa), dst, (const float *)dst->src[0]->data, (const float *)dst->src[1]->data, ith,
        nth);
}
