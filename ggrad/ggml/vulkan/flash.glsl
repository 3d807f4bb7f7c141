// Flash attention's shaders (flash_attn.comp, flash_attn_back.comp): csrc/flash_attn.c's operands and layouts,
// one invocation a row of queries (or of keys), every product summed in f32 from f32, f16 or bf16 operands
// read as 32-bit words. The push constants (csrc/vulkan_launch.c: ggrad_vk_launch_flash) give each binding's
// misalignment in bytes, then the sizes, the operands' row strides in bytes and the userdata's scale,
// causality, offset and layout.

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Out { float outs[]; };
layout(std430, binding = 1) readonly buffer Q { uint qw[]; };
layout(std430, binding = 2) readonly buffer K { uint kw[]; };
layout(std430, binding = 3) readonly buffer V { uint vw[]; };

#define ATTENTION_HEAD_MAX 256

layout(push_constant) uniform Push {
    uint misalign[11];
    uint flags;                     // the operands' type (0 f32, 1 f16, 2 bf16), causal (bit 2), token-major
                                    // (bit 3), a mask (bit 4)
    uint d, dv, tq, tk, hq, hk, b, bk;
    uint q1, q2, q3, k1, k2, k3, v1, v2, v3;   // row strides of q, k and v in bytes
    uint m1, m2, m3, mask_heads, mask_batches; // the mask's
    uint scale_bits;
    int offset;                     // query i sees keys j <= i + offset where causal
    uint o1, o2, o3, g1, g2, g3, l1, l2;       // flash_attn_back's O, dO and L strides in bytes
} p;

// the element of a half or f32 operand at byte address `at` of its binding, whose word holds it
float decode(uint word, uint at) {
    const uint type = p.flags & 3u;
    if (type == 0u) {
        return uintBitsToFloat(word);
    }
    const uint bits = (at & 2u) != 0u ? word >> 16 : word & 0xffffu;
    return type == 1u ? unpackHalf2x16(bits).x : uintBitsToFloat(bits << 16);
}

uint elsize() {
    return (p.flags & 3u) == 0u ? 4u : 2u;
}

#define LOAD(words, binding, row, c) decode(words[(p.misalign[binding] + (row) + (c) * elsize()) >> 2], \
                                            p.misalign[binding] + (row) + (c) * elsize())

bool causal() {
    return (p.flags & 4u) != 0u;
}

bool token_major() {
    return (p.flags & 8u) != 0u;
}

// the keys query i sees end before this one
uint key_end(uint i) {
    return causal() ? uint(clamp(int(i) + p.offset + 1, 0, int(p.tk))) : p.tk;
}

// the invocation's row among `rows` (workgroups beyond 65535 go on in the grid's second dimension)
uint invocation() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}

layout(std430, binding = MASK_BINDING) readonly buffer Mask { float mask[]; };

// q_i k_j^T scale + mask of query i (row qrow of q, bytes) and key j (row krow of k) of head h, batch bb
float score(uint qrow, uint krow, uint i, uint j, uint h, uint bb) {
    float s = 0.0;
    for (uint c = 0; c < p.d; c++) {
        s += LOAD(qw, 1, qrow, c) * LOAD(kw, 2, krow, c);
    }
    s *= uintBitsToFloat(p.scale_bits);
    if ((p.flags & 16u) != 0u) {
        const uint mh = p.mask_heads == 1u ? 0u : h, mb = p.mask_batches == 1u ? 0u : bb;
        s += mask[(p.misalign[MASK_BINDING] + i * p.m1 + mh * p.m2 + mb * p.m3) / 4 + j];
    }
    return s;
}

bool masked(float s) {
    return isinf(s) && s < 0.0;
}
