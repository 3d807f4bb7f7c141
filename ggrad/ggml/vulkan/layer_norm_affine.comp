#version 450
// nn.LayerNorm's forward over each row (csrc/norm.c's ggrad_layer_norm_affine_f32): the core times w (source
// 1) plus b (source 2), rounded after the product and after the sum as the three nodes it replaces (precise:
// no fused multiply-add).
#extension GL_GOOGLE_include_directive : require

layout(std430, binding = 0) writeonly buffer Dst { float y[]; };
layout(std430, binding = 1) readonly buffer Src0 { float x[]; };
layout(std430, binding = 2) readonly buffer Weight { float w[]; };
layout(std430, binding = 3) readonly buffer Bias { float b[]; };

#include "rows.glsl"

void main() {
    const uint row = row_index();
    if (row >= p.rows) {
        return;
    }
    const uint at = p.misalign[1] / 4 + row * p.n, out_at = p.misalign[0] / 4 + row * p.n;
    const uint wa = p.misalign[2] / 4, ba = p.misalign[3] / 4;
    float mean, r;
    moments(at, mean, r);
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += gl_WorkGroupSize.x) {
        precise float core = (x[at + i] - mean) * r;
        precise float scaled = core * w[wa + i];
        y[out_at + i] = scaled + b[ba + i];
    }
}
