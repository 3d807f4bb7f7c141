#version 450
// The gradient of layer norm's core over each row (csrc/norm.c's ggrad_layer_norm_back_f32) given g (source 0)
// at x (source 1): dx = r (g - mean(g) - y mean(g y)), y the core, r = 1 / sqrt(var + eps).
#extension GL_GOOGLE_include_directive : require

layout(std430, binding = 0) writeonly buffer Dst { float dx[]; };
layout(std430, binding = 1) readonly buffer Grad { float g[]; };
layout(std430, binding = 2) readonly buffer Src1 { float x[]; };

#include "rows.glsl"

void main() {
    const uint row = row_index();
    if (row >= p.rows) {
        return;
    }
    const uint ga = p.misalign[1] / 4 + row * p.n, at = p.misalign[2] / 4 + row * p.n;
    const uint out_at = p.misalign[0] / 4 + row * p.n;
    float mean, r;
    moments(at, mean, r);
    float sg = 0.0, sgy = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += gl_WorkGroupSize.x) {
        sg += g[ga + i];
        sgy += g[ga + i] * ((x[at + i] - mean) * r);
    }
    const float mg = group_sum(sg) / float(p.n), mgy = group_sum(sgy) / float(p.n);
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += gl_WorkGroupSize.x) {
        dx[out_at + i] = (g[ga + i] - mg - (x[at + i] - mean) * r * mgy) * r;
    }
}
