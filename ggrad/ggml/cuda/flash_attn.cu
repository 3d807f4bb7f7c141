// CUDA twins of ggrad's flash attention kernels (ggrad/ggml/csrc/flash_attn.c defines what the nodes compute):
// softmax(q k^T scale + mask) v with no T x T tensor, forward (O and each row's logsumexp L) and backward (dQ,
// dK, dV from q, k, v, O, dO and L), run on the node's stream by ggrad's hook in GGML's CUDA backend.
//
// float16 and bfloat16 operands run on tensor cores (mma.sync m16n8k16, float32 accumulation), FlashAttention-2's
// schedule: a block of 4 warps takes 64 queries (forward, dQ) or 64 keys (dK and dV), each warp 16 of them; the
// scores of a warp's rows against a 64-key (or 64-query) block stay in registers, are made probabilities there
// (online softmax forward; e^(s - L) backward) and go back into the next product as its A operand without
// leaving the registers. The backward's D = rowsum(dO O) is computed first into the node's last part (its
// scratch, see kernels.flash_attn_back); dK and dV, then dQ, are two kernels that each recompute P, so no output
// is written by two blocks (no atomics: the results do not depend on scheduling). float32 operands (which the
// lowering sends to GGML's TF32 products on CUDA) have plain kernels, a thread a row, so that every node ggrad
// builds runs here. Heads up to 256 wide (kernels.ATTENTION_HEAD_MAX), padded to 32, 64, 128 or 256.

#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ggml.h"

namespace {

constexpr int BQ = 64;          // queries of a block (forward, dQ)
constexpr int BK = 64;          // keys of a block
constexpr int THREADS = 128;    // 4 warps, 16 rows each
constexpr int SKEW = 8;         // padding of shared rows (in elements): fragment loads free of bank conflicts
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
constexpr int ROWS_F32 = 64;    // threads (rows) of a block of the float32 kernels
constexpr int WIDEST = 256;     // kernels.ATTENTION_HEAD_MAX

struct view {   // element (i1, i2, i3)'s row: data + i1 nb1 + i2 nb2 + i3 nb3 (rows contiguous)
    const char * data;
    long long nb1, nb2, nb3;
};

struct out_rows {   // a result's row (i1, i2, i3) at data + i1 s1 + i2 s2 + i3 s3 (in floats), values contiguous
    float * data;
    long long s1, s2, s3;
};

struct fa_params {
    view q, k, v, mask, o, dout, lse;   // lse: element (i, h, b) at data + 4 i + h nb1 + b nb2
    int d, dv, tq, tk, hq, hk, b, bk, mask_heads, mask_batches;
    float scale;
    int causal, offset;
    out_rows out, dq, dk, dv_out;       // O's rows (query, head, batch); dQ's as q's, dK's and dV's as k's, v's
    float * lse_out, * dsum;            // L and D = rowsum(dO O): [tq, hq, b], contiguous
};

__device__ __forceinline__ const char * row_of(const view & t, long long i1, long long i2, long long i3) {
    return t.data + i1 * t.nb1 + i2 * t.nb2 + i3 * t.nb3;
}

__device__ __forceinline__ float * out_row(const out_rows & t, long long i1, long long i2, long long i3) {
    return t.data + i1 * t.s1 + i2 * t.s2 + i3 * t.s3;
}

__device__ __forceinline__ const float * mask_row(const fa_params & p, int i, int ih, int ib) {
    if (p.mask.data == nullptr) {
        return nullptr;
    }
    return (const float *) row_of(p.mask, i, p.mask_heads == 1 ? 0 : ih, p.mask_batches == 1 ? 0 : ib);
}

__device__ __forceinline__ float lse_of(const fa_params & p, int i, int ih, int ib) {
    return *(const float *) (p.lse.data + 4LL * i + ih * p.lse.nb1 + ib * p.lse.nb2);
}

// ---- the half types: conversions and the product of one 16 x 16 by 16 x 8 tile ------------------------------

template <typename T> struct half_type;

template <> struct half_type<__half> {
    __device__ static __half of(float x) { return __float2half_rn(x); }
    __device__ static uint32_t pack(float lo, float hi) {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    __device__ static void mma(float * c, const uint32_t * a, uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

template <> struct half_type<__nv_bfloat16> {
    __device__ static __nv_bfloat16 of(float x) { return __float2bfloat16_rn(x); }
    __device__ static uint32_t pack(float lo, float hi) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    __device__ static void mma(float * c, const uint32_t * a, uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

template <typename T, typename S> __device__ __forceinline__ T convert(S x);
template <> __device__ __forceinline__ __half convert<__half, __half>(__half x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 convert<__nv_bfloat16, __nv_bfloat16>(__nv_bfloat16 x) { return x; }
template <> __device__ __forceinline__ __half convert<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 convert<__nv_bfloat16, float>(float x) { return __float2bfloat16_rn(x); }

// 8 consecutive elements of a row (16 bytes: half types, 32: float32) as T, through vector loads
template <typename T>
union eight {
    uint4 bits;
    T x[8];
};

template <typename T, typename S>
__device__ __forceinline__ void load_eight(eight<T> & out, const S * src) {
    if constexpr (sizeof(S) == sizeof(T)) {
        out.bits = *reinterpret_cast<const uint4 *>(src);
    } else {
        const float4 a = reinterpret_cast<const float4 *>(src)[0], b = reinterpret_cast<const float4 *>(src)[1];
        const float f[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int e = 0; e < 8; e++) {
            out.x[e] = convert<T, S>(f[e]);
        }
    }
}

// rows [r0, r0 + 64) of t (`valid` of them exist, `width` elements each, of type S) into shared memory as T, W
// columns (zeros beyond), row-major (ld W + SKEW). Rows of the full width whose every start is aligned to 8
// elements go 8 elements a thread (vector loads and stores), others an element a thread.
template <typename T, typename S, int W>
__device__ void load_tile(T * rows, const view & t, int r0, int valid, int width, int i2, int i3) {
    constexpr int PER_ROW = W / 8;
    const unsigned long long starts = (unsigned long long) t.data | t.nb1 | t.nb2 | t.nb3;
    if (width == W && starts % (8 * sizeof(S)) == 0) {
        for (int idx = threadIdx.x; idx < 64 * PER_ROW; idx += THREADS) {
            const int r = idx / PER_ROW, c = idx % PER_ROW * 8;
            eight<T> x;
            x.bits = make_uint4(0u, 0u, 0u, 0u);   // +0 in both half types
            if (r < valid) {
                load_eight<T, S>(x, (const S *) row_of(t, r0 + r, i2, i3) + c);
            }
            *reinterpret_cast<uint4 *>(&rows[r * (W + SKEW) + c]) = x.bits;
        }
        return;
    }
    for (int idx = threadIdx.x; idx < 64 * W; idx += THREADS) {
        const int r = idx / W, c = idx % W;
        T x = half_type<T>::of(0.0f);
        if (r < valid && c < width) {
            x = convert<T, S>(((const S *) row_of(t, r0 + r, i2, i3))[c]);
        }
        rows[r * (W + SKEW) + c] = x;
    }
}

__device__ __forceinline__ uint32_t pair(const void * p) {
    return *reinterpret_cast<const uint32_t *>(p);
}

// mma.sync m16n8k16's A fragment: rows [r0, r0 + 16), columns [k0, k0 + 16) of row-major shared `s` (ld)
template <typename T>
__device__ __forceinline__ void a_fragment(uint32_t * a, const T * s, int ld, int r0, int k0) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    a[0] = pair(&s[(r0 + g) * ld + k0 + 2 * t]);
    a[1] = pair(&s[(r0 + g + 8) * ld + k0 + 2 * t]);
    a[2] = pair(&s[(r0 + g) * ld + k0 + 8 + 2 * t]);
    a[3] = pair(&s[(r0 + g + 8) * ld + k0 + 8 + 2 * t]);
}

// its B fragment (16 x 8): B[k][n] = s[n0 + n][k0 + k] (the rows of `s` are B's columns)
template <typename T>
__device__ __forceinline__ void b_fragment(uint32_t & b0, uint32_t & b1, const T * s, int ld, int n0, int k0) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    b0 = pair(&s[(n0 + g) * ld + k0 + 2 * t]);
    b1 = pair(&s[(n0 + g) * ld + k0 + 8 + 2 * t]);
}

// the A fragment of keys (or queries) [16 ks, 16 ks + 16) from a warp's 16 x 64 accumulators c[8][4] (the
// C fragments of its eight 16 x 8 tiles): C's layout is A's, two tiles side by side
template <typename T>
__device__ __forceinline__ void a_of_scores(uint32_t * a, const float (*c)[4], int ks) {
    a[0] = half_type<T>::pack(c[2 * ks][0], c[2 * ks][1]);
    a[1] = half_type<T>::pack(c[2 * ks][2], c[2 * ks][3]);
    a[2] = half_type<T>::pack(c[2 * ks + 1][0], c[2 * ks + 1][1]);
    a[3] = half_type<T>::pack(c[2 * ks + 1][2], c[2 * ks + 1][3]);
}

// c[8][4] = (rows [r0, r0 + 16) of a) (rows [0, 64) of b)^T over DP columns: a warp's 16 x 64 scores
template <typename T, int DP>
__device__ __forceinline__ void scores(float (*c)[4], const T * a, const T * b, int r0) {
    for (int nt = 0; nt < 8; nt++) {
        c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
    }
#pragma unroll
    for (int kt = 0; kt < DP / 16; kt++) {
        uint32_t af[4];
        a_fragment(af, a, DP + SKEW, r0, kt * 16);
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            uint32_t b0, b1;
            b_fragment(b0, b1, b, DP + SKEW, nt * 8, kt * 16);
            half_type<T>::mma(c[nt], af, b0, b1);
        }
    }
}

// s[0] and s[ld] (one column, two rows) as one register, the first in its low half
template <typename T>
__device__ __forceinline__ uint32_t column_pair(const T * s, int ld) {
    return (uint32_t) *reinterpret_cast<const uint16_t *>(s) | (uint32_t) *reinterpret_cast<const uint16_t *>(s + ld) << 16;
}

// acc[DP / 8][4] += (a warp's 16 x 64 c, as half) b, b's 64 rows row-major in shared memory ([64][DP + SKEW]):
// B's fragment pairs two rows of a column (halfword reads, free of bank conflicts at these strides)
template <typename T, int DP>
__device__ __forceinline__ void accumulate(float (*acc)[4], const float (*c)[4], const T * b) {
    constexpr int LD = DP + SKEW;
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        uint32_t af[4];
        a_of_scores<T>(af, c, ks);
        const T * rows = b + (ks * 16 + 2 * t) * LD + g;
#pragma unroll
        for (int dn = 0; dn < DP / 8; dn++) {
            const uint32_t b0 = column_pair(rows + dn * 8, LD), b1 = column_pair(rows + 8 * LD + dn * 8, LD);
            half_type<T>::mma(acc[dn], af, b0, b1);
        }
    }
}

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// the keys before which query i (and every earlier one) sees all it sees
__device__ __forceinline__ int key_end(const fa_params & p, int i) {
    return p.causal ? max(0, min(p.tk, i + p.offset + 1)) : p.tk;
}

// whether query i sees key j (inside the operands, causality)
__device__ __forceinline__ bool sees(const fa_params & p, int i, int j) {
    return i < p.tq && j < p.tk && !(p.causal && j > i + p.offset);
}

// ---- forward -------------------------------------------------------------------------------------------------

template <typename T, int DP>
__global__ void __launch_bounds__(THREADS) forward_half(fa_params p) {
    extern __shared__ __align__(16) unsigned char shared[];
    T * qs = (T *) shared;                 // [64][DP + SKEW]
    T * ks = qs + BQ * (DP + SKEW);        // [64][DP + SKEW]
    T * vs = ks + BK * (DP + SKEW);        // [64][DP + SKEW]
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const int q0 = blockIdx.x * BQ, ih = blockIdx.y, ib = blockIdx.z;
    const int ihk = ih / (p.hq / p.hk), ibk = ib / (p.b / p.bk);
    load_tile<T, T, DP>(qs, p.q, q0, min(BQ, p.tq - q0), p.d, ih, ib);
    const float sl = p.scale * LOG2E;
    int rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const float * masks[2];
    float m[2], l[2] = {0.0f, 0.0f};
    for (int r = 0; r < 2; r++) {
        masks[r] = rows[r] < p.tq ? mask_row(p, rows[r], ih, ib) : nullptr;
        m[r] = -INFINITY;
    }
    float o[DP / 8][4];
    for (int dn = 0; dn < DP / 8; dn++) {
        o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.0f;
    }
    const int kend = key_end(p, q0 + BQ - 1);
    for (int k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads();
        load_tile<T, T, DP>(ks, p.k, k0, min(BK, p.tk - k0), p.d, ihk, ibk);
        load_tile<T, T, DP>(vs, p.v, k0, min(BK, p.tk - k0), p.dv, ihk, ibk);
        __syncthreads();
        float s[8][4];
        scores<T, DP>(s, qs, ks, warp * 16);
        float mx[2] = {m[0], m[1]};
        for (int nt = 0; nt < 8; nt++) {
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, j = k0 + nt * 8 + 2 * t + (e & 1);
                float x = -INFINITY;
                if (sees(p, rows[r], j)) {
                    x = s[nt][e] * sl + (masks[r] ? masks[r][j] * LOG2E : 0.0f);
                }
                s[nt][e] = x;
                mx[r] = fmaxf(mx[r], x);
            }
        }
        float shift[2], alpha[2], sum[2] = {0.0f, 0.0f};
        for (int r = 0; r < 2; r++) {
            mx[r] = quad_max(mx[r]);
            shift[r] = mx[r] == -INFINITY ? 0.0f : mx[r];   // no key seen yet: e^(-inf) = 0 throughout
            alpha[r] = exp2f(m[r] - shift[r]);
            m[r] = mx[r];
        }
        for (int nt = 0; nt < 8; nt++) {
            for (int e = 0; e < 4; e++) {
                s[nt][e] = exp2f(s[nt][e] - shift[e >> 1]);
                sum[e >> 1] += s[nt][e];
            }
        }
        for (int r = 0; r < 2; r++) {
            l[r] = l[r] * alpha[r] + sum[r];
        }
        for (int dn = 0; dn < DP / 8; dn++) {
            for (int e = 0; e < 4; e++) {
                o[dn][e] *= alpha[e >> 1];
            }
        }
        accumulate<T, DP>(o, s, vs);
    }
    for (int r = 0; r < 2; r++) {
        const float total = quad_sum(l[r]);
        if (rows[r] >= p.tq) {
            continue;
        }
        const float inv = total == 0.0f ? 0.0f : 1.0f / total;   // no key seen: O 0, L -inf (nan stays)
        const long long row = ((long long) ib * p.hq + ih) * p.tq + rows[r];
        float * out = out_row(p.out, rows[r], ih, ib);
        for (int dn = 0; dn < DP / 8; dn++) {
            for (int e = 0; e < 2; e++) {
                const int c = dn * 8 + 2 * t + e;
                if (c < p.dv) {
                    out[c] = o[dn][2 * r + e] * inv;
                }
            }
        }
        if (t == 0) {
            p.lse_out[row] = total == 0.0f ? -INFINITY : (m[r] + log2f(total)) * LN2;
        }
    }
}

// ---- backward --------------------------------------------------------------------------------------------------

// D = rowsum(dO O) of every query row, a warp a row, into p.dsum
__global__ void row_dots(fa_params p) {
    const long long rows = (long long) p.tq * p.hq * p.b;
    const long long row = blockIdx.x * (long long) (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) {
        return;
    }
    const int i = (int) (row % p.tq), ih = (int) (row / p.tq % p.hq), ib = (int) (row / p.tq / p.hq);
    const float * g = (const float *) row_of(p.dout, i, ih, ib);
    const float * o = (const float *) row_of(p.o, i, ih, ib);
    float sum = 0.0f;
    for (int c = threadIdx.x & 31; c < p.dv; c += 32) {
        sum += g[c] * o[c];
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if ((threadIdx.x & 31) == 0) {
        p.dsum[row] = sum;
    }
}

// dK and dV of keys [k0, k0 + 64) of kv head blockIdx.y, batch blockIdx.z: every query block of the heads and
// batches that read them; a warp's 16 keys against 64 queries at a time (scores transposed: S^T = K Q^T)
template <typename T, int DP>
__global__ void __launch_bounds__(THREADS) key_grads_half(fa_params p) {
    extern __shared__ __align__(16) unsigned char shared[];
    T * ks = (T *) shared;                // [64][DP + SKEW] each
    T * vs = ks + BK * (DP + SKEW);
    T * qs = vs + BK * (DP + SKEW);
    T * dos = qs + BQ * (DP + SKEW);
    float * lrow = (float *) (dos + BQ * (DP + SKEW));
    float * drow = lrow + BQ;
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const int k0 = blockIdx.x * BK, ihk = blockIdx.y, ibk = blockIdx.z;
    const int groups = p.hq / p.hk, repeats = p.b / p.bk;
    load_tile<T, T, DP>(ks, p.k, k0, min(BK, p.tk - k0), p.d, ihk, ibk);
    load_tile<T, T, DP>(vs, p.v, k0, min(BK, p.tk - k0), p.dv, ihk, ibk);
    const float sl = p.scale * LOG2E;
    const int keys[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
    float dk[DP / 8][4], dv[DP / 8][4];
    for (int dn = 0; dn < DP / 8; dn++) {
        for (int e = 0; e < 4; e++) {
            dk[dn][e] = dv[dn][e] = 0.0f;
        }
    }
    const int first = p.causal ? max(0, k0 - p.offset) / BQ * BQ : 0;
    for (int rep = 0; rep < repeats; rep++) {
        for (int grp = 0; grp < groups; grp++) {
            const int ib = ibk * repeats + rep, ih = ihk * groups + grp;
            for (int q0 = first; q0 < p.tq; q0 += BQ) {
                __syncthreads();
                const int valid = min(BQ, p.tq - q0);
                load_tile<T, T, DP>(qs, p.q, q0, valid, p.d, ih, ib);
                load_tile<T, float, DP>(dos, p.dout, q0, valid, p.dv, ih, ib);
                for (int i = threadIdx.x; i < BQ; i += THREADS) {
                    const bool in = i < valid;
                    lrow[i] = in ? lse_of(p, q0 + i, ih, ib) * LOG2E : -INFINITY;
                    drow[i] = in ? p.dsum[((long long) ib * p.hq + ih) * p.tq + q0 + i] : 0.0f;
                }
                __syncthreads();
                float s[8][4], dp[8][4];
                scores<T, DP>(s, ks, qs, warp * 16);   // S^T: a warp's keys x 64 queries
                for (int nt = 0; nt < 8; nt++) {
                    for (int e = 0; e < 4; e++) {
                        const int key = keys[e >> 1], qi = nt * 8 + 2 * t + (e & 1), i = q0 + qi;
                        float x = 0.0f;
                        if (sees(p, i, key) && lrow[qi] != -INFINITY) {
                            const float * mk = mask_row(p, i, ih, ib);
                            x = exp2f(s[nt][e] * sl + (mk ? mk[key] * LOG2E : 0.0f) - lrow[qi]);
                        }
                        s[nt][e] = x;   // P^T
                    }
                }
                accumulate<T, DP>(dv, s, dos);   // dV += P^T dO
                scores<T, DP>(dp, vs, dos, warp * 16);   // dP^T = V dO^T
                for (int nt = 0; nt < 8; nt++) {
                    for (int e = 0; e < 4; e++) {
                        dp[nt][e] = s[nt][e] * (dp[nt][e] - drow[nt * 8 + 2 * t + (e & 1)]);   // dS^T
                    }
                }
                accumulate<T, DP>(dk, dp, qs);   // dK += dS^T Q (scaled below)
            }
        }
    }
    for (int r = 0; r < 2; r++) {
        if (keys[r] >= p.tk) {
            continue;
        }
        float * dk_row = out_row(p.dk, keys[r], ihk, ibk), * dv_row = out_row(p.dv_out, keys[r], ihk, ibk);
        for (int dn = 0; dn < DP / 8; dn++) {
            for (int e = 0; e < 2; e++) {
                const int c = dn * 8 + 2 * t + e;
                if (c < p.d) {
                    dk_row[c] = dk[dn][2 * r + e] * p.scale;
                }
                if (c < p.dv) {
                    dv_row[c] = dv[dn][2 * r + e];
                }
            }
        }
    }
}

// dQ of queries [q0, q0 + 64) of head blockIdx.y, batch blockIdx.z: the key blocks they see, P recomputed
template <typename T, int DP>
__global__ void __launch_bounds__(THREADS) query_grads_half(fa_params p) {
    extern __shared__ __align__(16) unsigned char shared[];
    T * qs = (T *) shared;               // [64][DP + SKEW] each
    T * dos = qs + BQ * (DP + SKEW);
    T * ks = dos + BQ * (DP + SKEW);
    T * vs = ks + BK * (DP + SKEW);
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const int q0 = blockIdx.x * BQ, ih = blockIdx.y, ib = blockIdx.z;
    const int ihk = ih / (p.hq / p.hk), ibk = ib / (p.b / p.bk);
    const int valid = min(BQ, p.tq - q0);
    load_tile<T, T, DP>(qs, p.q, q0, valid, p.d, ih, ib);
    load_tile<T, float, DP>(dos, p.dout, q0, valid, p.dv, ih, ib);
    const float sl = p.scale * LOG2E;
    const int rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    float lse[2], dsum[2];
    const float * masks[2];
    for (int r = 0; r < 2; r++) {
        const bool in = rows[r] < p.tq;
        lse[r] = in ? lse_of(p, rows[r], ih, ib) * LOG2E : -INFINITY;
        dsum[r] = in ? p.dsum[((long long) ib * p.hq + ih) * p.tq + rows[r]] : 0.0f;
        masks[r] = in ? mask_row(p, rows[r], ih, ib) : nullptr;
    }
    float dq[DP / 8][4];
    for (int dn = 0; dn < DP / 8; dn++) {
        dq[dn][0] = dq[dn][1] = dq[dn][2] = dq[dn][3] = 0.0f;
    }
    const int kend = key_end(p, q0 + BQ - 1);
    for (int k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads();
        load_tile<T, T, DP>(ks, p.k, k0, min(BK, p.tk - k0), p.d, ihk, ibk);
        load_tile<T, T, DP>(vs, p.v, k0, min(BK, p.tk - k0), p.dv, ihk, ibk);
        __syncthreads();
        float s[8][4], dp[8][4];
        scores<T, DP>(s, qs, ks, warp * 16);
        for (int nt = 0; nt < 8; nt++) {
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, j = k0 + nt * 8 + 2 * t + (e & 1);
                float x = 0.0f;
                if (sees(p, rows[r], j) && lse[r] != -INFINITY) {
                    x = exp2f(s[nt][e] * sl + (masks[r] ? masks[r][j] * LOG2E : 0.0f) - lse[r]);
                }
                s[nt][e] = x;   // P
            }
        }
        scores<T, DP>(dp, dos, vs, warp * 16);   // dP = dO V^T
        for (int nt = 0; nt < 8; nt++) {
            for (int e = 0; e < 4; e++) {
                dp[nt][e] = s[nt][e] * (dp[nt][e] - dsum[e >> 1]);   // dS
            }
        }
        accumulate<T, DP>(dq, dp, ks);   // dQ += dS K (scaled below)
    }
    for (int r = 0; r < 2; r++) {
        if (rows[r] >= p.tq) {
            continue;
        }
        float * dq_row = out_row(p.dq, rows[r], ih, ib);
        for (int dn = 0; dn < DP / 8; dn++) {
            for (int e = 0; e < 2; e++) {
                const int c = dn * 8 + 2 * t + e;
                if (c < p.d) {
                    dq_row[c] = dq[dn][2 * r + e] * p.scale;
                }
            }
        }
    }
}

// ---- float32: a thread a row ---------------------------------------------------------------------------------

__device__ __forceinline__ float dot_rows(const float * a, const float * b, int n) {
    float sum = 0.0f;
    for (int c = 0; c < n; c++) {
        sum += a[c] * b[c];
    }
    return sum;
}

// the scaled, masked score of query i (row qi) and key j in log2 units, -inf where i does not see j
__device__ __forceinline__ float score_f32(const fa_params & p, const float * qi, int i, int j, int ih, int ib) {
    if (!sees(p, i, j)) {
        return -INFINITY;
    }
    const int ihk = ih / (p.hq / p.hk), ibk = ib / (p.b / p.bk);
    const float * kj = (const float *) row_of(p.k, j, ihk, ibk);
    const float * mk = mask_row(p, i, ih, ib);
    return dot_rows(qi, kj, p.d) * p.scale * LOG2E + (mk ? mk[j] * LOG2E : 0.0f);
}

__global__ void forward_f32(fa_params p) {
    const int i = blockIdx.x * ROWS_F32 + threadIdx.x, ih = blockIdx.y, ib = blockIdx.z;
    if (i >= p.tq) {
        return;
    }
    const int ihk = ih / (p.hq / p.hk), ibk = ib / (p.b / p.bk);
    const float * qi = (const float *) row_of(p.q, i, ih, ib);
    float acc[WIDEST];
    for (int c = 0; c < p.dv; c++) {
        acc[c] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int kend = key_end(p, i);
    for (int j = 0; j < kend; j++) {
        const float s = score_f32(p, qi, i, j, ih, ib), mnew = fmaxf(m, s);
        if (mnew == -INFINITY) {
            continue;
        }
        const float alpha = exp2f(m - mnew), e = exp2f(s - mnew);
        const float * vj = (const float *) row_of(p.v, j, ihk, ibk);
        for (int c = 0; c < p.dv; c++) {
            acc[c] = acc[c] * alpha + e * vj[c];
        }
        l = l * alpha + e;
        m = mnew;
    }
    const long long row = ((long long) ib * p.hq + ih) * p.tq + i;
    const float inv = l == 0.0f ? 0.0f : 1.0f / l;
    float * out = out_row(p.out, i, ih, ib);
    for (int c = 0; c < p.dv; c++) {
        out[c] = acc[c] * inv;
    }
    p.lse_out[row] = l == 0.0f ? -INFINITY : (m + log2f(l)) * LN2;
}

// dS of query i, key j (P from L, dP = dO_i . v_j), in the units of the scaled scores
__device__ __forceinline__ float score_grad_f32(const fa_params & p, const float * qi, const float * gi, float lse2,
                                                float dsum, int i, int j, int ih, int ib) {
    if (lse2 == -INFINITY) {
        return 0.0f;
    }
    const float s = score_f32(p, qi, i, j, ih, ib);
    if (s == -INFINITY) {
        return 0.0f;
    }
    const float * vj = (const float *) row_of(p.v, j, ih / (p.hq / p.hk), ib / (p.b / p.bk));
    return exp2f(s - lse2) * (dot_rows(gi, vj, p.dv) - dsum);
}

__global__ void query_grads_f32(fa_params p) {
    const int i = blockIdx.x * ROWS_F32 + threadIdx.x, ih = blockIdx.y, ib = blockIdx.z;
    if (i >= p.tq) {
        return;
    }
    const int ihk = ih / (p.hq / p.hk), ibk = ib / (p.b / p.bk);
    const long long row = ((long long) ib * p.hq + ih) * p.tq + i;
    const float * qi = (const float *) row_of(p.q, i, ih, ib);
    const float * gi = (const float *) row_of(p.dout, i, ih, ib);
    const float lse2 = lse_of(p, i, ih, ib) * LOG2E, dsum = p.dsum[row];
    float acc[WIDEST];
    for (int c = 0; c < p.d; c++) {
        acc[c] = 0.0f;
    }
    const int kend = key_end(p, i);
    for (int j = 0; j < kend; j++) {
        const float ds = score_grad_f32(p, qi, gi, lse2, dsum, i, j, ih, ib);
        const float * kj = (const float *) row_of(p.k, j, ihk, ibk);
        for (int c = 0; c < p.d; c++) {
            acc[c] += ds * kj[c];
        }
    }
    float * dq_row = out_row(p.dq, i, ih, ib);
    for (int c = 0; c < p.d; c++) {
        dq_row[c] = acc[c] * p.scale;
    }
}

__global__ void key_grads_f32(fa_params p) {
    const int j = blockIdx.x * ROWS_F32 + threadIdx.x, ihk = blockIdx.y, ibk = blockIdx.z;
    if (j >= p.tk) {
        return;
    }
    const int groups = p.hq / p.hk, repeats = p.b / p.bk;
    float dk[WIDEST], dv[WIDEST];
    for (int c = 0; c < WIDEST; c++) {
        dk[c] = dv[c] = 0.0f;
    }
    const int first = p.causal ? max(0, j - p.offset) : 0;
    for (int rep = 0; rep < repeats; rep++) {
        for (int grp = 0; grp < groups; grp++) {
            const int ib = ibk * repeats + rep, ih = ihk * groups + grp;
            for (int i = first; i < p.tq; i++) {
                const long long qrow = ((long long) ib * p.hq + ih) * p.tq + i;
                const float * qi = (const float *) row_of(p.q, i, ih, ib);
                const float * gi = (const float *) row_of(p.dout, i, ih, ib);
                const float lse2 = lse_of(p, i, ih, ib) * LOG2E;
                const float s = lse2 == -INFINITY ? -INFINITY : score_f32(p, qi, i, j, ih, ib);
                if (s == -INFINITY) {
                    continue;
                }
                const float prob = exp2f(s - lse2);
                const float * vj = (const float *) row_of(p.v, j, ihk, ibk);
                const float ds = prob * (dot_rows(gi, vj, p.dv) - p.dsum[qrow]);
                for (int c = 0; c < p.dv; c++) {
                    dv[c] += prob * gi[c];
                }
                for (int c = 0; c < p.d; c++) {
                    dk[c] += ds * qi[c];
                }
            }
        }
    }
    float * dk_row = out_row(p.dk, j, ihk, ibk), * dv_row = out_row(p.dv_out, j, ihk, ibk);
    for (int c = 0; c < p.d; c++) {
        dk_row[c] = dk[c] * p.scale;
    }
    for (int c = 0; c < p.dv; c++) {
        dv_row[c] = dv[c];
    }
}

// ---- launches ------------------------------------------------------------------------------------------------

template <int DP> constexpr size_t forward_bytes() {
    return (size_t) 2 * 3 * 64 * (DP + SKEW);
}
template <int DP> constexpr size_t key_grads_bytes() {
    return (size_t) 2 * 4 * 64 * (DP + SKEW) + 2 * 64 * sizeof(float);
}
template <int DP> constexpr size_t query_grads_bytes() {
    return (size_t) 2 * 4 * 64 * (DP + SKEW);
}

view view_of(const ggml_tensor * t) {
    view v = {nullptr, 0, 0, 0};
    if (t) {
        v = {(const char *) t->data, (long long) t->nb[1], (long long) t->nb[2], (long long) t->nb[3]};
    }
    return v;
}

// the node's sizes, operands (the mask at src[mask_src], if any) and userdata's scale and causality, as
// csrc/flash_attn.c reads them (kernels._attention_bits); *token_major: its layout bit
fa_params params_of(const ggml_tensor * dst, int mask_src, bool * token_major) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * mask = dst->src[mask_src];
    fa_params p;
    memset(&p, 0, sizeof(p));
    p.q = view_of(q);
    p.k = view_of(k);
    p.v = view_of(v);
    p.mask = view_of(mask);
    p.d = (int) q->ne[0];
    p.tq = (int) q->ne[1];
    p.hq = (int) q->ne[2];
    p.b = (int) q->ne[3];
    p.tk = (int) k->ne[1];
    p.hk = (int) k->ne[2];
    p.bk = (int) k->ne[3];
    p.dv = (int) v->ne[0];
    p.mask_heads = mask ? (int) mask->ne[2] : 1;
    p.mask_batches = mask ? (int) mask->ne[3] : 1;
    struct { void * fun; int n_tasks; void * userdata; } custom;   // ggml_custom_4d's op_params
    memcpy(&custom, dst->op_params, sizeof(custom));
    const uint64_t bits = (uint64_t) (uintptr_t) custom.userdata;
    const uint32_t scale_bits = (uint32_t) bits;
    memcpy(&p.scale, &scale_bits, sizeof(p.scale));
    p.causal = (int) ((bits >> 32) & 1);
    p.offset = (int) ((long long) ((bits >> 33) & ((1ULL << 30) - 1)) - (1LL << 29));
    *token_major = (bits >> 63) != 0;
    return p;
}

int tier_of(const fa_params & p) {
    const int widest = p.d > p.dv ? p.d : p.dv;
    return widest <= 32 ? 32 : widest <= 64 ? 64 : widest <= 128 ? 128 : 256;
}

template <typename T, int DP>
void forward_tier(const fa_params & p, cudaStream_t stream) {
    forward_half<T, DP><<<dim3((p.tq + BQ - 1) / BQ, p.hq, p.b), THREADS, forward_bytes<DP>(), stream>>>(p);
}

template <typename T, int DP>
void backward_tier(const fa_params & p, cudaStream_t stream) {
    key_grads_half<T, DP><<<dim3((p.tk + BK - 1) / BK, p.hk, p.bk), THREADS, key_grads_bytes<DP>(), stream>>>(p);
    query_grads_half<T, DP><<<dim3((p.tq + BQ - 1) / BQ, p.hq, p.b), THREADS, query_grads_bytes<DP>(), stream>>>(p);
}

template <typename T>
void forward_typed(const fa_params & p, cudaStream_t stream) {
    switch (tier_of(p)) {
        case 32: forward_tier<T, 32>(p, stream); break;
        case 64: forward_tier<T, 64>(p, stream); break;
        case 128: forward_tier<T, 128>(p, stream); break;
        default: forward_tier<T, 256>(p, stream); break;
    }
}

template <typename T>
void backward_typed(const fa_params & p, cudaStream_t stream) {
    switch (tier_of(p)) {
        case 32: backward_tier<T, 32>(p, stream); break;
        case 64: backward_tier<T, 64>(p, stream); break;
        case 128: backward_tier<T, 128>(p, stream); break;
        default: backward_tier<T, 256>(p, stream); break;
    }
}

// every kernel with code for this device, with the shared memory it asks for allowed: 0, or the CUDA error
template <typename T, int DP>
int load_tier() {
    const void * kernels[] = {(const void *) forward_half<T, DP>, (const void *) key_grads_half<T, DP>,
                              (const void *) query_grads_half<T, DP>};
    const size_t bytes[] = {forward_bytes<DP>(), key_grads_bytes<DP>(), query_grads_bytes<DP>()};
    for (int i = 0; i < 3; i++) {
        cudaError_t err = cudaFuncSetAttribute(kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize, (int) bytes[i]);
        if (err != cudaSuccess) {
            return (int) err;
        }
    }
    return 0;
}

template <typename T>
int load_typed() {
    int err = load_tier<T, 32>();
    err = err ? err : load_tier<T, 64>();
    err = err ? err : load_tier<T, 128>();
    return err ? err : load_tier<T, 256>();
}

}  // namespace

// Called by twins.cu's init: 0 when every attention kernel can run on this device, else the CUDA error.
int ggrad_flash_attn_load() {
    int err = load_typed<__half>();
    err = err ? err : load_typed<__nv_bfloat16>();
    const void * plain[] = {(const void *) forward_f32, (const void *) query_grads_f32, (const void *) key_grads_f32,
                            (const void *) row_dots};
    for (const void * kernel : plain) {
        cudaFuncAttributes attributes;
        if (!err) {
            err = (int) cudaFuncGetAttributes(&attributes, kernel);
        }
    }
    return err;
}

// kernels.flash_attn's node: O ([dv, tq, hq, b], or token-major [dv, hq, tq, b]) then L (f32, contiguous) from
// q, k, v and an optional mask (src[3])
extern "C" void ggrad_cuda_flash_attn(ggml_tensor * dst, void * stream, void *) {
    bool token_major;
    fa_params p = params_of(dst, 3, &token_major);
    float * data = (float *) dst->data;
    const long long dv = p.dv, tq = p.tq, hq = p.hq;
    p.out = token_major ? out_rows{data, hq * dv, dv, tq * hq * dv} : out_rows{data, dv, tq * dv, hq * tq * dv};
    p.lse_out = data + dv * tq * hq * p.b;
    cudaStream_t s = (cudaStream_t) stream;
    switch (dst->src[0]->type) {
        case GGML_TYPE_F16: forward_typed<__half>(p, s); break;
        case GGML_TYPE_BF16: forward_typed<__nv_bfloat16>(p, s); break;
        default:
            forward_f32<<<dim3((p.tq + ROWS_F32 - 1) / ROWS_F32, p.hq, p.b), ROWS_F32, 0, s>>>(p);
            break;
    }
}

// kernels.flash_attn_back's node: dQ, dK, dV (shaped as q, k, v, or token-major side by side in each row,
// [d, hq, 3, tq, b]), then D = rowsum(dO O) (its scratch), from q, k, v, O, dO, L and an optional mask (src[6])
extern "C" void ggrad_cuda_flash_attn_back(ggml_tensor * dst, void * stream, void *) {
    bool token_major;
    fa_params p = params_of(dst, 6, &token_major);
    p.o = view_of(dst->src[3]);
    p.dout = view_of(dst->src[4]);
    p.lse = view_of(dst->src[5]);
    float * data = (float *) dst->data;
    const long long d = p.d, dv = p.dv, tq = p.tq, tk = p.tk, hq = p.hq, hk = p.hk;
    if (token_major) {   // kernels.flash_attn_back checked d = dv, tq = tk, hq = hk, b = bk
        const long long width = hq * d, s1 = 3 * width, s3 = tq * s1;
        p.dq = out_rows{data, s1, d, s3};
        p.dk = out_rows{data + width, s1, d, s3};
        p.dv_out = out_rows{data + 2 * width, s1, d, s3};
        p.dsum = data + s3 * p.b;
    } else {
        const long long nq = d * tq * hq * p.b, nk = d * tk * hk * p.bk;
        p.dq = out_rows{data, d, tq * d, hq * tq * d};
        p.dk = out_rows{data + nq, d, tk * d, hk * tk * d};
        p.dv_out = out_rows{data + nq + nk, dv, tk * dv, hk * tk * dv};
        p.dsum = data + nq + nk + dv * tk * hk * p.bk;
    }
    cudaStream_t s = (cudaStream_t) stream;
    const long long rows = (long long) p.tq * p.hq * p.b;
    row_dots<<<(unsigned int) ((rows + 7) / 8), 256, 0, s>>>(p);
    switch (dst->src[0]->type) {
        case GGML_TYPE_F16: backward_typed<__half>(p, s); break;
        case GGML_TYPE_BF16: backward_typed<__nv_bfloat16>(p, s); break;
        default:
            key_grads_f32<<<dim3((p.tk + ROWS_F32 - 1) / ROWS_F32, p.hk, p.bk), ROWS_F32, 0, s>>>(p);
            query_grads_f32<<<dim3((p.tq + ROWS_F32 - 1) / ROWS_F32, p.hq, p.b), ROWS_F32, 0, s>>>(p);
            break;
    }
}
