"""ggrad's CUDA twins where they cannot run: a GGML without ggrad's hook in its CUDA backend (every build
here: the wheel, the CPU build) registers none, so the lowering keeps GGML's ops. On the device, tests/gpu
checks the twins themselves; here nvcc compiles them (as CI does), and .ci/run applies the hook to the sdist."""

import ctypes
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import gpu_twins, kernels, ops

from patch_checks import check_refusals, patch_script, patched_stand_in

ROOT = pathlib.Path(__file__).parents[2]


def test_no_twins_without_the_patched_cuda_backend():
    if gg.has_backend("CUDA"):
        pytest.skip("a CUDA build: tests/gpu checks its twins")
    assert gpu_twins.registered("CUDA") == frozenset()
    assert gg.build_info()["cuda_twins"] == []


def test_other_backends_never_have_twins():
    assert gpu_twins.registered("Vulkan") == frozenset()
    assert gpu_twins.registered("CPU") == frozenset()


def test_every_twin_has_a_cpu_kernel_and_a_cuda_function():
    source = "".join(path.read_text() for path in sorted((ROOT / "ggrad/ggml/cuda").glob("*.cu")))
    for name in gpu_twins.TWINS:
        assert kernels.cpu_function(name) is not None
        assert f'extern "C" void ggrad_cuda_{name}(' in source


def test_the_library_is_looked_for_where_the_variable_says(monkeypatch, tmp_path):
    monkeypatch.setenv("GGRAD_CUDA_TWINS", str(tmp_path / "twins.so"))
    assert gpu_twins.library_path() == tmp_path / "twins.so"
    monkeypatch.delenv("GGRAD_CUDA_TWINS")
    assert gpu_twins.library_path().name == "_cuda_twins.so"


@pytest.fixture(scope="module")
def built_twins(tmp_path_factory):
    """The twins' library built once by scripts/build_cuda_twins.sh (nvcc: about half a minute with flash
    attention's kernels), or the build's failure."""
    out = tmp_path_factory.mktemp("twins") / "twins.so"
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(["bash", str(ROOT / "scripts/build_cuda_twins.sh"), str(out)], env=env,
                          capture_output=True, text=True)
    return out, done


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_the_twins_compile_with_nvcc(built_twins):
    """A twin that does not compile fails here, before any GPU machine sees it (nvcc 13 on CI's machine): the
    flash attention kernels (cuda/flash_attn.cu) with the others, into one library."""
    out, done = built_twins
    assert done.returncode == 0, done.stderr
    symbols = subprocess.run(["nm", "-D", str(out)], capture_output=True, text=True).stdout
    for name in gpu_twins.TWINS + (gpu_twins.OVERRIDES, "twins_init"):
        assert f" T ggrad_cuda_{name}" in symbols
    if not gg.has_backend("CUDA"):   # no GPU here: the kernels have no device to load on, and init says so
        assert ctypes.CDLL(str(out)).ggrad_cuda_twins_init(None) != 0


def test_the_hook_is_refused_for_another_ggml_or_twice():
    check_refusals(patch_script("patch_ggml_cuda"),
                   "static bool ggml_cuda_compute_forward(ggml_backend_cuda_context & ctx) {\n")


def test_the_hook_inserts_lines_and_changes_none(monkeypatch):
    """Every line of the original stays, in order; the insertions sit where their anchors say."""
    patch = patch_script("patch_ggml_cuda")
    source = ("static bool ggml_cuda_compute_forward(x) {\n    switch (dst->op) {\n        case GGML_OP_OUT_PROD:\n"
              "}\nstatic bool ggml_backend_cuda_device_supports_op(y) {\n        case GGML_OP_OUT_PROD:\n}\n"
              "static void * ggml_backend_cuda_reg_get_proc_address(r, n) {\n"
              '    if (strcmp(name, "ggml_backend_get_features") == 0) {\n    }\n}\n')
    text = patched_stand_in(patch, monkeypatch, source)
    assert text.index("ggrad_cuda_custom_of(dst)") < text.index("device_supports_op")
    assert text.index("ggrad_cuda_custom_of(op)") > text.index("device_supports_op")
    assert text.index('"ggrad_cuda_gemm_half"') > text.index("get_proc_address")
    assert text.index('"ggrad_cuda_register_override"') > text.index("get_proc_address")
    # every node the backend computes goes to ggrad's overrides first
    assert text.index("ggml_cuda_compute_forward(x)") < text.index("ggrad_cuda_override.load") \
        < text.index("switch (dst->op)")


def _cublas_reference(calls):
    """cublasGemmStridedBatchedEx's contract on host memory (column-major, op(A) m x k, op(B) k x n, C m x n,
    float32 sums written to C), as the patched backend's ggrad_cuda_gemm_half runs it, for the CUDA twin's
    host side to call instead of the GPU."""
    def read(address, bf16, rows, cols, ld, transposed):
        stored = (cols, rows) if transposed else (rows, cols)   # the column-major matrix in memory
        count = (stored[1] - 1) * ld + stored[0]
        raw = np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(address)).copy()
        values = ((raw.astype(np.uint32) << 16).view(np.float32) if bf16
                  else raw.view(np.float16).astype(np.float32))
        matrix = np.lib.stride_tricks.as_strided(values, stored[::-1], (ld * 4, 4)).T   # (stored rows, cols)
        return matrix.T if transposed else matrix

    def gemm(cublas, stream, bf16, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c,
             batch, c_half, beta):
        calls.append((trans_a, trans_b, m, n, k, lda, ldb, c_half, beta, batch))
        for i in range(batch):
            op_a = read(a + 2 * i * stride_a, bf16, m, k, lda, trans_a).astype(np.float64)
            op_b = read(b + 2 * i * stride_b, bf16, k, n, ldb, trans_b).astype(np.float64)
            sums = (op_a @ op_b).T.astype(np.float32)   # (n, m)
            if c_half:   # rounded once to A's type (float16 here: bfloat16's rounding is checked on the GPU)
                assert not bf16 and beta == 0.0
                out = np.ctypeslib.as_array((ctypes.c_uint16 * (ldc * n)).from_address(c + 2 * i * stride_c))
                sums = sums.astype(np.float16).view(np.uint16)
                np.lib.stride_tricks.as_strided(out, (n, m), (ldc * 2, 2))[...] = sums
                continue
            out = np.ctypeslib.as_array((ctypes.c_float * (ldc * n)).from_address(c + 4 * i * stride_c))
            np.lib.stride_tricks.as_strided(out, (n, m), (ldc * 4, 4))[...] = sums
        return 0
    return ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int] * 6, ctypes.c_void_p,
                            ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,
                            ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_int, ctypes.c_int,
                            ctypes.c_float)(gemm)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("case", ["plain", "a_transposed", "b_transposed", "both", "batched", "broadcast", "grouped",
                                  "one_row", "rounded", "column_sums"])
def test_the_cuda_half_product_calls_cublas_as_its_cpu_twin_computes(built_twins, runner, dtype, case):
    """The CUDA twin's host side (operands as cuBLAS takes them: transposes, leading dimensions, batches and
    their broadcast) run with a reference of cuBLAS's product on host memory: the same values as the node's
    CPU twin, for every layout the lowering passes (no GPU needed: only the product itself is cuBLAS's)."""
    out, built = built_twins
    assert built.returncode == 0, built.stderr
    twins = ctypes.CDLL(str(out))
    calls = []
    reference = _cublas_reference(calls)
    twins.ggrad_cuda_twins_init(ctypes.cast(reference, ctypes.c_void_p))   # no GPU: its error is ignored here
    shapes = {"plain": ((20, 30), (12, 30)), "a_transposed": ((30, 20), (12, 30)),
              "b_transposed": ((20, 30), (30, 12)), "both": ((30, 20), (30, 12)),
              "batched": ((3, 20, 30), (3, 12, 30)), "broadcast": ((2, 1, 6, 10), (2, 4, 5, 10)),
              "grouped": ((2, 2, 6, 10), (2, 4, 5, 10)), "one_row": ((1, 30), (12, 30)),
              "rounded": ((3, 20, 30), (3, 12, 30)), "column_sums": ((30, 20), (1, 30))}[case]
    if case == "rounded" and dtype == "bf16":
        pytest.skip("the reference rounds to float16 only")
    a_np, b_np = [(np.random.default_rng(i).integers(-8, 9, s) / 4).astype(np.float32) for i, s in enumerate(shapes)]

    def build(ctx, x, y):
        # column_sums: HalfColumnSums' product, a column of ones against rows read transposed
        x = ops.transpose(ctx, x) if case in ("a_transposed", "both", "column_sums") else x
        y = ops.transpose(ctx, y) if case in ("b_transposed", "both") else y
        return kernels.matmul_half(ctx, x, y, rounded=case == "rounded")
    (want,), (node,) = runner.run(build, [(a_np, dtype), (b_np, dtype)])   # by the CPU twin
    if case == "rounded":
        assert want.dtype == np.float16   # the twin writes the half result (the sums exact in it)
    gg.set_data(node, np.zeros_like(want))   # then the CUDA twin's host side writes over the same node
    twins.ggrad_cuda_matmul_half(ctypes.c_void_p(int(gg.ffi.cast("uintptr_t", node.ptr))), None, None)
    np.testing.assert_array_equal(gg.get_data(node), want)
    assert calls and all(call[-1] >= 1 for call in calls)
