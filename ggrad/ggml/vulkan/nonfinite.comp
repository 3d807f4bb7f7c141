#version 450
// A GradScaler's check of up to nine gradients (csrc/nonfinite.c's ggrad_nonfinite_f32): workgroup w writes
// slot w of the node nan where an element its invocations read is an inf or a nan (its exponent bits all set),
// else 0, so the slots' sum is nan exactly where one is. One workgroup a slot, each reading elements a grid's
// width apart in every source; the sources' element counts come in the push constants
// (vulkan_launch.c: nonfinite).

layout(local_size_x = 256) in;

layout(std430, binding = 0) writeonly buffer Slots { float slots[]; };
layout(std430, binding = 1) readonly buffer S0 { uint s0[]; };
layout(std430, binding = 2) readonly buffer S1 { uint s1[]; };
layout(std430, binding = 3) readonly buffer S2 { uint s2[]; };
layout(std430, binding = 4) readonly buffer S3 { uint s3[]; };
layout(std430, binding = 5) readonly buffer S4 { uint s4[]; };
layout(std430, binding = 6) readonly buffer S5 { uint s5[]; };
layout(std430, binding = 7) readonly buffer S6 { uint s6[]; };
layout(std430, binding = 8) readonly buffer S7 { uint s7[]; };
layout(std430, binding = 9) readonly buffer S8 { uint s8[]; };

layout(push_constant) uniform Push {
    uint misalign[11];
    uint n[9];
} p;

shared uint found_any;

bool nonfinite(uint bits) {
    return (bits & 0x7f800000u) == 0x7f800000u;
}

// whether source `s` holds an inf or a nan among the elements of this invocation
#define SCAN(s, data)                                                   \
    for (uint i = first; i < p.n[s]; i += stride) {                     \
        found = found || nonfinite(data[p.misalign[s + 1] / 4 + i]);    \
    }

void main() {
    if (gl_LocalInvocationID.x == 0) {
        found_any = 0;
    }
    barrier();
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    const uint first = gl_GlobalInvocationID.x;
    bool found = false;
    SCAN(0, s0) SCAN(1, s1) SCAN(2, s2) SCAN(3, s3) SCAN(4, s4) SCAN(5, s5) SCAN(6, s6) SCAN(7, s7) SCAN(8, s8)
    if (found) {
        atomicOr(found_any, 1u);
    }
    barrier();
    if (gl_LocalInvocationID.x == 0) {
        slots[p.misalign[0] / 4 + gl_WorkGroupID.x] = found_any != 0 ? uintBitsToFloat(0x7fc00000u) : 0.0;
    }
}
