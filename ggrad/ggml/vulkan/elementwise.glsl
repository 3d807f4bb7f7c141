// ggrad's elementwise shaders on f32: the node at binding 0, its sources at 1 and 2 (scripts/patch_ggml_vulkan.py
// binds them), contiguous; the push constants give each binding's misalignment in bytes, then the element count
// and which sources the node has, a bit each (csrc/vulkan_launch.c: ggrad_vk_launch_elementwise). Each
// invocation takes elements a grid's width apart.

layout(local_size_x = 256) in;

layout(std430, binding = 0) writeonly buffer Dst { float dst[]; };
layout(std430, binding = 1) readonly buffer Src0 { float src0[]; };
layout(std430, binding = 2) readonly buffer Src1 { float src1[]; };

layout(push_constant) uniform Push {
    uint misalign[11];
    uint n;
    uint sources;
} p;

float value(uint i);   // the element i of the result (each shader's own)

void main() {
    const uint d = p.misalign[0] / 4;
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        dst[d + i] = value(i);
    }
}
