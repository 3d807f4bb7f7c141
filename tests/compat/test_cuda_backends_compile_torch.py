"""`ggrad.cuda`, `ggrad.backends`, `ggrad.compile` and the device methods, as PyTorch's on a machine like this one.

On a machine without CUDA (this test's usual one) each call is compared with PyTorch's CPU build: the same
answers, and the same exception type where PyTorch raises. With a CUDA device the calls are checked against
GGML's own view of the device.
"""

import warnings

import pytest

import ggrad
from ggrad import nn

torch = pytest.importorskip("torch")

NEEDS_DEVICE = ["current_device", "get_device_name", "get_device_properties", "mem_get_info", "synchronize", "init"]
COUNTERS = ["memory_allocated", "max_memory_allocated", "memory_reserved"]


@pytest.mark.skipif(ggrad.cuda.is_available() or torch.cuda.is_available(), reason="compares two CPU-only builds")
def test_without_cuda_as_pytorch_without_cuda():
    assert ggrad.cuda.is_available() is torch.cuda.is_available() is False
    assert ggrad.cuda.device_count() == torch.cuda.device_count() == 0
    assert ggrad.cuda.is_bf16_supported() is False and ggrad.cuda.is_initialized() is False
    for name in NEEDS_DEVICE:
        with pytest.raises(AssertionError):
            getattr(torch.cuda, name)()
        with pytest.raises(AssertionError, match="no CUDA device"):
            getattr(ggrad.cuda, name)()
    for name in COUNTERS:
        assert getattr(ggrad.cuda, name)() == getattr(torch.cuda, name)() == 0
    ggrad.manual_seed(3)
    before = ggrad.rand(2).tolist()
    ggrad.manual_seed(3)
    ggrad.cuda.manual_seed(99)                 # ignored without CUDA, as PyTorch's
    ggrad.cuda.manual_seed_all(99)
    assert ggrad.rand(2).tolist() == before
    ggrad.cuda.empty_cache()
    with pytest.raises(ggrad.DeviceError):
        ggrad.ones(2).cuda()
    with pytest.raises(ggrad.DeviceError):
        nn.Linear(2, 2).cuda()


@pytest.mark.skipif(not ggrad.cuda.is_available(), reason="no CUDA device")
def test_with_cuda_as_ggml_sees_it():
    devices = [d for d in ggrad.devices() if d.type == "cuda"]
    assert ggrad.cuda.device_count() == len(devices)
    assert ggrad.cuda.get_device_name() == devices[0].description
    assert ggrad.cuda.get_device_properties(0).total_memory == devices[0].total_memory
    free, total = ggrad.cuda.mem_get_info()
    assert 0 < free <= total
    x = ggrad.ones(1024, 1024).cuda()
    assert x.device.type == "cuda" and nn.Linear(2, 2).cuda().weight.device.type == "cuda"
    y = (x * 2).sum()
    ggrad.cuda.synchronize()
    assert ggrad.cuda.memory_allocated() >= 1024 * 1024 * 4
    assert ggrad.cuda.max_memory_allocated() >= ggrad.cuda.memory_allocated()
    assert y.item() == 2 * 1024 * 1024
    ggrad.cuda.reset_peak_memory_stats()
    ggrad.cuda.empty_cache()
    assert ggrad.cuda.memory_reserved() >= ggrad.cuda.memory_allocated()


def test_backend_flags_are_accepted_and_read_back_as_pytorch():
    for lib in (torch, ggrad):
        assert lib.backends.cudnn.enabled is True and lib.backends.cudnn.benchmark is False
        assert lib.backends.cudnn.deterministic is False
        assert lib.backends.cuda.matmul.allow_fp16_reduced_precision_reduction is True
        assert lib.backends.cuda.flash_sdp_enabled() is True
    assert ggrad.backends.cudnn.is_available() is False
    assert ggrad.backends.mps.is_available() is torch.backends.mps.is_available() is False
    assert ggrad.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
    assert ggrad.get_float32_matmul_precision() == "highest"
    try:
        ggrad.set_float32_matmul_precision("high")
        assert ggrad.backends.cuda.matmul.allow_tf32 is True
        ggrad.backends.cuda.matmul.allow_tf32 = False
        assert ggrad.get_float32_matmul_precision() == "highest"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ggrad.set_float32_matmul_precision("bad")
        assert caught and issubclass(caught[0].category, UserWarning)
        assert ggrad.get_float32_matmul_precision() == "highest"
        with ggrad.backends.cuda.sdp_kernel(enable_flash=False):
            assert not ggrad.backends.cuda.flash_sdp_enabled()
        assert ggrad.backends.cuda.flash_sdp_enabled()
    finally:
        ggrad.set_float32_matmul_precision("highest")


def test_compile_returns_the_model_and_the_step_still_caches_its_graph():
    model = nn.Linear(3, 2)
    assert ggrad.compile(model) is model
    assert ggrad.compile(mode="max-autotune")(model) is model
    fn = ggrad.compile(lambda x: x * 2, fullgraph=True, dynamic=False, backend="inductor")
    assert fn(ggrad.ones(2)).tolist() == [2, 2]
    with pytest.raises(RuntimeError, match="callable"):
        ggrad.compile(5)
    assert ggrad.compiler.is_compiling() is False and ggrad.compiler.disable(fn) is fn


def test_pin_memory_and_cuda_amp_paths():
    x = ggrad.ones(2)
    assert x.pin_memory() is x
    from ggrad.cuda.amp import GradScaler, autocast
    assert GradScaler is ggrad.amp.GradScaler
    with autocast(enabled=False):
        assert (x + 1).dtype == ggrad.float32
