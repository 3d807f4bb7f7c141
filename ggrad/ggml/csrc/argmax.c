/* The index of each row's first maximum on f32, for GGML's CPU backend as a custom op, as PyTorch's argmax:
   the first of ties (GGML's argmax takes the last) and the first nan where a row holds one (GGML's skips
   them). The composition that gives those answers with GGML's ops takes 13 nodes (the row maximum, a mask
   of the maxima weighted from the left, a nan mask, the argmax of their sum), each a pass and a barrier of
   the CPU's threads; greedy decoding takes one per token. */

#include <stdint.h>

#include "ggml.h"
#include "simd.h"

/* ggml_custom_op_t: dst (i32 [rows]) = the first maximum's index in each row of src[0] (contiguous f32
   [n, rows, ...]), or its first nan's */
void ggrad_argmax_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    const struct ggml_tensor *x = dst->src[0];
    const int64_t n = x->ne[0];
    int32_t *out = (int32_t *)dst->data;
    int64_t begin, end;
    share(ggml_nrows(x), 1, ith, nth, &begin, &end);
    for (int64_t row = begin; row < end; row++) {
        const float *v = (const float *)x->data + row * n;
        int64_t best = 0;
        float max = v[0];
        for (int64_t i = 0; i < n; i++) {
            if (v[i] != v[i]) {   /* nan */
                best = i;
                break;
            }
            if (v[i] > max) {
                max = v[i];
                best = i;
            }
        }
        out[row] = (int32_t)best;
    }
}
