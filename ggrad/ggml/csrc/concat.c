/* Joins of f32 tensors with any strides into a contiguous one, for GGML's CPU backend as a custom op.

   GGML's CPU concat assigns element by element with index arithmetic (a join of attention heads'
   gradients ran at under 1 GB/s). Here each row of a part (its dimension 0) is one memcpy where its elements are adjacent; a
   transposed part (dimension 1 adjacent instead) is copied in bands of 16 rows, so that each cache line
   read serves 16 rows of the result. */

#include <stdint.h>
#include <string.h>

#include "ggml.h"
#include "simd.h"

#define BAND 16

/* dst's rows [r0, r1) (dims 1-3 flattened) that come from `part`, which sits at `offset` along `dim` */
static void copy_rows(struct ggml_tensor *dst, const struct ggml_tensor *part, int dim, int64_t offset, int64_t r0,
                      int64_t r1) {
    const int64_t n0 = part->ne[0], n1 = part->ne[1], n2 = part->ne[2];
    const size_t s0 = part->nb[0];
    int64_t i1 = r0 % n1, i2 = (r0 / n1) % n2, i3 = r0 / (n1 * n2);
    for (int64_t r = r0; r < r1;) {
        int64_t at[4] = {0, i1, i2, i3};
        at[dim] += offset;
        const char *src = (const char *)part->data + i1 * part->nb[1] + i2 * part->nb[2] + i3 * part->nb[3];
        char *out = (char *)dst->data + at[0] * dst->nb[0] + at[1] * dst->nb[1] + at[2] * dst->nb[2] +
                    at[3] * dst->nb[3];
        /* rows of the same i2, i3 from here: one at a time where elements are adjacent, else a band */
        int64_t rows = n1 - i1 < r1 - r ? n1 - i1 : r1 - r;
        if (s0 == sizeof(float)) {
            for (int64_t b = 0; b < rows; b++)
                memcpy(out + b * dst->nb[1], src + b * part->nb[1], n0 * sizeof(float));
        } else {
            for (int64_t b0 = 0; b0 < rows; b0 += BAND) {
                int64_t band = rows - b0 < BAND ? rows - b0 : BAND;
                for (int64_t i0 = 0; i0 < n0; i0++)
                    for (int64_t b = b0; b < b0 + band; b++)
                        ((float *)(out + b * dst->nb[1]))[i0] = *(const float *)(src + b * part->nb[1] + i0 * s0);
            }
        }
        r += rows;
        i1 += rows;
        if (i1 == n1) {
            i1 = 0;
            if (++i2 == n2) {
                i2 = 0;
                i3++;
            }
        }
    }
}

/* ggml_custom_op_t: dst = src[0] and src[1] joined along dimension (intptr_t)userdata; f32 */
void ggrad_concat_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    const int dim = (int)(intptr_t)userdata;
    const struct ggml_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t rows_a = a->ne[1] * a->ne[2] * a->ne[3], rows_b = b->ne[1] * b->ne[2] * b->ne[3];
    int64_t r0, r1;
    share(rows_a + rows_b, 1, ith, nth, &r0, &r1);
    if (r0 < rows_a)
        copy_rows(dst, a, dim, 0, r0, r1 < rows_a ? r1 : rows_a);
    if (r1 > rows_a)
        copy_rows(dst, b, dim, a->ne[dim], (r0 > rows_a ? r0 : rows_a) - rows_a, r1 - rows_a);
}
