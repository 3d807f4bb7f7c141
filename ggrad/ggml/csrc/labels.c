/* The labels of a classification loss from integer class indices, for GGML's CPU backend as a custom op:
   one row of `classes` floats per index, 1 at the index and 0 elsewhere, and all 0 where the index is
   ignore_index. Built from GGML's ops the same labels take a cast, a broadcast, a difference, an absolute
   value, a step and a mask: six nodes, each a pass and a barrier of the CPU's threads. */

#include <string.h>

#include "ggml.h"
#include "simd.h"

/* ggml_custom_op_t: dst f32 [classes, rows] from src[0] i32 [rows] (contiguous); ignore_index travels as
   the integer in userdata. Indices outside [0, classes) give zero rows (the loss checks them first). */
void ggrad_class_labels_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    const int64_t ignore = (int64_t)(intptr_t)userdata;
    const int64_t classes = dst->ne[0];
    const int32_t *index = (const int32_t *)dst->src[0]->data;
    int64_t begin, end;
    share(ggml_nrows(dst), 1, ith, nth, &begin, &end);
    for (int64_t row = begin; row < end; row++) {
        float *out = (float *)dst->data + row * classes;
        memset(out, 0, (size_t)classes * sizeof(float));
        const int64_t c = index[row];
        if (c != ignore && c >= 0 && c < classes)
            out[c] = 1.0f;
    }
}
