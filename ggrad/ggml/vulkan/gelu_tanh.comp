#version 450
// GELU's tanh form (csrc/gelu.c's ggrad_gelu_tanh_f32): x sigmoid(2c (x + a x^3)), x clamped to [-20, 20]
// inside and what lies beyond added back where positive (inf and nan as PyTorch).
#extension GL_GOOGLE_include_directive : require
#include "elementwise.glsl"

float value(uint i) {
    const float x = src0[p.misalign[1] / 4 + i];
    const float c2 = 2.0 * SQRT_2_OVER_PI;
    // comparisons, not clamp(): a nan stays nan
    const float inside = x < -GELU_FLAT ? -GELU_FLAT : (x > GELU_FLAT ? GELU_FLAT : x);
    const float z = inside * (inside * inside * (c2 * GELU_A) + c2);
    const float beyond = x - inside;
    return inside / (1.0 + exp(-z)) + beyond * (beyond > 0.0 ? 1.0 : 0.0);
}
