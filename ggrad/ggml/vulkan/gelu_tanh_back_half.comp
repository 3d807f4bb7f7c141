#version 450
// The gradient of GELU's tanh form on float16 or bfloat16 (csrc/gelu.c's ggrad_gelu_tanh_back_half): the
// gradient g (source 0) at x (source 1), in f32, rounded once.
#extension GL_GOOGLE_include_directive : require
#include "half_elementwise.glsl"
#include "gelu.glsl"

float value(uint i) {
    const float g = widened(uint(src0[p.misalign[1] / 2 + i]));
    return gelu_backward(g, widened(uint(src1[p.misalign[2] / 2 + i])));
}
