/* ReLU and its gradient on f32, for GGML's CPU backend as custom ops, with PyTorch's values: a nan stays
   nan (GGML's relu gives 0) and its gradient passes, -0 stays -0, and the gradient is 0 wherever x <= 0,
   even where g is not finite. GGML's ops need seven nodes for the forward with nan carried and four for
   the gradient (each a pass over memory and a barrier of the CPU's threads); these take one each. */

#include <string.h>

#include "ggml.h"
#include "simd.h"

/* ggml_custom_op_t: dst = relu(src[0]); contiguous f32 */
void ggrad_relu_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    const float *x = (const float *)dst->src[0]->data;
    float *y = (float *)dst->data;
    int64_t begin, end;
    share(ggml_nelements(dst), VMAX, ith, nth, &begin, &end);
    for (int64_t i = begin; i < end; i++)
        y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

/* ggml_custom_op_t: dst = src[0] where src[1] > 0 or is nan, else 0 (the gradient first, then x); contiguous
   f32 of one shape */
void ggrad_relu_back_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    const float *restrict g = (const float *)dst->src[0]->data, *restrict x = (const float *)dst->src[1]->data;
    float *restrict out = (float *)dst->data;
    int64_t begin, end;
    share(ggml_nelements(dst), VMAX, ith, nth, &begin, &end);
    /* g's bits masked by x > 0 or nan (not x <= 0): GCC vectorizes this, where a select `x <= 0 ? 0 : g`
       stays a branch an element (half of them mispredicted on signs at random: ~7 ns an element) */
    for (int64_t i = begin; i < end; i++) {
        uint32_t bits;
        memcpy(&bits, g + i, sizeof bits);
        bits &= (uint32_t)0 - (uint32_t)!(x[i] <= 0.0f);
        memcpy(out + i, &bits, sizeof bits);
    }
}
