#version 450
// AdamW's step in place (csrc/adamw.c's ggrad_adamw_f32, its formula): the parameter (the node, a view of source
// 0) and the moments m and v (sources 2 and 3) updated from the gradient (source 1) and the 7 hyper-parameters
// (source 4) [alpha, beta1, beta2, eps, wd, beta1h, beta2h]; with source 5 (a GradScaler's check), nothing
// changes where it is nan. Launched as the elementwise shaders (vulkan_launch.c: elementwise).

layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Param { float w[]; };
layout(std430, binding = 2) readonly buffer Grad { float g[]; };
layout(std430, binding = 3) buffer Moment1 { float m[]; };
layout(std430, binding = 4) buffer Moment2 { float v[]; };
layout(std430, binding = 5) readonly buffer Hyper { float hp[]; };
layout(std430, binding = 6) readonly buffer Check { float check[]; };

layout(push_constant) uniform Push {
    uint misalign[11];
    uint n;
    uint sources;
} p;

void main() {
    if ((p.sources & (1u << 5)) != 0 && isnan(check[p.misalign[6] / 4])) {
        return;
    }
    const uint h = p.misalign[5] / 4;
    const float alpha = hp[h], beta1 = hp[h + 1], beta2 = hp[h + 2], eps = hp[h + 3], wd = hp[h + 4];
    const float beta1h = hp[h + 5], beta2h = hp[h + 6];
    const float keep = 1.0 - alpha * wd;
    const uint dw = p.misalign[0] / 4, dg = p.misalign[2] / 4, dm = p.misalign[3] / 4, dv = p.misalign[4] / 4;
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        const float gi = g[dg + i];
        const float mi = m[dm + i] * beta1 + gi * (1.0 - beta1);
        const float vi = v[dv + i] * beta2 + gi * gi * (1.0 - beta2);
        m[dm + i] = mi;
        v[dv + i] = vi;
        w[dw + i] = w[dw + i] * keep - alpha * (mi * beta1h) / (sqrt(vi * beta2h) + eps);
    }
}
