"""The `cuda` and `vulkan` fixtures of the tests of ggrad's CUDA twins and Vulkan shaders: each device of the
backend in the installed GGML where ggrad's kernels for it are built, else one skipped case saying which is
missing."""

import pytest

import ggrad
from ggrad.ggml import gpu_twins, vulkan_shaders


def _cuda_params():
    devices = [d for d in ggrad.devices() if d.backend_name == "CUDA"]
    if not devices:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no CUDA device in this GGML build"), id="no-cuda")]
    if not gpu_twins.library_path().is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason="ggrad's CUDA twins are not built"), id="no-twins")]
    return [pytest.param(d, id=d.torch_name) for d in devices]


@pytest.fixture(params=_cuda_params())
def cuda(request):
    return request.param


def _vulkan_params():
    devices = [d for d in ggrad.devices() if d.backend_name == "Vulkan"]
    if not devices:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no Vulkan device in this GGML build"),
                             id="no-vulkan")]
    if not vulkan_shaders.registered("Vulkan"):
        reason = "ggrad's Vulkan shaders are not built, or GGML's Vulkan backend lacks ggrad's hook"
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-shaders")]
    return [pytest.param(d, id=d.torch_name) for d in devices]


@pytest.fixture(params=_vulkan_params())
def vulkan(request):
    return request.param
