"""The `cuda` fixture of the tests of ggrad's CUDA twins: each CUDA device of the installed GGML where the twins
are built, else one skipped case saying which is missing."""

import pytest

import ggrad
from ggrad.ggml import gpu_twins


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
