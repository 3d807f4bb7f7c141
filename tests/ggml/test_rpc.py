"""GGML's RPC backend: a server in a subprocess, its device in devices(), graphs computed on it.

Runs only where libggml-python was built with -DGGML_RPC=ON (see README); skipped otherwise.
"""


import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import ffi, lib

pytestmark = pytest.mark.skipif(
    not gg.has_backend("RPC"),
    reason="this libggml-python has no RPC backend; build it with "
           "CMAKE_ARGS=-DGGML_RPC=ON pip install --force-reinstall --no-deps --no-cache-dir "
           "--no-binary libggml-python libggml-python==0.20.2.post1")


def test_rpc_device_listed_with_memory(server, rpc_device):
    assert rpc_device in gg.devices()
    assert rpc_device.backend_name == "RPC"
    assert rpc_device.description == server
    assert rpc_device.name.startswith("RPC")
    free, total = rpc_device.memory()
    assert total > 0 and 0 < free <= total
    # the server serves the CPU, so it reports the CPU's memory
    assert total == gg.cpu().total_memory


def test_rpc_device_lookup_by_short_name(rpc_device):
    assert gg.device(rpc_device.torch_name) is rpc_device
    assert gg.device(rpc_device.name) is rpc_device
    assert rpc_device.torch_name.startswith("rpc:")


def test_rpc_add_server_twice_adds_nothing(server, rpc_device):
    n_regs = lib.ggml_backend_reg_count()
    again = gg.rpc_add_server(server)
    assert again == [rpc_device]
    assert lib.ggml_backend_reg_count() == n_regs
    assert sum(d.backend_name == "RPC" for d in gg.devices()) == 1


def test_rpc_add_server_nobody_listening(free_port):
    with pytest.raises(gg.DeviceError, match="could not add RPC server"):
        gg.rpc_add_server(f"127.0.0.1:{free_port()}")


def test_rpc_buffer_round_trip(rpc_device, rng):
    ctx = gg.Context(n_tensors=1)
    t = ctx.new_tensor(gg.f32, (7, 3))
    buf = gg.alloc_context_tensors(ctx, rpc_device.buffer_type)
    assert not buf.is_host
    x = rng.standard_normal((3, 7)).astype(np.float32)
    gg.set_data(t, x)
    np.testing.assert_array_equal(gg.get_data(t, x.shape), x)
    with pytest.raises(gg.DTypeError, match="device memory"):
        gg.view(t)


def test_rpc_add_on_backend(rpc_device, rng):
    """c = a * b + a computed by the RPC backend itself; all tensors in one RPC buffer."""
    ctx = gg.Context(n_tensors=8)
    a = ctx.new_tensor(gg.f32, (16, 4))
    b = ctx.new_tensor(gg.f32, (16, 4))
    c = gg.GTensor(lib.ggml_add(ctx.ptr, lib.ggml_mul(ctx.ptr, a.ptr, b.ptr), a.ptr), ctx)
    graph = gg.Graph(size=16)
    graph.build_forward_expand(c)
    buf = gg.alloc_context_tensors(ctx, rpc_device.buffer_type)
    xa = rng.standard_normal((4, 16)).astype(np.float32)
    xb = rng.standard_normal((4, 16)).astype(np.float32)
    gg.set_data(a, xa)
    gg.set_data(b, xb)
    status = lib.ggml_backend_graph_compute(rpc_device.backend, graph.ptr)
    assert status == lib.GGML_STATUS_SUCCESS
    np.testing.assert_allclose(gg.get_data(c, c.shape), xa * xb + xa, rtol=1e-6)
    del buf


def test_rpc_mul_mat_through_scheduler(rpc_device, rng):
    """mul_mat through ggml_backend_sched over [RPC, CPU], inputs and result on the RPC device."""
    m, k, n = 5, 32, 3
    ctx = gg.Context(n_tensors=4)
    w = ctx.new_tensor(gg.f32, (k, m))  # numpy (m, k)
    x = ctx.new_tensor(gg.f32, (k, n))  # numpy (n, k)
    inputs = gg.alloc_context_tensors(ctx, rpc_device.buffer_type)
    y = gg.GTensor(lib.ggml_mul_mat(ctx.ptr, w.ptr, x.ptr), ctx)  # ne (m, n): numpy (n, m) = x @ w.T
    y.set_output()
    graph = gg.Graph(size=16)
    graph.build_forward_expand(y)
    xw = rng.standard_normal((m, k)).astype(np.float32)
    xx = rng.standard_normal((n, k)).astype(np.float32)
    gg.set_data(w, xw)
    gg.set_data(x, xx)
    sched = gg.Scheduler(rpc_device, graph_size=64)
    sched.alloc(graph)
    sched.compute(graph)
    assert lib.ggml_backend_sched_get_tensor_backend(sched.ptr, y.ptr) == rpc_device.backend
    np.testing.assert_allclose(gg.get_data(y, y.shape), xx @ xw.T, rtol=1e-5, atol=1e-5)
    del inputs


def test_rpc_large_upload_round_trip(rpc_device, rng):
    """Over 10 MiB: GGML asks SET_TENSOR_HASH first, then streams the data (relay and proxy pipe it)."""
    ctx = gg.Context(n_tensors=1)
    t = ctx.new_tensor(gg.f32, (3 << 20,))
    buf = gg.alloc_context_tensors(ctx, rpc_device.buffer_type)
    x = rng.standard_normal(3 << 20).astype(np.float32)
    gg.set_data(t, x)
    np.testing.assert_array_equal(gg.get_data(t, x.shape), x)
    del buf


def test_rpc_quantized_tensor_round_trip(rpc_device, rng):
    """A q8_0 row that is not a multiple of 512: GGML asks the server for its size and to initialise it."""
    ctx = gg.Context(n_tensors=1)
    t = ctx.new_tensor(gg.as_dtype("q8_0"), (96, 3))
    buf = gg.alloc_context_tensors(ctx, rpc_device.buffer_type)
    x = rng.standard_normal((3, 96)).astype(np.float32)
    gg.set_data(t, x)
    np.testing.assert_allclose(gg.get_data(t, x.shape), x, atol=0.05)
    del buf
