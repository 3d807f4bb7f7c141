#version 450
// Flash attention's backward (csrc/flash_attn.c's ggrad_flash_attn_back): the gradients at q, k and v given dO,
// the probabilities recomputed from L, P = e^(s - L), with D = rowsum(dO O): dV = P^T dO, dP = dO V^T,
// dS = P (dP - D), dK = scale dS^T Q, dQ = scale dS K. Invocations [0, tq hq b) take a query row each (its dQ
// and D), the rest a key row each (its dK and dV over every query that reads it: all heads of a grouped-query
// group and batches of a broadcast one), so that no two write one result. Sources: q, k, v, O (3), dO (4),
// L (5), the mask (6); results dQ, dK, dV (as q, k, v, or token-major side by side) then D.
#extension GL_GOOGLE_include_directive : require
#define MASK_BINDING 7
#include "flash.glsl"

layout(std430, binding = 4) readonly buffer O { float o[]; };
layout(std430, binding = 5) readonly buffer DO { float dout[]; };
layout(std430, binding = 6) readonly buffer L { float lse[]; };

float lse_of(uint i, uint h, uint bb) {
    return lse[(p.misalign[6] + h * p.l1 + bb * p.l2) / 4 + i];
}

uint dout_row(uint i, uint h, uint bb) {
    return (p.misalign[5] + i * p.g1 + h * p.g2 + bb * p.g3) / 4;
}

// rowsum(dO O) of query i of head h, batch bb
float dsum(uint i, uint h, uint bb) {
    const uint g = dout_row(i, h, bb), oa = (p.misalign[4] + i * p.o1 + h * p.o2 + bb * p.o3) / 4;
    float s = 0.0;
    for (uint c = 0; c < p.dv; c++) {
        s += dout[g + c] * o[oa + c];
    }
    return s;
}

// dO_i v_j^T
float dprob(uint g, uint vrow) {
    float s = 0.0;
    for (uint c = 0; c < p.dv; c++) {
        s += dout[g + c] * LOAD(vw, 3, vrow, c);
    }
    return s;
}

// where results start: dQ, dK, dV and D (floats from the node's start); a result row (r, head, batch) is at
// start + r * s1 + head * s2 + batch * s3
void layout_of(out uint dq, out uint dk, out uint dv, out uint d_at, out uvec3 sq, out uvec3 sk, out uvec3 sv) {
    const uint base = p.misalign[0] / 4;
    if (token_major()) {   // kernels.flash_attn_back checked d = dv, tq = tk, hq = hk, b = bk
        const uint width = p.hq * p.d, s1 = 3u * width;
        dq = base;
        dk = base + width;
        dv = base + 2u * width;
        d_at = base + s1 * p.tq * p.b;
        sq = sk = sv = uvec3(s1, p.d, s1 * p.tq);
    } else {
        const uint nq = p.d * p.tq * p.hq * p.b, nk = p.d * p.tk * p.hk * p.bk;
        dq = base;
        dk = base + nq;
        dv = dk + nk;
        d_at = dv + p.dv * p.tk * p.hk * p.bk;
        sq = uvec3(p.d, p.tq * p.d, p.hq * p.tq * p.d);
        sk = uvec3(p.d, p.tk * p.d, p.hk * p.tk * p.d);
        sv = uvec3(p.dv, p.tk * p.dv, p.hk * p.tk * p.dv);
    }
}

void main() {
    const uint row = invocation(), query_rows = p.tq * p.hq * p.b;
    if (row >= query_rows + p.tk * p.hk * p.bk) {
        return;
    }
    const float scale = uintBitsToFloat(p.scale_bits);
    uint dq_at, dk_at, dv_at, d_at;
    uvec3 sq, sk, sv;
    layout_of(dq_at, dk_at, dv_at, d_at, sq, sk, sv);
    float acc[ATTENTION_HEAD_MAX], acc2[ATTENTION_HEAD_MAX];
    for (uint c = 0; c < ATTENTION_HEAD_MAX; c++) {
        acc[c] = 0.0;
        acc2[c] = 0.0;
    }
    if (row < query_rows) {   // a query's dQ and D
        const uint i = row % p.tq, h = (row / p.tq) % p.hq, bb = row / (p.tq * p.hq);
        const uint kh = h / (p.hq / p.hk), kb = bb / (p.b / p.bk);
        const uint qrow = i * p.q1 + h * p.q2 + bb * p.q3, g = dout_row(i, h, bb);
        const float dd = dsum(i, h, bb), l = lse_of(i, h, bb);
        outs[d_at + (bb * p.hq + h) * p.tq + i] = dd;
        const uint end = isinf(l) && l < 0.0 ? 0u : key_end(i);
        for (uint j = 0; j < end; j++) {
            const uint krow = j * p.k1 + kh * p.k2 + kb * p.k3;
            const float s = score(qrow, krow, i, j, h, bb);
            if (masked(s)) {
                continue;
            }
            const float pr = exp(s - l);
            const float ds = pr * (dprob(g, j * p.v1 + kh * p.v2 + kb * p.v3) - dd);
            for (uint c = 0; c < p.d; c++) {
                acc[c] += ds * LOAD(kw, 2, krow, c);
            }
        }
        const uint at = dq_at + i * sq.x + h * sq.y + bb * sq.z;
        for (uint c = 0; c < p.d; c++) {
            outs[at + c] = acc[c] * scale;
        }
        return;
    }
    // a key's dK (acc) and dV (acc2)
    const uint kr = row - query_rows;
    const uint j = kr % p.tk, kh = (kr / p.tk) % p.hk, kb = kr / (p.tk * p.hk);
    const uint krow = j * p.k1 + kh * p.k2 + kb * p.k3, vrow = j * p.v1 + kh * p.v2 + kb * p.v3;
    const uint group = p.hq / p.hk, batches = p.b / p.bk;
    const uint first = causal() ? uint(clamp(int(j) - p.offset, 0, int(p.tq))) : 0u;
    for (uint h = kh * group; h < (kh + 1u) * group; h++) {
        for (uint bb = kb * batches; bb < (kb + 1u) * batches; bb++) {
            for (uint i = first; i < p.tq; i++) {
                const float l = lse_of(i, h, bb);
                const uint qrow = i * p.q1 + h * p.q2 + bb * p.q3;
                const float s = score(qrow, krow, i, j, h, bb);
                if (masked(s) || (isinf(l) && l < 0.0)) {
                    continue;
                }
                const uint g = dout_row(i, h, bb);
                const float pr = exp(s - l);
                const float ds = pr * (dprob(g, vrow) - dsum(i, h, bb));
                for (uint c = 0; c < p.d; c++) {
                    acc[c] += ds * LOAD(qw, 1, qrow, c);
                }
                for (uint c = 0; c < p.dv; c++) {
                    acc2[c] += pr * dout[g + c];
                }
            }
        }
    }
    const uint at_k = dk_at + j * sk.x + kh * sk.y + kb * sk.z, at_v = dv_at + j * sv.x + kh * sv.y + kb * sv.z;
    for (uint c = 0; c < p.d; c++) {
        outs[at_k + c] = acc[c] * scale;
    }
    for (uint c = 0; c < p.dv; c++) {
        outs[at_v + c] = acc2[c];
    }
}
