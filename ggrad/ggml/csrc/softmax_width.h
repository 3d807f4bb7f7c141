/* One row of a scaled, masked softmax on vectors of W floats (softmax.c includes this once per width
   through each_width.h; simd.h names VF, VI, VFU, PER_W). */

#include "exp_width.h"

/* out = softmax(x * scale + mask) over n floats (mask may be NULL): the scaled scores and their maximum in
   one pass, e^(v - max) and its sum in a second, the division in a third, all on the row in L1. The tail
   goes through one vector padded with -inf (e^-inf is 0). A nan gives a row of nan, as a row whose
   scores are all -inf does (e^(-inf + inf)), as in PyTorch. */
ALWAYS_INLINE void PER_W(softmax_row)(float *out, const float *x, const float *mask, int64_t n, float scale) {
    VF vmax = (VF){} - __builtin_inff();
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        VF v = *(const VFU *)(x + i) * scale;
        if (mask)
            v += *(const VFU *)(mask + i);
        *(VFU *)(out + i) = v;
        vmax = vselect(v > vmax, v, vmax);
    }
    float tail[W];
    for (int j = 0; j < W; j++) {
        tail[j] = -__builtin_inff();
        if (i + j < n)
            tail[j] = x[i + j] * scale + (mask ? mask[i + j] : 0.0f);
    }
    VF vt = *(const VFU *)tail;
    vmax = vselect(vt > vmax, vt, vmax);
    float m = vmax[0];
    for (int j = 1; j < W; j++)
        m = vmax[j] > m ? vmax[j] : m;
    VF sum = (VF){};
    for (int64_t k = 0; k + W <= n; k += W) {
        VF e = PER_W(vexp)(*(const VFU *)(out + k) - m);
        *(VFU *)(out + k) = e;
        sum += e;
    }
    VF et = PER_W(vexp)(vt - m);
    sum += i < n ? et : (VF){};
    const float inv = 1.0f / hsum(sum);
    for (int64_t k = 0; k + W <= n; k += W)
        *(VFU *)(out + k) = *(const VFU *)(out + k) * inv;
    for (int64_t k = i; k < n; k++)
        out[k] = et[k - i] * inv;
}
