// ggrad's elementwise shaders on float16 or bfloat16 (csrc/gelu.c's ggrad_gelu_tanh_half, ...): as
// elementwise.glsl, with 16-bit elements and one push constant more saying which type (csrc/vulkan_launch.c:
// ggrad_vk_launch_elementwise_half). Each value is read exactly into f32, computed there and rounded once to
// nearest even, nan kept, as the CPU's kernels (GGML's conversions) round it: written out here, not left to
// the implementation's own conversions, whose rounding and subnormals Vulkan leaves open.

#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 256) in;

layout(std430, binding = 0) writeonly buffer Dst { uint16_t dst[]; };
layout(std430, binding = 1) readonly buffer Src0 { uint16_t src0[]; };
layout(std430, binding = 2) readonly buffer Src1 { uint16_t src1[]; };

layout(push_constant) uniform Push {
    uint misalign[11];
    uint n;
    uint sources;
    uint bf16;
} p;

float widened(uint h) {   // h: the 16 bits
    if (p.bf16 != 0u) {
        return uintBitsToFloat(h << 16);
    }
    const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) {
        return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
    }
    if (e == 0u) {   // subnormal or zero: m * 2^-24
        const float v = float(m) * (1.0 / 16777216.0);
        return sign != 0u ? -v : v;
    }
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

uint rounded(float v) {   // the 16 bits
    const uint u = floatBitsToUint(v), a = u & 0x7fffffffu;
    if (p.bf16 != 0u) {
        return a > 0x7f800000u ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    }
    const uint sign = (u >> 16) & 0x8000u;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    if (a >= 0x477ff000u) {   // 65520 and above round to infinity
        return sign | 0x7c00u;
    }
    if (a < 0x38800000u) {    // below half's least normal 2^-14: units of 2^-24, the scaling exact
        return sign | uint(roundEven(uintBitsToFloat(a) * 16777216.0));
    }
    const uint e = a - 0x38000000u;   // f32's exponent bias 127 -> half's 15, then 23 -> 10 mantissa bits
    return sign | ((e + 0xfffu + ((e >> 13) & 1u)) >> 13);
}

float value(uint i);   // the element i of the result, in f32 (each shader's own)

void main() {
    const uint d = p.misalign[0] / 2;
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        dst[d + i] = uint16_t(rounded(value(i)));
    }
}
