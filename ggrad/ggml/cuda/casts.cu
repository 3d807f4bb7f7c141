// ggrad's conversions between float32 and float16/bfloat16 for GGML's CPY nodes on CUDA (the casts of autocast,
// about 40% of the big GPT's autocast step on an H100 in GGML's kernel, which converts one element a thread).
// The patched backend (scripts/patch_ggml_cuda.py) offers every CPY node to ggrad_cuda_copy first; this one takes
// the packed float32 <-> half conversions, 8 elements a thread in 16-byte loads and stores, and leaves every
// other copy to GGML. The values are GGML's (round to nearest even, as its CUDA and CPU conversions), so the
// CPU runs the same nodes to the same bits.

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ggml.h"

namespace {

template <typename half_t> __device__ half_t from_float(float x);
template <> __device__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
__device__ float to_float(__half x) { return __half2float(x); }
__device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

const int THREADS = 256;
const int VECTOR = 8;   // elements a thread converts at once: 32 bytes of float32, 16 of half

// src (n float32) -> dst (n halves); where both are 16-byte aligned, `vectors` runs of 8 go by vector loads
template <typename half_t>
__global__ void narrow_kernel(const float * src, half_t * dst, int64_t n, int64_t vectors) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    const int64_t first = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    for (int64_t v = first; v < vectors; v += stride) {
        const float4 lo = reinterpret_cast<const float4 *>(src)[2 * v];
        const float4 hi = reinterpret_cast<const float4 *>(src)[2 * v + 1];
        union { half_t h[VECTOR]; uint4 bits; } out;
        out.h[0] = from_float<half_t>(lo.x); out.h[1] = from_float<half_t>(lo.y);
        out.h[2] = from_float<half_t>(lo.z); out.h[3] = from_float<half_t>(lo.w);
        out.h[4] = from_float<half_t>(hi.x); out.h[5] = from_float<half_t>(hi.y);
        out.h[6] = from_float<half_t>(hi.z); out.h[7] = from_float<half_t>(hi.w);
        reinterpret_cast<uint4 *>(dst)[v] = out.bits;
    }
    for (int64_t i = vectors * VECTOR + first; i < n; i += stride) {
        dst[i] = from_float<half_t>(src[i]);
    }
}

template <typename half_t>
__global__ void widen_kernel(const half_t * src, float * dst, int64_t n, int64_t vectors) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    const int64_t first = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    for (int64_t v = first; v < vectors; v += stride) {
        union { half_t h[VECTOR]; uint4 bits; } in;
        in.bits = reinterpret_cast<const uint4 *>(src)[v];
        reinterpret_cast<float4 *>(dst)[2 * v] = make_float4(to_float(in.h[0]), to_float(in.h[1]),
                                                             to_float(in.h[2]), to_float(in.h[3]));
        reinterpret_cast<float4 *>(dst)[2 * v + 1] = make_float4(to_float(in.h[4]), to_float(in.h[5]),
                                                                 to_float(in.h[6]), to_float(in.h[7]));
    }
    for (int64_t i = vectors * VECTOR + first; i < n; i += stride) {
        dst[i] = to_float(src[i]);
    }
}

// sizes and strides read from the node itself: this library calls no function of GGML's
int64_t elements(const ggml_tensor * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

bool packed(const ggml_tensor * t, int64_t element_size) {
    int64_t stride = element_size;
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (t->ne[d] > 1 && (int64_t) t->nb[d] != stride) {
            return false;
        }
        stride *= t->ne[d];
    }
    return true;
}

// launch geometry for n elements: `vectors` runs of 8 where both pointers allow 16-byte access
void geometry(const void * a, const void * b, int64_t n, int64_t * vectors, unsigned int * blocks) {
    const bool aligned = ((uintptr_t) a % 16 == 0) && ((uintptr_t) b % 16 == 0);
    *vectors = aligned ? n / VECTOR : 0;
    const int64_t work = *vectors > 0 ? *vectors : n;
    const int64_t most = 132 * 32;   // enough blocks to fill any card several times; the loops stride
    const int64_t wanted = (work + THREADS - 1) / THREADS;
    *blocks = (unsigned int) (wanted < 1 ? 1 : (wanted < most ? wanted : most));
}

template <typename half_t>
void narrow(const ggml_tensor * src, ggml_tensor * dst, int64_t n, cudaStream_t stream) {
    int64_t vectors;
    unsigned int blocks;
    geometry(src->data, dst->data, n, &vectors, &blocks);
    narrow_kernel<half_t><<<blocks, THREADS, 0, stream>>>((const float *) src->data, (half_t *) dst->data, n,
                                                          vectors);
}

template <typename half_t>
void widen(const ggml_tensor * src, ggml_tensor * dst, int64_t n, cudaStream_t stream) {
    int64_t vectors;
    unsigned int blocks;
    geometry(src->data, dst->data, n, &vectors, &blocks);
    widen_kernel<half_t><<<blocks, THREADS, 0, stream>>>((const half_t *) src->data, (float *) dst->data, n,
                                                         vectors);
}

}  // namespace

// GGML_OP_CPY's src converted into dst (the patched backend's ggrad_cuda_copy): 1 when done here, 0 for GGML
extern "C" int ggrad_cuda_copy(const ggml_tensor * src, ggml_tensor * dst, void * stream) {
    const int64_t n = elements(src);
    const bool narrowing = src->type == GGML_TYPE_F32;
    if (n != elements(dst) || n == 0 || !packed(src, narrowing ? 4 : 2) || !packed(dst, narrowing ? 2 : 4)) {
        return 0;
    }
    cudaStream_t s = (cudaStream_t) stream;
    if (src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F16) {
        narrow<__half>(src, dst, n, s);
    } else if (src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_BF16) {
        narrow<__nv_bfloat16>(src, dst, n, s);
    } else if (src->type == GGML_TYPE_F16 && dst->type == GGML_TYPE_F32) {
        widen<__half>(src, dst, n, s);
    } else if (src->type == GGML_TYPE_BF16 && dst->type == GGML_TYPE_F32) {
        widen<__nv_bfloat16>(src, dst, n, s);
    } else {
        return 0;
    }
    return 1;
}

// 0 when the conversions have code for the current device, else the CUDA error (twins.cu's kernels_load)
int ggrad_casts_load() {
    const void * kernels[] = {(const void *) narrow_kernel<__half>, (const void *) narrow_kernel<__nv_bfloat16>,
                              (const void *) widen_kernel<__half>, (const void *) widen_kernel<__nv_bfloat16>};
    for (const void * kernel : kernels) {
        cudaFuncAttributes attributes;
        const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);
        if (err != cudaSuccess) {
            return (int) err;
        }
    }
    return 0;
}
