/* GELU's arithmetic on vectors of W floats (gelu.c includes this once per width through each_width.h;
   simd.h names VF, VI, PER_W): sigmoid by exp_width.h's e^x, the forward and the gradient, and their loops
   over a range. */

#include "exp_width.h"

ALWAYS_INLINE VF PER_W(vsigmoid)(VF z) {
    return 1.0f / (1.0f + PER_W(vexp)(-z));
}

ALWAYS_INLINE VF PER_W(gelu_forward)(VF x) {
    const float c2 = 2.0f * SQRT_2_OVER_PI;
    VF inside = vselect(x < -GELU_FLAT, (VF){} - GELU_FLAT, x);
    inside = vselect(inside > GELU_FLAT, (VF){} + GELU_FLAT, inside);
    VF z = inside * (inside * inside * (c2 * GELU_A) + c2);
    VF beyond = x - inside;
    VF step = vselect(beyond > 0.0f, (VF){} + 1.0f, (VF){});
    return inside * PER_W(vsigmoid)(z) + beyond * step;
}

ALWAYS_INLINE VF PER_W(gelu_backward)(VF g, VF x) {
    const float c2 = 2.0f * SQRT_2_OVER_PI;
    VF x2 = x * x;
    VF s = PER_W(vsigmoid)(x * (x2 * (c2 * GELU_A) + c2));
    VF h = x * (x2 * (3.0f * c2 * GELU_A) + c2);
    return g * (s * (h * (1.0f - s) + 1.0f));
}

ELEMENTWISE(forward, PER_W(gelu_forward)(va))
ELEMENTWISE(backward, PER_W(gelu_backward)(va, vb))   /* a = g, b = x */
