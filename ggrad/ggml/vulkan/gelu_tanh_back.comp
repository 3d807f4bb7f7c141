#version 450
// The gradient of GELU's tanh form (csrc/gelu.c's ggrad_gelu_tanh_back_f32): g s (1 + h (1 - s)) for the
// gradient g (source 0) at x (source 1), s = sigmoid(2c (x + a x^3)), h = 2c x (1 + 3a x^2).
#extension GL_GOOGLE_include_directive : require
#include "elementwise.glsl"

float value(uint i) {
    const float g = src0[p.misalign[1] / 4 + i];
    const float x = src1[p.misalign[2] / 4 + i];
    const float c2 = 2.0 * SQRT_2_OVER_PI;
    const float x2 = x * x;
    const float s = 1.0 / (1.0 + exp(-x * (x2 * (c2 * GELU_A) + c2)));
    const float h = x * (x2 * (3.0 * c2 * GELU_A) + c2);
    return g * (s * (h * (1.0 - s) + 1.0));
}
