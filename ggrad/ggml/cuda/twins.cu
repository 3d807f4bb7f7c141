// CUDA twins of ggrad's custom ops: what a GGML_OP_CUSTOM node computes on the CPU (ggrad/ggml/csrc),
// computed on CUDA's stream instead. The pinned GGML's CUDA backend, patched by scripts/patch_ggml_cuda.py,
// runs a custom node on the GPU when ggrad registered a twin for its CPU function (ggrad/ggml/gpu_twins.py);
// CUDA graphs then capture the twin with the rest of the step.
//
// Every twin takes what the hook passes (scripts/patch_ggml_cuda.py): the node (its sources and its own data
// are device memory of the CUDA backend), the backend's stream and its cuBLAS handle. Operands were checked
// by the node's builder (ggrad/ggml/kernels.py) before the node was made.

#include <cstdint>
#include <cstdio>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ggml.h"

typedef int (*gemm_half_t)(void * cublas, void * stream, int bf16, int trans_a, int trans_b, int m, int n, int k,
                           const void * a, int lda, long long stride_a, const void * b, int ldb, long long stride_b,
                           void * c, int ldc, long long stride_c, int batch, int c_half, float beta);

static gemm_half_t gemm_half = nullptr;   // the patched backend's ggrad_cuda_gemm_half

// Called once, before any twin runs, with what the patched backend exports. 0 when every kernel has code for
// the current device (this library was built for its architecture), else the CUDA error: then ggrad registers
// no twin, since a launch without code would fail inside GGML's compute, which aborts on it.
static int kernels_load();
int ggrad_flash_attn_load();   // flash_attn.cu's kernels
int ggrad_overrides_load();    // overrides.cu's kernels

extern "C" int ggrad_cuda_twins_init(void * gemm) {
    gemm_half = (gemm_half_t) gemm;
    return kernels_load();
}

// One operand of dst = b @ a^T as cuBLAS takes it: rows of `t` (ne[1]) by k (ne[0]) read as a column-major
// matrix, transposed or not, with its leading dimension. Its rows or its k run contiguously (the builder
// checked it); where both do (one row, or k of 1) the other stride is free, so the smallest valid one is used.
struct operand {
    bool along_k;   // elements along k are contiguous (a row-major row)
    int ld;
};

static operand operand_of(const ggml_tensor * t) {
    const int64_t el = 2;
    if (t->nb[0] == el) {
        int64_t ld = t->ne[1] > 1 ? t->nb[1] / el : t->ne[0];
        return {true, (int) (ld < t->ne[0] ? t->ne[0] : ld)};
    }
    int64_t ld = t->ne[0] > 1 ? t->nb[0] / el : t->ne[1];
    return {false, (int) (ld < t->ne[1] ? t->ne[1] : ld)};
}

// Each of the `rows` rows of the contiguous `dst` set to `bias` (m words of V each: 8 halves at a time where
// the rows allow it, else one): what the product then adds to. A block's threads take a row's words.
template <typename V>
__global__ static void bias_rows_kernel(const V * bias, V * dst, int64_t m, int64_t rows) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < m; i += stride) {
            dst[row * m + i] = bias[i];
        }
    }
}

static void bias_rows(const ggml_tensor * bias, ggml_tensor * dst, int64_t m, int64_t rows, cudaStream_t stream) {
    const bool packs = m % 8 == 0 && ((uintptr_t) bias->data | (uintptr_t) dst->data) % 16 == 0;
    const int64_t words = packs ? m / 8 : m;
    const dim3 grid((unsigned int) ((words + 255) / 256), (unsigned int) (rows < 65535 ? rows : 65535));
    if (packs) {
        bias_rows_kernel<uint4><<<grid, 256, 0, stream>>>((const uint4 *) bias->data, (uint4 *) dst->data, words, rows);
    } else {
        bias_rows_kernel<uint16_t><<<grid, 256, 0, stream>>>((const uint16_t *) bias->data, (uint16_t *) dst->data,
                                                            words, rows);
    }
}

// dst [m, n, q*x, r*y] = b @ a^T for half a [k, m, q, r] and b [k, n, q*x, r*y] (ggrad_matmul_half's CPU twin
// defines it): cuBLAS computes column-major C (m x n) = op(A) op(B), A holding a's rows, B b's, summing in
// float32; dst is float32, or a's type, rounded once, with the half bias src[2] [m] added before (C holds
// the bias first and the product adds to it, as PyTorch's half linear adds its rounded bias).
extern "C" void ggrad_cuda_matmul_half(ggml_tensor * dst, void * stream, void * cublas) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const ggml_tensor * bias = dst->src[2];
    const int bf16 = a->type == GGML_TYPE_BF16;
    const int c_half = dst->type != GGML_TYPE_F32;
    const int m = (int) a->ne[1], n = (int) b->ne[1], k = (int) a->ne[0];
    const operand oa = operand_of(a), ob = operand_of(b);
    const int64_t el = 2, r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const long long mn = (long long) m * n;
    const int64_t c_el = c_half ? 2 : 4;
    if (bias != nullptr) {
        bias_rows(bias, dst, m, n * b->ne[2] * b->ne[3], (cudaStream_t) stream);
    }
    for (int64_t i3 = 0; i3 < b->ne[3]; i3++) {
        const char * a3 = (const char *) a->data + (i3 / r3) * a->nb[3];
        const char * b3 = (const char *) b->data + i3 * b->nb[3];
        char * c3 = (char *) dst->data + i3 * dst->nb[3];
        // one strided batch over dimension 2 where a's batches step evenly with b's, else one product each
        const bool strided = r2 == 1 || a->ne[2] == 1;
        const int64_t products = strided ? 1 : b->ne[2];
        for (int64_t i2 = 0; i2 < products; i2++) {
            int status = gemm_half(cublas, stream, bf16, oa.along_k, !ob.along_k, m, n, k,
                                   a3 + (i2 / r2) * a->nb[2], oa.ld, a->ne[2] == 1 ? 0 : a->nb[2] / el,
                                   b3 + i2 * b->nb[2], ob.ld, b->nb[2] / el,
                                   c3 + i2 * mn * c_el, m, mn, strided ? (int) b->ne[2] : 1, c_half,
                                   bias != nullptr ? 1.0f : 0.0f);
            if (status != 0) {
                fprintf(stderr, "ggrad: cuBLAS half product %s failed (status %d)\n", dst->name, status);
            }
        }
    }
}

// GELU's tanh form as ggrad's CPU kernel computes it (csrc/gelu.c): x sigmoid(2c (x + a x^3)), x clamped
// to [-GELU_FLAT, GELU_FLAT] inside and what lies beyond added back where positive (inf and nan as PyTorch).
#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_A 0.044715f
#define GELU_FLAT 20.0f

__device__ static float gelu_tanh(float x) {
    const float c2 = 2.0f * SQRT_2_OVER_PI;
    // comparisons, not fminf/fmaxf, so that a nan stays nan; beyond * step gives nan at -inf as the CPU's
    const float inside = x < -GELU_FLAT ? -GELU_FLAT : (x > GELU_FLAT ? GELU_FLAT : x);
    const float z = inside * (inside * inside * (c2 * GELU_A) + c2);
    const float beyond = x - inside;
    return inside / (1.0f + expf(-z)) + beyond * (beyond > 0.0f ? 1.0f : 0.0f);
}

__device__ static float gelu_tanh_back(float g, float x) {
    const float c2 = 2.0f * SQRT_2_OVER_PI;
    const float x2 = x * x;
    const float s = 1.0f / (1.0f + expf(-x * (x2 * (c2 * GELU_A) + c2)));
    const float h = x * (x2 * (3.0f * c2 * GELU_A) + c2);
    return g * (s * (h * (1.0f - s) + 1.0f));
}

// Elementwise kernels read and write 4 floats at a time where the pointers allow (the tail, or every element of
// unaligned data, one at a time): GELU's twins ran at about half the card's bandwidth one float a thread.
__device__ static float4 gelu_tanh4(float4 x) {
    return make_float4(gelu_tanh(x.x), gelu_tanh(x.y), gelu_tanh(x.z), gelu_tanh(x.w));
}

__device__ static float4 gelu_tanh_back4(float4 g, float4 x) {
    return make_float4(gelu_tanh_back(g.x, x.x), gelu_tanh_back(g.y, x.y), gelu_tanh_back(g.z, x.z),
                       gelu_tanh_back(g.w, x.w));
}

__global__ static void gelu_tanh_kernel(const float * x, float * y, int64_t n, int64_t vectors) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    const int64_t first = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    for (int64_t v = first; v < vectors; v += stride) {
        reinterpret_cast<float4 *>(y)[v] = gelu_tanh4(reinterpret_cast<const float4 *>(x)[v]);
    }
    for (int64_t i = vectors * 4 + first; i < n; i += stride) {
        y[i] = gelu_tanh(x[i]);
    }
}

__global__ static void gelu_tanh_back_kernel(const float * g, const float * x, float * y, int64_t n,
                                             int64_t vectors) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    const int64_t first = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    for (int64_t v = first; v < vectors; v += stride) {
        reinterpret_cast<float4 *>(y)[v] = gelu_tanh_back4(reinterpret_cast<const float4 *>(g)[v],
                                                           reinterpret_cast<const float4 *>(x)[v]);
    }
    for (int64_t i = vectors * 4 + first; i < n; i += stride) {
        y[i] = gelu_tanh_back(g[i], x[i]);
    }
}

// runs of 4 floats for n elements at these addresses: n / 4 where all are 16-byte aligned, else none
static int64_t vectors_of(int64_t n, const void * a, const void * b, const void * c = nullptr) {
    const uintptr_t any = (uintptr_t) a | (uintptr_t) b | (uintptr_t) c;
    return any % 16 == 0 ? n / 4 : 0;
}

static int64_t elements(const ggml_tensor * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static unsigned int blocks_for(int64_t n) {   // n: the work items of a kernel above
    const int64_t most = 132 * 32;   // enough blocks to fill any card several times; the kernels' loops stride
    const int64_t blocks = (n + 255) / 256;
    return (unsigned int) (blocks < most ? (blocks > 0 ? blocks : 1) : most);
}

extern "C" void ggrad_cuda_gelu_tanh_f32(ggml_tensor * dst, void * stream, void *) {
    const int64_t n = elements(dst);
    const float * x = (const float *) dst->src[0]->data;
    const int64_t vectors = vectors_of(n, x, dst->data);
    gelu_tanh_kernel<<<blocks_for(vectors ? vectors : n), 256, 0, (cudaStream_t) stream>>>(
        x, (float *) dst->data, n, vectors);
}

extern "C" void ggrad_cuda_gelu_tanh_back_f32(ggml_tensor * dst, void * stream, void *) {
    const int64_t n = elements(dst);
    const float * g = (const float *) dst->src[0]->data;
    const float * x = (const float *) dst->src[1]->data;
    const int64_t vectors = vectors_of(n, g, x, dst->data);
    gelu_tanh_back_kernel<<<blocks_for(vectors ? vectors : n), 256, 0, (cudaStream_t) stream>>>(
        g, x, (float *) dst->data, n, vectors);
}

// GELU and its gradient on float16 or bfloat16 (the node's type, every source's): each element read as f32,
// computed as the f32 twins, rounded once (round to nearest even), as the CPU's ggrad_gelu_tanh_half.
template <typename T> __device__ static float as_float(T v);
template <> __device__ float as_float<__half>(__half v) { return __half2float(v); }
template <> __device__ float as_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ static T from_float(float v);
template <> __device__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T, bool BACK>
__device__ static T gelu_tanh_half_of(T a, T b) {
    return from_float<T>(BACK ? gelu_tanh_back(as_float(a), as_float(b)) : gelu_tanh(as_float(a)));
}

// n elements, the first `vectors` * 8 of them 8 at a time (16-byte loads and stores), the rest one by one
template <typename T, bool BACK>
__global__ static void gelu_tanh_half_kernel(const T * a, const T * b, T * y, int64_t n, int64_t vectors) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    const int64_t first = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    for (int64_t v = first; v < vectors; v += stride) {
        uint4 va = reinterpret_cast<const uint4 *>(a)[v], vb = reinterpret_cast<const uint4 *>(b)[v], vy;
        const T * ea = reinterpret_cast<const T *>(&va);
        const T * eb = reinterpret_cast<const T *>(&vb);
        T * ey = reinterpret_cast<T *>(&vy);
        for (int j = 0; j < 8; j++) {
            ey[j] = gelu_tanh_half_of<T, BACK>(ea[j], eb[j]);
        }
        reinterpret_cast<uint4 *>(y)[v] = vy;
    }
    for (int64_t i = vectors * 8 + first; i < n; i += stride) {
        y[i] = gelu_tanh_half_of<T, BACK>(a[i], b[i]);
    }
}

template <bool BACK>
static void gelu_tanh_half(ggml_tensor * dst, void * stream) {
    const int64_t n = elements(dst);
    const void * a = dst->src[0]->data;
    const void * b = BACK ? dst->src[1]->data : a;
    const uintptr_t any = (uintptr_t) a | (uintptr_t) b | (uintptr_t) dst->data;
    const int64_t vectors = any % 16 == 0 ? n / 8 : 0;
    const unsigned int blocks = blocks_for(vectors ? vectors : n);
    if (dst->type == GGML_TYPE_BF16) {
        gelu_tanh_half_kernel<__nv_bfloat16, BACK><<<blocks, 256, 0, (cudaStream_t) stream>>>(
            (const __nv_bfloat16 *) a, (const __nv_bfloat16 *) b, (__nv_bfloat16 *) dst->data, n, vectors);
    } else {
        gelu_tanh_half_kernel<__half, BACK><<<blocks, 256, 0, (cudaStream_t) stream>>>(
            (const __half *) a, (const __half *) b, (__half *) dst->data, n, vectors);
    }
}

extern "C" void ggrad_cuda_gelu_tanh_half(ggml_tensor * dst, void * stream, void *) {
    gelu_tanh_half<false>(dst, stream);
}

extern "C" void ggrad_cuda_gelu_tanh_back_half(ggml_tensor * dst, void * stream, void *) {
    gelu_tanh_half<true>(dst, stream);
}

// The userdata of a custom node (ggml_custom_4d keeps its function, task count and userdata in op_params,
// in this layout in the pinned GGML): ggrad's kernels pass an integer there, or a float as its bits
// (kernels._float_bits).
static void * userdata_of(const ggml_tensor * dst) {
    struct { void * fun; int n_tasks; void * userdata; } params;
    memcpy(&params, dst->op_params, sizeof(params));
    return params.userdata;
}

static float float_of_userdata(const ggml_tensor * dst) {
    const uint32_t bits = (uint32_t) (uintptr_t) userdata_of(dst);
    float value;
    memcpy(&value, &bits, sizeof(value));
    return value;
}

// Layer normalisation's core on rows of n floats as ggrad's CPU kernel (csrc/norm.c): y = (x - mean) r with
// r = 1 / sqrt(var + eps), and its gradient dx = r (g - mean(g) - y mean(g y)). One warp a row; the
// moments in two passes over the row (the mean first), as the CPU's.
__device__ static float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

__device__ static void row_moments(const float * x, int64_t n, float eps, float * mean, float * r) {
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += 32) {
        s += x[i];
    }
    const float m = warp_sum(s) / (float) n;
    float q = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += 32) {
        const float d = x[i] - m;
        q += d * d;
    }
    *mean = m;
    *r = 1.0f / sqrtf(warp_sum(q) / (float) n + eps);
}

__global__ static void layer_norm_kernel(const float * x, float * y, int64_t n, int64_t rows, float eps) {
    const int64_t row = blockIdx.x * (int64_t) blockDim.y + threadIdx.y;
    if (row >= rows) {
        return;
    }
    x += row * n;
    y += row * n;
    float m, r;
    row_moments(x, n, eps, &m, &r);
    for (int64_t i = threadIdx.x; i < n; i += 32) {
        y[i] = (x[i] - m) * r;
    }
}

// (layer_norm(x) * w + b) with the roundings of the three nodes it replaces (csrc/norm.c's affine kernel):
// no fused multiply-add
__global__ static void layer_norm_affine_kernel(const float * x, const float * w, const float * b, float * y,
                                                int64_t n, int64_t rows, float eps) {
    const int64_t row = blockIdx.x * (int64_t) blockDim.y + threadIdx.y;
    if (row >= rows) {
        return;
    }
    x += row * n;
    y += row * n;
    float m, r;
    row_moments(x, n, eps, &m, &r);
    for (int64_t i = threadIdx.x; i < n; i += 32) {
        y[i] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(x[i], m), r), w[i]), b[i]);
    }
}

__global__ static void layer_norm_back_kernel(const float * g, const float * x, float * dx, int64_t n,
                                              int64_t rows, float eps) {
    const int64_t row = blockIdx.x * (int64_t) blockDim.y + threadIdx.y;
    if (row >= rows) {
        return;
    }
    g += row * n;
    x += row * n;
    dx += row * n;
    float m, r;
    row_moments(x, n, eps, &m, &r);
    float sg = 0.0f, sgy = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += 32) {
        sg += g[i];
        sgy += g[i] * ((x[i] - m) * r);
    }
    const float mg = warp_sum(sg) / (float) n, mgy = warp_sum(sgy) / (float) n;
    for (int64_t i = threadIdx.x; i < n; i += 32) {
        dx[i] = (g[i] - mg - (x[i] - m) * r * mgy) * r;
    }
}

static const int ROWS_PER_BLOCK = 8;   // warps of a block, a row each

static dim3 row_blocks(int64_t rows) {
    return dim3((unsigned int) ((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK));
}

extern "C" void ggrad_cuda_layer_norm_f32(ggml_tensor * dst, void * stream, void *) {
    const int64_t n = dst->ne[0], rows = elements(dst) / n;
    layer_norm_kernel<<<row_blocks(rows), dim3(32, ROWS_PER_BLOCK), 0, (cudaStream_t) stream>>>(
        (const float *) dst->src[0]->data, (float *) dst->data, n, rows, float_of_userdata(dst));
}

extern "C" void ggrad_cuda_layer_norm_affine_f32(ggml_tensor * dst, void * stream, void *) {
    const int64_t n = dst->ne[0], rows = elements(dst) / n;
    layer_norm_affine_kernel<<<row_blocks(rows), dim3(32, ROWS_PER_BLOCK), 0, (cudaStream_t) stream>>>(
        (const float *) dst->src[0]->data, (const float *) dst->src[1]->data, (const float *) dst->src[2]->data,
        (float *) dst->data, n, rows, float_of_userdata(dst));
}

extern "C" void ggrad_cuda_layer_norm_back_f32(ggml_tensor * dst, void * stream, void *) {
    const int64_t n = dst->ne[0], rows = elements(dst) / n;
    layer_norm_back_kernel<<<row_blocks(rows), dim3(32, ROWS_PER_BLOCK), 0, (cudaStream_t) stream>>>(
        (const float *) dst->src[0]->data, (const float *) dst->src[1]->data, (float *) dst->data, n, rows,
        float_of_userdata(dst));
}

// Two f32 tensors of any strides joined along dimension `dim` into dst (contiguous), as ggrad's CPU kernel
// (csrc/concat.c): each thread copies `width` (4 or 1) adjacent elements of a row of dst from the part they lie
// in. GGML's CUDA concat of permuted views (the attention heads' gradients) ran at about 1 TB/s in one block a row.
struct join_part {
    const char * data;
    int64_t nb[4];
};

template <int width>
__global__ static void concat_kernel(join_part a, join_part b, float * dst, int64_t ne0, int64_t ne1, int64_t ne2,
                                     int64_t groups, int dim, int64_t split) {
    const int64_t row_groups = ne0 / width;
    for (int64_t g = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; g < groups;
         g += (int64_t) gridDim.x * blockDim.x) {
        int64_t at[4];
        at[0] = (g % row_groups) * width;
        const int64_t row = g / row_groups;
        at[1] = row % ne1;
        at[2] = (row / ne1) % ne2;
        at[3] = row / (ne1 * ne2);
        const bool second = at[dim] >= split;
        const join_part & part = second ? b : a;
        at[dim] -= second ? split : 0;
        const char * src = part.data + at[0] * part.nb[0] + at[1] * part.nb[1] + at[2] * part.nb[2]
                           + at[3] * part.nb[3];
        if (width == 4) {
            reinterpret_cast<float4 *>(dst)[g] = *reinterpret_cast<const float4 *>(src);
        } else {
            dst[g] = *reinterpret_cast<const float *>(src);
        }
    }
}

static join_part join_part_of(const ggml_tensor * t) {
    return {(const char *) t->data, {(int64_t) t->nb[0], (int64_t) t->nb[1], (int64_t) t->nb[2], (int64_t) t->nb[3]}};
}

// whether each run of 4 elements of t's rows from a multiple of 4 is 4 adjacent, 16-byte aligned floats (then
// 4 adjacent elements of a row of dst come from one part: its rows, or along dimension 0 its share, hold
// multiples of 4)
static bool four_adjacent(const ggml_tensor * t) {
    if (t->nb[0] != sizeof(float) || t->ne[0] % 4 != 0 || (uintptr_t) t->data % 16 != 0) {
        return false;
    }
    return t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 && t->nb[3] % 16 == 0;
}

extern "C" void ggrad_cuda_concat_f32(ggml_tensor * dst, void * stream, void *) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int dim = (int) (intptr_t) userdata_of(dst);
    const bool vector = (uintptr_t) dst->data % 16 == 0 && four_adjacent(a) && four_adjacent(b);
    const int width = vector ? 4 : 1;
    const int64_t groups = elements(dst) / width;
    const unsigned int blocks = blocks_for(groups);
    if (groups == 0) {
        return;
    }
    if (vector) {
        concat_kernel<4><<<blocks, 256, 0, (cudaStream_t) stream>>>(
            join_part_of(a), join_part_of(b), (float *) dst->data, dst->ne[0], dst->ne[1], dst->ne[2], groups, dim,
            a->ne[dim]);
    } else {
        concat_kernel<1><<<blocks, 256, 0, (cudaStream_t) stream>>>(
            join_part_of(a), join_part_of(b), (float *) dst->data, dst->ne[0], dst->ne[1], dst->ne[2], groups, dim,
            a->ne[dim]);
    }
}

// AdamW's step (ggrad_adamw_f32's twin, its formula): w, m and v updated in place from g and p = [alpha, beta1,
// beta2, eps, wd, beta1h, beta2h]; with `check` (a GradScaler's), nothing changes where check[0] is nan, so that
// a skipped step needs no selection of its gradient or parameters before it.
__global__ static void adamw_kernel(float * w, const float * g, float * m, float * v, const float * p,
                                    const float * check, int64_t n) {
    if (check != nullptr && isnan(check[0])) {
        return;
    }
    const float alpha = p[0], beta1 = p[1], beta2 = p[2], eps = p[3], wd = p[4], beta1h = p[5], beta2h = p[6];
    const float keep = 1.0f - alpha * wd;
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += stride) {
        const float mi = m[i] * beta1 + g[i] * (1.0f - beta1);
        const float vi = v[i] * beta2 + g[i] * g[i] * (1.0f - beta2);
        m[i] = mi;
        v[i] = vi;
        w[i] = w[i] * keep - alpha * (mi * beta1h) / (sqrtf(vi * beta2h) + eps);
    }
}

// dst: the parameter (a view of src[0]); src[1] its gradient, src[2] and src[3] the moments, src[4] the 7
// hyper-parameters, src[5] the check or none (kernels.adamw_f32)
extern "C" void ggrad_cuda_adamw_f32(ggml_tensor * dst, void * stream, void *) {
    const int64_t n = elements(dst);
    const ggml_tensor * check = dst->src[5];
    adamw_kernel<<<blocks_for(n), 256, 0, (cudaStream_t) stream>>>(
        (float *) dst->data, (const float *) dst->src[1]->data, (float *) dst->src[2]->data,
        (float *) dst->src[3]->data, (const float *) dst->src[4]->data,
        check != nullptr ? (const float *) check->data : nullptr, n);
}

// A GradScaler's check of up to GGML_MAX_SRC - 1 gradients (ggrad_nonfinite_f32's twin): slot 0 of dst becomes
// nan where an element of one is an inf or a nan, every other slot 0, so that dst's sum is the CPU's answer.
struct nonfinite_sources {
    const uint32_t * data[GGML_MAX_SRC];
    int64_t n[GGML_MAX_SRC];
    int count;
};

__global__ static void nonfinite_kernel(nonfinite_sources sources, float * slots) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    const int64_t first = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    bool found = false;
    for (int s = 0; s < sources.count; s++) {
        for (int64_t i = first; i < sources.n[s]; i += stride) {
            found |= (sources.data[s][i] & 0x7f800000u) == 0x7f800000u;   // exponent bits all set: inf or nan
        }
    }
    if (__syncthreads_or(found) && threadIdx.x == 0) {
        slots[0] = __int_as_float(0x7fc00000);   // every block that found one writes the same nan
    }
}

extern "C" void ggrad_cuda_nonfinite_f32(ggml_tensor * dst, void * stream, void *) {
    nonfinite_sources sources = {};
    int64_t most = 0;
    for (int s = 0; s < GGML_MAX_SRC && dst->src[s] != nullptr; s++) {
        sources.data[s] = (const uint32_t *) dst->src[s]->data;
        sources.n[s] = elements(dst->src[s]);
        sources.count = s + 1;
        most = sources.n[s] > most ? sources.n[s] : most;
    }
    cudaMemsetAsync(dst->data, 0, elements(dst) * sizeof(float), (cudaStream_t) stream);
    nonfinite_kernel<<<blocks_for(most), 256, 0, (cudaStream_t) stream>>>(sources, (float *) dst->data);
}

static int kernels_load() {
    const void * kernels[] = {(const void *) bias_rows_kernel<uint4>, (const void *) bias_rows_kernel<uint16_t>,
                              (const void *) gelu_tanh_kernel,
                              (const void *) gelu_tanh_back_kernel,
                              (const void *) gelu_tanh_half_kernel<__half, false>,
                              (const void *) gelu_tanh_half_kernel<__nv_bfloat16, true>,
                              (const void *) layer_norm_kernel, (const void *) layer_norm_back_kernel,
                              (const void *) layer_norm_affine_kernel,
                              (const void *) concat_kernel<4>, (const void *) concat_kernel<1>,
                              (const void *) adamw_kernel, (const void *) nonfinite_kernel};
    for (const void * kernel : kernels) {
        cudaFuncAttributes attributes;
        const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);
        if (err != cudaSuccess) {
            return (int) err;
        }
    }
    const int err = ggrad_flash_attn_load();
    return err ? err : ggrad_overrides_load();
}
