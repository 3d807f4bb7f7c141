/* A GradScaler's check over several gradients at once, for GGML's CPU backend as a custom op: whether any
   element of its f32 sources is an inf or a nan. Composed of GGML's ops it takes three nodes a gradient (a
   product with zeros, its sum, an add to the total): ~300 small launches of a GPU step for a 100-parameter
   model, where this takes one node for up to nine (GGML_MAX_SRC - 1) and CUDA's twin one launch. */

#include <math.h>
#include <stdint.h>

#include "ggml.h"
#include "simd.h"

/* whether any of x[0..n) is an inf or a nan: its exponent bits all set (an integer test the compiler vectorizes) */
static int any_nonfinite(const float *x, int64_t n) {
    const uint32_t *bits = (const uint32_t *)x;
    uint32_t found = 0;
    for (int64_t i = 0; i < n; i++)
        found |= (bits[i] & 0x7f800000u) == 0x7f800000u;
    return found != 0;
}

/* ggml_custom_op_t: dst (f32 [slots], slots >= the threads GGML runs it on) gets nan in thread ith's slot where
   its share of the sources' elements holds an inf or a nan, else 0 (and thread 0 zeroes the slots no thread
   has): the sum of dst is nan exactly where one source element is not finite. Sources contiguous f32. */
void ggrad_nonfinite_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    float *slots = (float *)dst->data;
    int found = 0;
    for (int s = 0; s < GGML_MAX_SRC && dst->src[s] != NULL; s++) {
        const struct ggml_tensor *x = dst->src[s];
        int64_t begin, end;
        share(ggml_nelements(x), VMAX, ith, nth, &begin, &end);
        if (begin < end && any_nonfinite((const float *)x->data + begin, end - begin))
            found = 1;
    }
    slots[ith] = found ? NAN : 0.0f;
    if (ith == 0)
        for (int64_t i = nth; i < ggml_nelements(dst); i++)
            slots[i] = 0.0f;
}
