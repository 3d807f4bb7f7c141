#version 450
// GELU's tanh form on float16 or bfloat16 (csrc/gelu.c's ggrad_gelu_tanh_half): in f32, rounded once.
#extension GL_GOOGLE_include_directive : require
#include "half_elementwise.glsl"
#include "gelu.glsl"

float value(uint i) {
    return gelu_forward(widened(uint(src0[p.misalign[1] / 2 + i])));
}
