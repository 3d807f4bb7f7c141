#version 450
// Flash attention's forward (csrc/flash_attn.c's ggrad_flash_attn): for each query row, softmax(q k^T scale +
// mask) v by the online softmax (a running maximum and sum, the output rescaled when the maximum grows), with
// no scores kept; O (head-major, or token-major) then L = max + log(sum) of each row. A row that sees no key
// gives zeros and L = -inf. The mask (source 3) is f32 [tk, >= tq, 1 or hq, 1 or b].
#extension GL_GOOGLE_include_directive : require
#define MASK_BINDING 4
#include "flash.glsl"

void main() {
    const uint row = invocation();
    if (row >= p.tq * p.hq * p.b) {
        return;
    }
    const uint i = row % p.tq, h = (row / p.tq) % p.hq, bb = row / (p.tq * p.hq);
    const uint kh = h / (p.hq / p.hk), kb = bb / (p.b / p.bk);
    const uint qrow = i * p.q1 + h * p.q2 + bb * p.q3;
    float acc[ATTENTION_HEAD_MAX];
    for (uint c = 0; c < p.dv; c++) {
        acc[c] = 0.0;
    }
    float m = -1.0 / 0.0, l = 0.0;
    const uint end = key_end(i);
    for (uint j = 0; j < end; j++) {
        const float s = score(qrow, j * p.k1 + kh * p.k2 + kb * p.k3, i, j, h, bb);
        if (masked(s)) {
            continue;
        }
        if (s > m) {
            const float rescale = isinf(m) ? 0.0 : exp(m - s);
            l *= rescale;
            for (uint c = 0; c < p.dv; c++) {
                acc[c] *= rescale;
            }
            m = s;
        }
        const float e = exp(s - m);
        l += e;
        const uint vrow = j * p.v1 + kh * p.v2 + kb * p.v3;
        for (uint c = 0; c < p.dv; c++) {
            acc[c] += e * LOAD(vw, 3, vrow, c);
        }
    }
    const float inv = l == 0.0 ? 0.0 : 1.0 / l;
    const uint at = p.misalign[0] / 4 + (token_major() ? ((bb * p.tq + i) * p.hq + h) * p.dv
                                                       : ((bb * p.hq + h) * p.tq + i) * p.dv);
    for (uint c = 0; c < p.dv; c++) {
        outs[at + c] = acc[c] * inv;
    }
    outs[p.misalign[0] / 4 + p.dv * p.tq * p.hq * p.b + (bb * p.hq + h) * p.tq + i] = l == 0.0 ? -1.0 / 0.0
                                                                                               : m + log(l);
}
