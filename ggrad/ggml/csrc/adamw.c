/* AdamW's step on f32 tensors, for GGML's CPU backend as a custom op that writes the parameter and its
   moments in place, as GGML's opt_step_adamw does and with its formula, but in vectors: GGML's CPU kernel
   is scalar (a square root and a division an element: ~2.4 ns a parameter at one thread, more than the
   products of an MLP's weight gradient take). */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ggml.h"
#include "simd.h"

/* elements [begin, end) of w, m, v given g and p = [alpha, beta1, beta2, eps, wd, beta1h, beta2h]; a loop
   the compiler vectorizes (square roots included: the module is compiled with -fno-math-errno) */
ALWAYS_INLINE void step_body(float *restrict w, const float *restrict g, float *restrict m, float *restrict v,
                             const float *p, int64_t begin, int64_t end) {
    const float alpha = p[0], beta1 = p[1], beta2 = p[2], eps = p[3], wd = p[4], beta1h = p[5], beta2h = p[6];
    const float keep = 1.0f - alpha * wd;
    for (int64_t i = begin; i < end; i++) {
        m[i] = m[i] * beta1 + g[i] * (1.0f - beta1);
        v[i] = v[i] * beta2 + g[i] * g[i] * (1.0f - beta2);
        w[i] = w[i] * keep - alpha * (m[i] * beta1h) / (sqrtf(v[i] * beta2h) + eps);
    }
}

typedef void (*step_fn)(float *w, const float *g, float *m, float *v, const float *p, int64_t begin, int64_t end);

ISA_VARIANTS(step, step_fn, (float *w, const float *g, float *m, float *v, const float *p, int64_t begin, int64_t end),
             (w, g, m, v, p, begin, end))

/* whether the f32 at p is a nan (its bits: the module's flags may let the compiler assume no nan) */
static int is_nan_f32(const void *p) {
    uint32_t bits;
    memcpy(&bits, p, sizeof bits);
    return (bits & 0x7fffffffu) > 0x7f800000u;
}

/* ggml_custom_op_t, built by ggml_custom_inplace on the parameter: dst (a view of src[0]) and src[2], src[3]
   (the moments) are updated from src[1] (the gradient) and src[4] (the 7 hyper-parameters); contiguous f32.
   With src[5] (one f32: a GradScaler's check), a step whose check is nan changes nothing. */
void ggrad_adamw_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    if (dst->src[5] != NULL && is_nan_f32(dst->src[5]->data))
        return;
    int64_t begin, end;
    share(ggml_nelements(dst), VMAX, ith, nth, &begin, &end);
    if (begin < end)
        step_for(ggrad_isa)((float *)dst->data, (const float *)dst->src[1]->data, (float *)dst->src[2]->data,
                            (float *)dst->src[3]->data, (const float *)dst->src[4]->data, begin, end);
}
