// GGML nodes that ggrad computes itself on CUDA where its kernels are faster than GGML's: the patched backend
// (scripts/patch_ggml_cuda.py) offers every node to ggrad_cuda_override first, which takes
//   - CPY and CONT between float32, float16 and bfloat16 (the casts of autocast, about 40% of the big GPT's
//     autocast step on an H100 in GGML's kernels, which convert one element a thread): packed tensors 8
//     elements a thread in 16-byte loads and stores, sources whose rows are contiguous 4 at a time;
//   - GET_ROWS_BACK (an embedding's gradient): GGML's kernel has each thread walk every index for every row of
//     the result (0.2 ms for a 96-row table at 8192 tokens, seconds for an LLM's vocabulary); here a block a
//     row gathers its indices once, in order;
// and leaves every other node to GGML. Values are GGML's to the bit (round to nearest even; the rows summed in
// the indices' order, as its CPU and CUDA kernels sum them), so the CPU runs the same nodes to the same result.

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ggml.h"

namespace {

template <typename to_t, typename from_t> __device__ to_t convert(from_t x) { return x; }
template <> __device__ __half convert<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ __nv_bfloat16 convert<__nv_bfloat16, float>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ float convert<float, __half>(__half x) { return __half2float(x); }
template <> __device__ float convert<float, __nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T, int N> struct alignas(sizeof(T) * N) vec {
    T v[N];
};

const int THREADS = 256;

unsigned int blocks_for(int64_t work) {
    const int64_t most = 132 * 32;   // enough blocks to fill any card several times; the loops stride
    const int64_t wanted = (work + THREADS - 1) / THREADS;
    return (unsigned int) (wanted < 1 ? 1 : (wanted < most ? wanted : most));
}

// packed src -> packed dst, n elements: `vectors` runs of N (both 16-byte aligned), then the rest one by one
template <typename from_t, typename to_t, int N>
__global__ void convert_packed(const from_t * src, to_t * dst, int64_t n, int64_t vectors) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    const int64_t first = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    for (int64_t v = first; v < vectors; v += stride) {
        const vec<from_t, N> in = reinterpret_cast<const vec<from_t, N> *>(src)[v];
        vec<to_t, N> out;
#pragma unroll
        for (int k = 0; k < N; k++) {
            out.v[k] = convert<to_t>(in.v[k]);
        }
        reinterpret_cast<vec<to_t, N> *>(dst)[v] = out;
    }
    for (int64_t i = vectors * N + first; i < n; i += stride) {
        dst[i] = convert<to_t>(src[i]);
    }
}

struct rows {   // a source whose rows (dimension 0) are contiguous, and its other sizes and strides in bytes
    const char * data;
    int64_t ne0, ne1, ne2, nb1, nb2, nb3;
};

// src's rows -> packed dst, N adjacent elements of a row a thread (N divides ne0; aligned for N at once)
template <typename from_t, typename to_t, int N>
__global__ void convert_rows(rows src, to_t * dst, int64_t groups) {
    const int64_t per_row = src.ne0 / N;
    for (int64_t g = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; g < groups;
         g += (int64_t) gridDim.x * blockDim.x) {
        const int64_t row = g / per_row;
        const int64_t i1 = row % src.ne1, i2 = (row / src.ne1) % src.ne2, i3 = row / (src.ne1 * src.ne2);
        const char * at = src.data + i1 * src.nb1 + i2 * src.nb2 + i3 * src.nb3 + (g % per_row) * N * sizeof(from_t);
        const vec<from_t, N> in = *reinterpret_cast<const vec<from_t, N> *>(at);
        vec<to_t, N> out;
#pragma unroll
        for (int k = 0; k < N; k++) {
            out.v[k] = convert<to_t>(in.v[k]);
        }
        reinterpret_cast<vec<to_t, N> *>(dst)[g] = out;
    }
}

// sizes and strides read from the node itself: this library calls no function of GGML's
int64_t elements(const ggml_tensor * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t size_of(ggml_type type) {
    return type == GGML_TYPE_F32 ? 4 : (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16 ? 2 : 0);
}

bool packed(const ggml_tensor * t) {
    int64_t stride = size_of(t->type);
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (t->ne[d] > 1 && (int64_t) t->nb[d] != stride) {
            return false;
        }
        stride *= t->ne[d];
    }
    return true;
}

bool aligned(const void * p, int64_t bytes) {
    return (uintptr_t) p % bytes == 0;
}

// src converted (or copied) into dst, dst packed: 1 when launched here
template <typename from_t, typename to_t>
int convert_node(const ggml_tensor * src, ggml_tensor * dst, cudaStream_t stream) {
    const int64_t n = elements(src);
    if (packed(src)) {
        const int N = 8;
        const int64_t vectors = aligned(src->data, 16) && aligned(dst->data, 16) ? n / N : 0;
        convert_packed<from_t, to_t, N><<<blocks_for(vectors ? vectors : n), THREADS, 0, stream>>>(
            (const from_t *) src->data, (to_t *) dst->data, n, vectors);
        return 1;
    }
    const int N = 4;
    const int64_t run = N * sizeof(from_t);
    const rows r = {(const char *) src->data, src->ne[0], src->ne[1], src->ne[2], (int64_t) src->nb[1],
                    (int64_t) src->nb[2], (int64_t) src->nb[3]};
    if (src->nb[0] != sizeof(from_t) || src->ne[0] % N != 0 || !aligned(src->data, run) || r.nb1 % run != 0
            || r.nb2 % run != 0 || r.nb3 % run != 0 || !aligned(dst->data, N * sizeof(to_t))) {
        return 0;   // GGML's own copy
    }
    convert_rows<from_t, to_t, N><<<blocks_for(n / N), THREADS, 0, stream>>>(r, (to_t *) dst->data, n / N);
    return 1;
}

int copy_node(const ggml_tensor * src, ggml_tensor * dst, cudaStream_t stream) {
    if (elements(src) != elements(dst) || elements(src) == 0 || !packed(dst)) {
        return 0;
    }
    const ggml_type from = src->type, to = dst->type;
    if (from == GGML_TYPE_F32 && to == GGML_TYPE_F16) {
        return convert_node<float, __half>(src, dst, stream);
    }
    if (from == GGML_TYPE_F32 && to == GGML_TYPE_BF16) {
        return convert_node<float, __nv_bfloat16>(src, dst, stream);
    }
    if (from == GGML_TYPE_F16 && to == GGML_TYPE_F32) {
        return convert_node<__half, float>(src, dst, stream);
    }
    if (from == GGML_TYPE_BF16 && to == GGML_TYPE_F32) {
        return convert_node<__nv_bfloat16, float>(src, dst, stream);
    }
    if (from == to && size_of(from) != 0 && !packed(src)) {   // a packed one: GGML's memcpy
        return from == GGML_TYPE_F32 ? convert_node<float, float>(src, dst, stream)
                                     : convert_node<__half, __half>(src, dst, stream);   // 16 bits as they are
    }
    return 0;
}

// GET_ROWS_BACK: dst row r (cols floats) = the sum, in the order of i, of grad's rows i whose index ids[i] is r.
// A block a row of dst (striding); each round it gathers the matches among THREADS indices in order (a ballot
// per warp, the warps' counts in shared memory), then its threads add those rows' columns, COLUMNS a thread.
const int COLUMNS = 8;
const int WARPS = THREADS / 32;

__global__ void rows_back_kernel(const float * grad, const int32_t * ids, float * dst, int64_t cols, int64_t n,
                                 int64_t rows_dst) {
    __shared__ int32_t matched[THREADS];
    __shared__ int counts[WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int64_t r = blockIdx.x; r < rows_dst; r += gridDim.x) {
        for (int64_t c0 = 0; c0 < cols; c0 += (int64_t) THREADS * COLUMNS) {
            float sum[COLUMNS];
#pragma unroll
            for (int k = 0; k < COLUMNS; k++) {
                sum[k] = 0.0f;
            }
            for (int64_t i0 = 0; i0 < n; i0 += THREADS) {
                const int64_t i = i0 + threadIdx.x;
                const bool match = i < n && ids[i] == r;
                const unsigned int ballot = __ballot_sync(0xffffffffu, match);
                if (lane == 0) {
                    counts[warp] = __popc(ballot);
                }
                __syncthreads();
                int before = 0, total = 0;
                for (int w = 0; w < WARPS; w++) {
                    before += w < warp ? counts[w] : 0;
                    total += counts[w];
                }
                if (match) {
                    matched[before + __popc(ballot & ((1u << lane) - 1))] = (int32_t) (i - i0);
                }
                __syncthreads();
                for (int j = 0; j < total; j++) {
                    const float * row = grad + (i0 + matched[j]) * cols;
#pragma unroll
                    for (int k = 0; k < COLUMNS; k++) {
                        const int64_t c = c0 + threadIdx.x + (int64_t) k * THREADS;
                        if (c < cols) {
                            sum[k] += row[c];
                        }
                    }
                }
                __syncthreads();   // matched and counts are rewritten next round
            }
#pragma unroll
            for (int k = 0; k < COLUMNS; k++) {
                const int64_t c = c0 + threadIdx.x + (int64_t) k * THREADS;
                if (c < cols) {
                    dst[r * cols + c] = sum[k];
                }
            }
        }
    }
}

int rows_back_node(ggml_tensor * dst, cudaStream_t stream) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * ids = dst->src[1];
    if (grad->type != GGML_TYPE_F32 || ids->type != GGML_TYPE_I32 || dst->type != GGML_TYPE_F32 || !packed(grad)
            || !packed(dst) || ids->nb[0] != sizeof(int32_t) || ids->ne[1] * ids->ne[2] * ids->ne[3] != 1
            || grad->ne[2] * grad->ne[3] != 1 || dst->ne[2] * dst->ne[3] != 1 || grad->ne[0] != dst->ne[0]
            || grad->ne[1] != ids->ne[0]) {
        return 0;
    }
    const int64_t rows_dst = dst->ne[1];
    const unsigned int blocks = (unsigned int) (rows_dst < 65535 ? (rows_dst > 0 ? rows_dst : 1) : 65535);
    rows_back_kernel<<<blocks, THREADS, 0, stream>>>((const float *) grad->data, (const int32_t *) ids->data,
                                                      (float *) dst->data, dst->ne[0], ids->ne[0], rows_dst);
    return 1;
}

}  // namespace

// Every node the patched backend computes is offered here first: 1 when launched here on `stream`, 0 for GGML
extern "C" int ggrad_cuda_override(ggml_tensor * node, void * stream) {
    cudaStream_t s = (cudaStream_t) stream;
    switch (node->op) {
        case GGML_OP_CPY:
            return copy_node(node->src[0], node->src[1], s);
        case GGML_OP_CONT:
            return copy_node(node->src[0], node, s);
        case GGML_OP_GET_ROWS_BACK:
            return rows_back_node(node, s);
        default:
            return 0;
    }
}

// 0 when the kernels have code for the current device, else the CUDA error (twins.cu's kernels_load)
int ggrad_overrides_load() {
    const void * kernels[] = {
        (const void *) convert_packed<float, __half, 8>, (const void *) convert_packed<float, __nv_bfloat16, 8>,
        (const void *) convert_packed<__half, float, 8>, (const void *) convert_packed<__nv_bfloat16, float, 8>,
        (const void *) convert_rows<float, float, 4>, (const void *) rows_back_kernel};
    for (const void * kernel : kernels) {
        cudaFuncAttributes attributes;
        const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);
        if (err != cudaSuccess) {
            return (int) err;
        }
    }
    return 0;
}
