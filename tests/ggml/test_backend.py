"""Devices, device lookup, CPU threads, and (where the GGML build has one) a GPU device."""

import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import ffi, lib
from ggrad.ggml._lib import LIB_DIR


# ---------------------------------------------------------------- listing

def test_cpu_always_listed():
    cpus = [d for d in gg.devices() if d.is_cpu]
    assert len(cpus) == 1
    cpu = cpus[0]
    assert cpu.type == "cpu"
    assert cpu.name == "CPU"
    assert cpu.backend_name == "CPU"
    assert cpu.torch_name == "cpu"
    assert cpu.description  # the processor's name


def test_cpu_memory_is_physical_memory():
    free, total = gg.cpu().memory()
    assert isinstance(free, int) and isinstance(total, int)
    assert 0 < free <= total
    assert total == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert gg.cpu().total_memory == total


def test_devices_match_registry():
    """Every device of every registered backend is listed once, under GGML's name."""
    names = set()
    for r in range(lib.ggml_backend_reg_count()):
        reg = lib.ggml_backend_reg_get(r)
        for i in range(lib.ggml_backend_reg_dev_count(reg)):
            names.add(ffi.string(lib.ggml_backend_dev_name(lib.ggml_backend_reg_dev_get(reg, i))).decode())
    listed = [d.name for d in gg.devices()]
    assert len(listed) == len(set(listed))
    assert set(listed) == names


def test_repr_and_pickle():
    cpu = gg.cpu()
    assert repr(cpu).startswith("Device('cpu', ggml='CPU', kind='cpu'")
    assert "MiB" in repr(cpu)
    assert pickle.loads(pickle.dumps(cpu)) is cpu


def test_backend_started_once():
    cpu = gg.cpu()
    assert cpu.backend == cpu.backend
    assert ffi.string(lib.ggml_backend_name(cpu.backend)).decode() == "CPU"


# ---------------------------------------------------------------- optional backends

def test_has_backend():
    assert gg.has_backend("CPU")
    assert not gg.has_backend("NoSuchBackend")


@pytest.mark.parametrize("backend, library", [("RPC", "libggml-rpc.so"), ("CUDA", "libggml-cuda.so"),
                                              ("Vulkan", "libggml-vulkan.so")])
def test_built_backend_is_registered(backend, library):
    """A backend library in the installed libggml is registered without rebuilding ggrad."""
    if not (LIB_DIR / library).exists():
        assert not gg.has_backend(backend)
        pytest.skip(f"{library} is not in {LIB_DIR}: libggml-python was built without {backend}")
    assert gg.has_backend(backend)


def test_rpc_functions_explain_missing_backend():
    if gg.has_backend("RPC"):
        pytest.skip("RPC is built: tests/ggml/test_rpc.py covers it")
    with pytest.raises(gg.DeviceError, match="GGML_RPC=ON"):
        gg.rpc_add_server("127.0.0.1:1")
    with pytest.raises(gg.DeviceError, match="GGML_RPC=ON"):
        gg.rpc_start_server("127.0.0.1:1")


# ---------------------------------------------------------------- lookup

@pytest.mark.parametrize("name", ["cpu", "CPU", "cpu:0", " cpu ", None])
def test_lookup_cpu(name):
    assert gg.device(name) is gg.cpu()


def test_lookup_device_passes_through():
    assert gg.device(gg.cpu()) is gg.cpu()


@pytest.mark.parametrize("name", ["tpu", "cuda:7", "vulkan:9", "cpu:x", "", "rpc:99"])
def test_lookup_unknown_lists_devices(name):
    with pytest.raises(gg.DeviceError) as info:
        gg.device(name)
    message = str(info.value)
    assert repr(name) in message
    assert "cpu (CPU)" in message  # says what exists
    assert isinstance(info.value, ValueError)


def test_lookup_reads_the_registry_until_a_name_resolves(monkeypatch):
    """A resolved name keeps its Device without rescanning GGML's registry (a loop passing device="cuda"
    pays nothing); a name that did not resolve is looked up again, so a server registered later is found."""
    from ggrad.ggml import backend
    cpu = gg.cpu()
    scans = []
    refresh = backend._refresh
    monkeypatch.setattr(backend, "_refresh", lambda: scans.append(1) or refresh())
    monkeypatch.setattr(backend, "_resolved", {})
    for _ in range(3):
        assert gg.device("cpu:0") is cpu
    assert len(scans) == 1
    for _ in range(2):
        with pytest.raises(gg.DeviceError):
            gg.device("rpc:41")
    assert len(scans) == 3


@pytest.mark.parametrize("name", [0, 1.5, ["cpu"]])
def test_lookup_rejects_non_names(name):
    with pytest.raises(gg.DeviceError, match="name or a Device"):
        gg.device(name)


# ---------------------------------------------------------------- threads

def _threads_seen_by_cpu_op():
    """Run a custom op with as many tasks as GGML allows on the CPU backend; return the nth it saw."""
    seen = set()
    lock = threading.Lock()

    @ffi.callback("void(struct ggml_tensor *, struct ggml_tensor *, int, int, void *)")
    def op(dst, a, ith, nth, userdata):
        with lock:
            seen.add(nth)

    ctx = gg.Context(n_tensors=4)
    a = ctx.new_tensor(gg.f32, (64,))
    out = gg.GTensor(lib.ggml_map_custom1(ctx.ptr, a.ptr, op, lib.GGML_N_TASKS_MAX, ffi.NULL), ctx)
    graph = gg.Graph(size=8)
    graph.build_forward_expand(out)
    buf = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)
    status = lib.ggml_backend_graph_compute(gg.cpu().backend, graph.ptr)
    assert status == lib.GGML_STATUS_SUCCESS
    del buf
    assert len(seen) == 1, seen
    return seen.pop()


@pytest.fixture
def restore_threads():
    before = gg.threads.policy.fixed
    yield
    gg.set_num_threads(before)


def test_default_threads_are_physical_cores():
    """In a fresh interpreter (tests elsewhere may have changed this one's), without GGRAD_NUM_THREADS."""
    code = "import ggrad.ggml as g; print(g.get_num_threads(), g.threads.policy.fixed)"
    env = {k: v for k, v in os.environ.items() if k != "GGRAD_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    cores = set()
    for cpu in os.sched_getaffinity(0):
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/core_cpus_list") as f:
                cores.add(f.read().strip())
        except OSError:
            cores.add(str(cpu))
    assert out.stdout.split()[-2:] == [str(len(cores)), "None"]


@pytest.mark.parametrize("n", [1, 2, 3])
def test_set_num_threads_changes_cpu_backend(restore_threads, n):
    gg.cpu().backend  # already started: the change must reach it
    gg.set_num_threads(n)
    assert gg.get_num_threads() == n
    assert _threads_seen_by_cpu_op() == n


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_set_num_threads_validates(restore_threads, bad):
    before = gg.get_num_threads()
    with pytest.raises(ValueError, match="positive int"):
        gg.set_num_threads(bad)
    assert gg.get_num_threads() == before


def test_set_num_threads_none_returns_to_the_per_graph_choice(restore_threads):
    gg.set_num_threads(3)
    gg.set_num_threads(None)
    assert gg.threads.policy.fixed is None
    assert gg.get_num_threads() == gg.threads.policy.limit


# ---------------------------------------------------------------- scheduler on the CPU

def test_scheduler_cpu_add(rng):
    ctx = gg.Context(n_tensors=4)
    a = ctx.new_tensor(gg.f32, (10, 3))
    b = ctx.new_tensor(gg.f32, (10, 3))
    inputs = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)
    c = gg.GTensor(lib.ggml_add(ctx.ptr, a.ptr, b.ptr), ctx)
    c.set_output()
    graph = gg.Graph(size=8)
    graph.build_forward_expand(c)
    xa = rng.standard_normal((3, 10)).astype(np.float32)
    xb = rng.standard_normal((3, 10)).astype(np.float32)
    gg.set_data(a, xa)
    gg.set_data(b, xb)
    sched = gg.Scheduler("cpu", graph_size=16)
    sched.alloc(graph)
    sched.compute(graph)
    assert sched.n_splits == 1
    assert sched.buffer_size() > 0
    np.testing.assert_array_equal(gg.get_data(c, c.shape), xa + xb)
    del inputs


# ---------------------------------------------------------------- GPUs (CUDA, Vulkan), when built

GPUS = [d for d in gg.devices() if d.kind == "gpu" and d.backend_name != "RPC"]


@pytest.fixture(params=GPUS or [None], ids=[d.torch_name for d in GPUS] or ["no-gpu"])
def gpu(request):
    if request.param is None:
        pytest.skip("this GGML build has no CUDA or Vulkan device (see README: building GGML)")
    return request.param


def test_gpu_listed(gpu):
    assert gpu.backend_name in ("CUDA", "Vulkan")
    assert gg.device(gpu.torch_name) is gpu
    assert gg.device(f"gpu:{GPUS.index(gpu)}") is gpu
    free, total = gpu.memory()
    assert 0 < free <= total


def test_gpu_round_trip_and_compute(gpu, rng):
    ctx = gg.Context(n_tensors=4)
    w = ctx.new_tensor(gg.f32, (64, 16))
    x = ctx.new_tensor(gg.f32, (64, 8))
    inputs = gg.alloc_context_tensors(ctx, gpu.buffer_type)
    assert not inputs.is_host
    y = gg.GTensor(lib.ggml_mul_mat(ctx.ptr, w.ptr, x.ptr), ctx)
    y.set_output()
    graph = gg.Graph(size=8)
    graph.build_forward_expand(y)
    xw = rng.standard_normal((16, 64)).astype(np.float32)
    xx = rng.standard_normal((8, 64)).astype(np.float32)
    gg.set_data(w, xw)
    gg.set_data(x, xx)
    np.testing.assert_array_equal(gg.get_data(w, xw.shape), xw)
    sched = gg.Scheduler(gpu, graph_size=16)
    sched.alloc(graph)
    sched.compute(graph)
    assert lib.ggml_backend_sched_get_tensor_backend(sched.ptr, y.ptr) == gpu.backend
    # GPU backends multiply f32 at reduced precision (TF32/f16 tensor cores): on the H200's CUDA0 the
    # largest error of these length-64 dot products was 0.0067
    np.testing.assert_allclose(gg.get_data(y, y.shape), xx @ xw.T, rtol=1e-2, atol=3e-2)
    del inputs


def test_device_type_str_and_equality_as_torch():
    torch = pytest.importorskip("torch")
    cpu = gg.device("cpu")
    assert (cpu.type, str(cpu)) == (torch.device("cpu").type, str(torch.device("cpu")))
    assert (cpu == "cpu") == (torch.device("cpu") == "cpu")   # a device never equals a string
    assert cpu == gg.device("cpu") and len({cpu, gg.device("cpu")}) == 1
    for d in gg.devices():
        assert d.type == d.torch_name.split(":")[0] and str(d) == d.torch_name
