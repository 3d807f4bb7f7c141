"""ggrad's CUDA twins where they cannot run: a GGML without ggrad's hook in its CUDA backend (every build
here: the wheel, the CPU build) registers none, so the lowering keeps GGML's ops. On the device, tests/gpu
checks the twins themselves; here nvcc compiles them (as CI does), and .ci/run applies the hook to the sdist."""

import ctypes
import hashlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import ggrad.ggml as gg
from ggrad.ggml import gpu_twins, kernels

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
    source = (ROOT / "ggrad/ggml/cuda/twins.cu").read_text()
    for name in gpu_twins.TWINS:
        assert kernels.cpu_function(name) is not None
        assert f'extern "C" void ggrad_cuda_{name}(' in source


def test_the_library_is_looked_for_where_the_variable_says(monkeypatch, tmp_path):
    monkeypatch.setenv("GGRAD_CUDA_TWINS", str(tmp_path / "twins.so"))
    assert gpu_twins.library_path() == tmp_path / "twins.so"
    monkeypatch.delenv("GGRAD_CUDA_TWINS")
    assert gpu_twins.library_path().name == "_cuda_twins.so"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_the_twins_compile_with_nvcc(tmp_path):
    """A twin that does not compile fails here, before any GPU machine sees it (nvcc 13 on CI's machine)."""
    out = tmp_path / "twins.so"
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(["bash", str(ROOT / "scripts/build_cuda_twins.sh"), str(out)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    symbols = subprocess.run(["nm", "-D", str(out)], capture_output=True, text=True).stdout
    for name in gpu_twins.TWINS + ("twins_init",):
        assert f" T ggrad_cuda_{name}" in symbols
    if not gg.has_backend("CUDA"):   # no GPU here: the kernels have no device to load on, and init says so
        assert ctypes.CDLL(str(out)).ggrad_cuda_twins_init(None) != 0


def _patch_script():
    spec = importlib.util.spec_from_file_location("patch_ggml_cuda", ROOT / "scripts/patch_ggml_cuda.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hook_is_refused_for_another_ggml_or_twice():
    """The insertions go only into the pinned file (its hash; .ci/run applies them to the real sdist)."""
    patch = _patch_script()
    with pytest.raises(patch.PatchError, match="not the pinned"):
        patch.patched("static bool ggml_cuda_compute_forward(ggml_backend_cuda_context & ctx) {\n")
    with pytest.raises(patch.PatchError, match="already patched"):
        patch.patched(f"// {patch.MARK}\n")


def test_the_hook_inserts_lines_and_changes_none(monkeypatch):
    """Every line of the original stays, in order; the insertions sit where their anchors say."""
    patch = _patch_script()
    source = ("static bool ggml_cuda_compute_forward(x) {\n    switch (dst->op) {\n        case GGML_OP_OUT_PROD:\n"
              "}\nstatic bool ggml_backend_cuda_device_supports_op(y) {\n        case GGML_OP_OUT_PROD:\n}\n"
              "static void * ggml_backend_cuda_reg_get_proc_address(r, n) {\n"
              '    if (strcmp(name, "ggml_backend_get_features") == 0) {\n    }\n}\n')
    monkeypatch.setattr(patch, "PINNED_SHA256", hashlib.sha256(source.encode()).hexdigest())
    out = patch.patched(source).splitlines()
    kept = iter(out)
    assert all(any(line == o for o in kept) for line in source.splitlines())   # a subsequence: nothing changed
    text = "\n".join(out)
    assert text.index("ggrad_cuda_custom_of(dst)") < text.index("device_supports_op")
    assert text.index("ggrad_cuda_custom_of(op)") > text.index("device_supports_op")
    assert text.index('"ggrad_cuda_gemm_half"') > text.index("get_proc_address")
