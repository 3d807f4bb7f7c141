/* GELU's tanh form and its gradient on f32, for GGML's CPU backend as custom ops, one pass each.

   gelu(x) = x sigmoid(z) with z = 2c (x + a x^3), c = sqrt(2/pi), a = 0.044715 (as 0.5 x (1 + tanh(z/2))),
   in f32 with a vectorized exp: GGML's own gelu looks x up in an f16 table (errors up to 4e-3), and its
   composition from f32 ops (unary.py) takes ~10 nodes forward and ~11 backward, each a pass over memory
   and most of them scalar (sigmoid). Results follow that composition: x is clamped to [-20, 20] inside
   the forward and what lies beyond is added back as d * step(d), d = x - clamp(x), so inf and nan come
   out as in PyTorch; the gradient is s (1 + h (1 - s)) with s = sigmoid(z), h = 2c x (1 + 3a x^2).
   The arithmetic (gelu_width.h) is compiled once per vector width, each at its instruction set's. */

#include <math.h>
#include <string.h>

#include "ggml.h"
#include "simd.h"

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_A 0.044715f
#define GELU_FLAT 20.0f

/* out[i] = f(a[i]) or f(a[i], b[i]) (b = a for the one-input f) for i in [begin, end) as PER_W(NAME), in
   vectors of W floats: whole vectors, then the tail through one zero-padded vector */
#define ELEMENTWISE(NAME, EXPR)                                                                           \
    ALWAYS_INLINE void PER_W(NAME)(float *out, const float *a, const float *b, int64_t begin, int64_t end) { \
        int64_t i = begin;                                                                                \
        for (; i + W <= end; i += W) {                                                                    \
            VF va = *(const VFU *)(a + i), vb = *(const VFU *)(b + i);                                    \
            (void)vb;                                                                                     \
            *(VFU *)(out + i) = EXPR;                                                                     \
        }                                                                                                 \
        if (i < end) {                                                                                    \
            float ta[W] = {0}, tb[W] = {0}, to[W];                                                        \
            memcpy(ta, a + i, (end - i) * sizeof(float));                                                 \
            memcpy(tb, b + i, (end - i) * sizeof(float));                                                 \
            VF va = *(const VFU *)ta, vb = *(const VFU *)tb;                                              \
            (void)vb;                                                                                     \
            *(VFU *)to = EXPR;                                                                            \
            memcpy(out + i, to, (end - i) * sizeof(float));                                               \
        }                                                                                                 \
    }

#define WIDTH_BODY "gelu_width.h"
#include "each_width.h"

FORWARD_BACKWARD_VARIANTS(range_fn, (float *out, const float *a, const float *b, int64_t begin, int64_t end),
                          (out, a, b, begin, end))

/* thread ith of nth takes its share of the elements, in whole vectors of any width */
static void run(range_fn fn, struct ggml_tensor *dst, const float *a, const float *b, int ith, int nth) {
    int64_t begin, end;
    share(ggml_nelements(dst), VMAX, ith, nth, &begin, &end);
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

/* The same on float16 or bfloat16 (dst's type, that of every source): each block of elements converted to
   f32, computed as above, rounded once to dst's type (GGML's conversions: round to nearest even, nan kept),
   as PyTorch computes GELU and its gradient on half tensors. */
enum { HALF_BLOCK = 512 };

static void to_f32(const struct ggml_tensor *t, int64_t begin, int64_t n, float *out) {
    if (t->type == GGML_TYPE_BF16)
        ggml_bf16_to_fp32_row((const ggml_bf16_t *)t->data + begin, out, n);
    else
        ggml_fp16_to_fp32_row((const ggml_fp16_t *)t->data + begin, out, n);
}

static void run_half(range_fn fn, struct ggml_tensor *dst, int ith, int nth) {
    const struct ggml_tensor *a = dst->src[0], *b = dst->src[1] ? dst->src[1] : dst->src[0];
    int64_t begin, end;
    share(ggml_nelements(dst), VMAX, ith, nth, &begin, &end);
    float fa[HALF_BLOCK], fb[HALF_BLOCK], out[HALF_BLOCK];
    for (int64_t i = begin; i < end; i += HALF_BLOCK) {
        int64_t n = end - i < HALF_BLOCK ? end - i : HALF_BLOCK;
        to_f32(a, i, n, fa);
        to_f32(b, i, n, fb);
        fn(out, fa, fb, 0, n);
        if (dst->type == GGML_TYPE_BF16)
            ggml_fp32_to_bf16_row_ref(out, (ggml_bf16_t *)dst->data + i, n);
        else
            ggml_fp32_to_fp16_row(out, (ggml_fp16_t *)dst->data + i, n);
    }
}

/* ggml_custom_op_t: dst = gelu_tanh(src[0]), contiguous f16 or bf16 */
void ggrad_gelu_tanh_half(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    run_half(forward_for(ggrad_isa), dst, ith, nth);
}

/* ggml_custom_op_t: dst = src[0] * gelu_tanh'(src[1]) (g, then x), contiguous f16 or bf16 */
void ggrad_gelu_tanh_back_half(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    run_half(backward_for(ggrad_isa), dst, ith, nth);
}
