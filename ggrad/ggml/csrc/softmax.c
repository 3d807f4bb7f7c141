/* softmax(x * scale + mask) over rows of f32, for GGML's CPU backend as a custom op (attention's
   probabilities, as GGML's soft_max_ext without ALiBi). GGML's CPU kernel makes six passes over each row,
   two of them scalar (the mask's addition and the maximum), ~2.3 ns an element on a transformer's 64-wide
   rows; this one three vector passes. The row arithmetic (softmax_width.h) is compiled once per vector
   width, each at its instruction set's. */

#include <string.h>

#include "ggml.h"
#include "simd.h"

#define WIDTH_BODY "softmax_width.h"
#include "each_width.h"

typedef void (*row_fn)(float *out, const float *x, const float *mask, int64_t n, float scale);
WIDTH_VARIANTS(softmax_row, row_fn, (float *out, const float *x, const float *mask, int64_t n, float scale),
               (out, x, mask, n, scale))

/* ggml_custom_op_t: dst = softmax(src[0] * scale + src[1]) along dimension 0, src[0] contiguous f32
   [n, rows, heads, batch], src[1] (absent: no mask) f32 with contiguous rows [n, >= rows, heads / k,
   batch / j], broadcast over dimensions 2 and 3 as soft_max_ext does; scale travels as the bits of a
   float in userdata. Threads take shares of the rows. */
void ggrad_softmax_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    uint32_t bits = (uint32_t)(uintptr_t)userdata;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    const struct ggml_tensor *a = dst->src[0], *mask = dst->src[1];
    const int64_t n = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    row_fn row = softmax_row_for(ggrad_isa);
    int64_t begin, end;
    share(ggml_nrows(dst), 1, ith, nth, &begin, &end);
    for (int64_t r = begin; r < end; r++) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const float *m = NULL;
        if (mask)
            m = (const float *)((const char *)mask->data + i1 * mask->nb[1] + (i2 % mask->ne[2]) * mask->nb[2] +
                                (i3 % mask->ne[3]) * mask->nb[3]);
        row((float *)dst->data + r * n, (const float *)a->data + r * n, m, n, scale);
    }
}
