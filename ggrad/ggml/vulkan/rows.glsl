// ggrad's row shaders on contiguous f32 (layer norm): one workgroup a row of the node, its invocations a
// grid's width apart along it; the push constants give each binding's misalignment in bytes, the row length,
// the rows and the custom op's userdata (layer norm's eps, as the bits of a float) (csrc/vulkan_launch.c:
// ggrad_vk_launch_rows).

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint misalign[11];
    uint n;
    uint rows;
    uint userdata;
} p;

shared float partial[256];

// the sum over the workgroup of each invocation's `value`, for every invocation
float group_sum(float value) {
    const uint t = gl_LocalInvocationID.x;
    partial[t] = value;
    barrier();
    for (uint half_width = 128; half_width > 0; half_width >>= 1) {
        if (t < half_width) {
            partial[t] += partial[t + half_width];
        }
        barrier();
    }
    const float total = partial[0];
    barrier();
    return total;
}

// this workgroup's row (workgroups beyond 65535 go on in the grid's second dimension)
uint row_index() {
    return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}

// the mean and 1 / sqrt(var + eps) of the row of x that starts at `at` (two passes, as csrc/norm_width.h)
void moments(uint at, out float mean, out float r) {
    float s = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += gl_WorkGroupSize.x) {
        s += x[at + i];
    }
    mean = group_sum(s) / float(p.n);
    float q = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += gl_WorkGroupSize.x) {
        const float d = x[at + i] - mean;
        q += d * d;
    }
    r = 1.0 / sqrt(group_sum(q) / float(p.n) + uintBitsToFloat(p.userdata));
}
