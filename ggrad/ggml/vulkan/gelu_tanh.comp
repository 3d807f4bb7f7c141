#version 450
// GELU's tanh form (csrc/gelu.c's ggrad_gelu_tanh_f32) on f32.
#extension GL_GOOGLE_include_directive : require
#include "elementwise.glsl"
#include "gelu.glsl"

float value(uint i) {
    return gelu_forward(src0[p.misalign[1] / 4 + i]);
}
