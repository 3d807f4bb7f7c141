#version 450
// The gradient of GELU's tanh form (csrc/gelu.c's ggrad_gelu_tanh_back_f32) for the gradient g (source 0) at
// x (source 1), on f32.
#extension GL_GOOGLE_include_directive : require
#include "elementwise.glsl"
#include "gelu.glsl"

float value(uint i) {
    return gelu_backward(src0[p.misalign[1] / 4 + i], src1[p.misalign[2] / 4 + i]);
}
