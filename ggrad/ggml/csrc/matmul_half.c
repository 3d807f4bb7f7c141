/* The CPU twin of ggrad's half-precision product (kernels.matmul_half): dst = b @ a^T in float32 for
   float16 or bfloat16 operands, batched over dims 2 and 3 with a broadcast over b's, as GGML's mul_mat.

   On CUDA the same node runs cuBLAS with float32 accumulation (ggrad/ggml/cuda/twins.cu); this one
   defines what the node computes, so that the CPU runs a graph lowered for CUDA and tests can check it.
   It is plain: each output is one thread's float32 sum over k in order, operands read with any strides.
   The result is float32, or the operands' type rounded once, with a half bias (src[2], [m]) added first. */

#include <stdint.h>
#include <string.h>

#include "ggml.h"
#include "half.h"

void ggrad_matmul_half(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    const struct ggml_tensor *a = dst->src[0], *b = dst->src[1], *bias = dst->src[2];
    float (*value)(uint16_t) = a->type == GGML_TYPE_F16 ? half_to_f32 : bf16_to_f32;
    const int64_t k = a->ne[0], m = a->ne[1], n = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t rows = n * b->ne[2] * b->ne[3];   /* dst's rows, split across the threads */
    for (int64_t row = ith; row < rows; row += nth) {
        const int64_t j = row % n, i2 = row / n % b->ne[2], i3 = row / n / b->ne[2];
        const char *brow = (const char *)b->data + j * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
        const char *abatch = (const char *)a->data + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
        char *out = (char *)dst->data + j * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t i = 0; i < m; i++) {
            const char *arow = abatch + i * a->nb[1];
            float sum = 0.0f;
            for (int64_t kk = 0; kk < k; kk++) {
                sum += value(*(const uint16_t *)(arow + kk * a->nb[0])) *
                       value(*(const uint16_t *)(brow + kk * b->nb[0]));
            }
            if (dst->type == GGML_TYPE_F32) {
                ((float *)out)[i] = sum;
                continue;
            }
            /* a half result: the half bias added in f32 (after the sum, as cuBLAS adds C), one rounding */
            if (bias)
                sum += value(((const uint16_t *)bias->data)[i]);
            if (dst->type == GGML_TYPE_BF16)
                ((ggml_bf16_t *)out)[i] = ggml_fp32_to_bf16(sum);
            else
                ((ggml_fp16_t *)out)[i] = ggml_fp32_to_fp16(sum);
        }
    }
}
