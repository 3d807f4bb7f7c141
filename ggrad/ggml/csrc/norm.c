/* Layer normalisation's core on rows of f32, for GGML's CPU backend as custom ops, one pass over a row's
   memory each way: y = (x - mean) / sqrt(var + eps), and its gradient
   dx = r (g - mean(g) - y mean(g y)) with r = 1 / sqrt(var + eps). GGML's norm has no backward, and its
   composition (rms_norm_back of the centred input, then centring's own backward) takes nine nodes.
   The row arithmetic (norm_width.h) is compiled once per vector width, each at its instruction set's. */

#include <math.h>
#include <string.h>

#include "ggml.h"
#include "simd.h"

#define WIDTH_BODY "norm_width.h"
#include "each_width.h"

FORWARD_BACKWARD_VARIANTS(row_fn, (float *out, const float *a, const float *b, int64_t n, float eps),
                          (out, a, b, n, eps))

/* thread ith of nth takes its share of the rows; eps travels as the bits of a float in userdata */
static void run(row_fn fn, struct ggml_tensor *dst, const float *a, const float *b, void *userdata, int ith,
                int nth) {
    uint32_t bits = (uint32_t)(uintptr_t)userdata;
    float eps;
    memcpy(&eps, &bits, sizeof eps);
    const int64_t n = dst->ne[0];
    int64_t begin, end;
    share(ggml_nrows(dst), 1, ith, nth, &begin, &end);
    for (int64_t row = begin; row < end; row++)
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

/* y = y * w + b over a row in two roundings, a product and then a sum, as the core's node followed by a
   mul and an add node give: compiled for the baseline instruction set, which has no fused multiply-add */
static void affine(float *y, const float *w, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float scaled = y[i] * w[i];
        y[i] = scaled + b[i];
    }
}

/* ggml_custom_op_t: dst = layer_norm's core of src[0] over dimension 0, times src[1] plus src[2] (f32 [n]
   each): nn.LayerNorm's forward in one node instead of three; contiguous f32 */
void ggrad_layer_norm_affine_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    uint32_t bits = (uint32_t)(uintptr_t)userdata;
    float eps;
    memcpy(&eps, &bits, sizeof eps);
    const row_fn fn = forward_for(ggrad_isa);
    const float *x = (const float *)dst->src[0]->data;
    const float *w = (const float *)dst->src[1]->data, *b = (const float *)dst->src[2]->data;
    const int64_t n = dst->ne[0];
    int64_t begin, end;
    share(ggml_nrows(dst), 1, ith, nth, &begin, &end);
    for (int64_t row = begin; row < end; row++) {
        float *y = (float *)dst->data + row * n;
        fn(y, x + row * n, NULL, n, eps);
        affine(y, w, b, n);
    }
}
