#version 450
// Layer norm's core over each row (csrc/norm.c's ggrad_layer_norm_f32): y = (x - mean) / sqrt(var + eps).
#extension GL_GOOGLE_include_directive : require

layout(std430, binding = 0) writeonly buffer Dst { float y[]; };
layout(std430, binding = 1) readonly buffer Src0 { float x[]; };

#include "rows.glsl"

void main() {
    const uint row = row_index();
    if (row >= p.rows) {
        return;
    }
    const uint at = p.misalign[1] / 4 + row * p.n, out_at = p.misalign[0] / 4 + row * p.n;
    float mean, r;
    moments(at, mean, r);
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += gl_WorkGroupSize.x) {
        y[out_at + i] = (x[at + i] - mean) * r;
    }
}
