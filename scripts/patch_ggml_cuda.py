"""Insert ggrad's hook into the pinned GGML's CUDA backend: GGML_OP_CUSTOM nodes with a registered CUDA twin.

    python scripts/patch_ggml_cuda.py GGML_SOURCE_DIR     # the sdist's ggml/ folder, patched in place

GGML 0.20.2's CUDA backend runs custom ops (ggml_custom_4d) on the CPU only. These insertions, and nothing
else, let ggrad register a CUDA function for a custom op's CPU function (through the CUDA registry's proc
address `ggrad_cuda_register_custom`): `supports_op` accepts a node that has one, and the compute dispatch
launches it on the backend's stream with GGML's cuBLAS handle, so CUDA graphs capture it with the rest.
A second address, `ggrad_cuda_gemm_half`, gives the twins cuBLAS's half-precision product with float32
accumulation, written in float32 or rounded once to the half type (GGML's own half products accumulate in
float16 or convert both operands to float32 first).
A third, `ggrad_cuda_register_override`, lets ggrad compute any node itself before GGML does: its function
is offered each node and says whether it launched it (ggrad takes the copies and conversions between float32
and the half types, which GGML converts one element a thread, and embedding gradients: ggrad/ggml/cuda/
overrides.cu); every other node stays GGML's.
Each insertion is placed by an anchor line (none of GGML's lines is written here) in a file whose hash is
checked first: another GGML is refused rather than patched blindly. Applying it twice is refused too.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import anchored_patch  # noqa: E402
from anchored_patch import PatchError  # noqa: E402,F401  (raised by patched)

TARGET = "src/ggml-cuda/ggml-cuda.cu"
PINNED_SHA256 = "dd92e1d184604bd3fe11efda208ee1023918c3efe7c40158003f2aeea49241a7"
MARK = "ggrad: CUDA twins of custom ops"

REGISTRY = f"""\
// {MARK} (inserted by ggrad's scripts/patch_ggml_cuda.py). A GGML_OP_CUSTOM node names a CPU
// function; ggrad registers a CUDA function for it, called with the node, the stream and the cuBLAS handle.
typedef void (*ggrad_cuda_custom_t)(struct ggml_tensor * dst, void * stream, void * cublas);
static struct {{ ggml_custom_op_t cpu; ggrad_cuda_custom_t cuda; }} ggrad_cuda_customs[64];
static std::atomic<int> ggrad_cuda_n_customs{{0}};
static std::mutex ggrad_cuda_customs_mutex;

static ggrad_cuda_custom_t ggrad_cuda_custom_of(const struct ggml_tensor * node) {{
    struct ggml_custom_op_params params;
    memcpy(&params, node->op_params, sizeof(params));
    const int n = ggrad_cuda_n_customs.load(std::memory_order_acquire);
    for (int i = 0; i < n; i++) {{
        if (ggrad_cuda_customs[i].cpu == params.fun) {{
            return ggrad_cuda_customs[i].cuda;
        }}
    }}
    return nullptr;
}}

// 0 once `cuda` runs the nodes of `cpu` (again: the last registration counts), -1 when the table is full
static int ggrad_cuda_register_custom(ggml_custom_op_t cpu, ggrad_cuda_custom_t cuda) {{
    std::lock_guard<std::mutex> lock(ggrad_cuda_customs_mutex);
    const int n = ggrad_cuda_n_customs.load(std::memory_order_relaxed);
    for (int i = 0; i < n; i++) {{
        if (ggrad_cuda_customs[i].cpu == cpu) {{
            ggrad_cuda_customs[i].cuda = cuda;
            return 0;
        }}
    }}
    if (n == (int) (sizeof(ggrad_cuda_customs) / sizeof(ggrad_cuda_customs[0]))) {{
        return -1;
    }}
    ggrad_cuda_customs[n].cpu = cpu;
    ggrad_cuda_customs[n].cuda = cuda;
    ggrad_cuda_n_customs.store(n + 1, std::memory_order_release);
    return 0;
}}

// A node ggrad computes itself: the registered function is offered every node first and returns nonzero when
// it launched the node on the stream, 0 to leave it to GGML.
typedef int (*ggrad_cuda_override_t)(struct ggml_tensor * node, void * stream);
static std::atomic<ggrad_cuda_override_t> ggrad_cuda_override{{nullptr}};

static void ggrad_cuda_register_override(ggrad_cuda_override_t override_fn) {{
    ggrad_cuda_override.store(override_fn, std::memory_order_release);
}}

// C = op(A) op(B) + beta C for batches of float16 (or bfloat16) matrices, summed in float32 and written in
// float32, or where `c_half` in A's type, rounded once (cuBLAS, column-major, as cublasGemmStridedBatchedEx
// takes them): the product ggrad's twins build on. 0 on success.
static int ggrad_cuda_gemm_half(void * cublas, void * stream, int bf16, int trans_a, int trans_b, int m, int n,
        int k, const void * a, int lda, long long stride_a, const void * b, int ldb, long long stride_b,
        void * c, int ldc, long long stride_c, int batch, int c_half, float beta) {{
    cublasHandle_t handle = (cublasHandle_t) cublas;
    if (cublasSetStream(handle, (cudaStream_t) stream) != CUBLAS_STATUS_SUCCESS) {{
        return -1;
    }}
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f;
    return (int) cublasGemmStridedBatchedEx(handle, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, a, type, lda, stride_a, b, type, ldb, stride_b,
        &beta, c, c_half ? type : CUDA_R_32F, ldc, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}}

"""
COMPUTE = """\
        case GGML_OP_CUSTOM: // ggrad
            ggrad_cuda_custom_of(dst)(dst, ctx.stream(), ctx.cublas_handle());
            break;
"""
OVERRIDE = """\
    if (ggrad_cuda_override.load(std::memory_order_acquire) != nullptr && // ggrad
            ggrad_cuda_override.load(std::memory_order_acquire)(dst, ctx.stream())) {
        return true;
    }
"""
SUPPORTS = """\
        case GGML_OP_CUSTOM: // ggrad
            return ggrad_cuda_custom_of(op) != nullptr;
"""
PROC = """\
    if (strcmp(name, "ggrad_cuda_register_custom") == 0) { // ggrad
        return (void *)ggrad_cuda_register_custom;
    }
    if (strcmp(name, "ggrad_cuda_gemm_half") == 0) { // ggrad
        return (void *)ggrad_cuda_gemm_half;
    }
    if (strcmp(name, "ggrad_cuda_register_override") == 0) { // ggrad
        return (void *)ggrad_cuda_register_override;
    }
"""

# (text, the line it goes before, the line after which that anchor is searched for)
INSERTIONS = [
    (REGISTRY, "static bool ggml_cuda_compute_forward(", None),
    (COMPUTE, "case GGML_OP_OUT_PROD:", "static bool ggml_cuda_compute_forward("),
    (OVERRIDE, "switch (dst->op) {", "static bool ggml_cuda_compute_forward("),
    (SUPPORTS, "case GGML_OP_OUT_PROD:", "static bool ggml_backend_cuda_device_supports_op("),
    (PROC, 'if (strcmp(name, "ggml_backend_get_features") == 0) {',
     "static void * ggml_backend_cuda_reg_get_proc_address("),
]


def patched(source):
    """The text of ggml-cuda.cu with ggrad's insertions."""
    return anchored_patch.apply(source, MARK, PINNED_SHA256, TARGET, INSERTIONS)


if __name__ == "__main__":
    anchored_patch.main(sys.argv, patched, TARGET, "ggrad's custom-op hook", __doc__)
