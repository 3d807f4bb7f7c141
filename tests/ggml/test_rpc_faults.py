"""A dead, silent or lying RPC server is a clear error in the client, never an abort or a hang.

GGML's RPC client aborts its process on any failed read or write; ggrad puts a relay in front of it
(ggrad.ggml.rpc.relay). Each scenario runs in a subprocess, which must print OK and exit 0.
"""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import ggrad.ggml as gg

pytestmark = pytest.mark.skipif(not gg.has_backend("RPC"), reason="this libggml-python has no RPC backend")

_COMMON = """
import atexit, socket, struct, subprocess, sys, threading, time
import numpy as np
import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim
from ggrad.ggml.rpc import protocol as P
ggrad.set_num_threads(1)

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def _stop(proc):   # a ggrad.rpc_server does not watch its stdin: without this it outlives the test
    if proc.poll() is None:
        proc.kill()
        proc.wait()

def start_server(kind, port, *extra):
    module = "ggrad.rpc_server" if kind == "ggrad" else "ggrad.ggml.rpc.worker"
    args = ["--port", str(port)] if kind == "ggrad" else [f"127.0.0.1:{port}"]
    proc = subprocess.Popen([sys.executable, "-m", module, *args, "--threads", "1", *extra], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    atexit.register(_stop, proc)
    P.wait_listening(port, proc)
    return proc

def added(kind):   # (endpoint, server process, device) of a fresh server of `kind` added here
    port = free_port()
    server = start_server(kind, port)
    endpoint = f"127.0.0.1:{port}"
    return endpoint, server, gg.rpc_add_server(endpoint)[0]

def expect_lost(fn, endpoint):
    try:
        fn()
    except gg.DeviceLostError as e:
        assert isinstance(e, RuntimeError) and endpoint in str(e), e
        return str(e)
    raise AssertionError("no DeviceLostError")
"""


def _run(body, timeout=120):
    script = _COMMON + textwrap.dedent(body) + "\nprint('OK')\n"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), \
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.parametrize("kind", ["ggrad", "ggml"])
def test_server_killed_mid_training(kind):
    """SIGKILL of the server between steps: reads and steps raise DeviceLostError naming it; the CPU works."""
    out = _run(f"""
        endpoint, server, dev = added({kind!r})
        assert dev.description == endpoint
        ggrad.manual_seed(0)
        model = nn.Linear(8, 4).to(dev)
        opt = optim.SGD(model.parameters(), lr=0.1)
        x = ggrad.tensor(np.ones((16, 8), np.float32), device=dev)
        held = None
        for step in range(100):
            if step == 3:
                server.kill()
                server.wait()
                time.sleep(0.3)
            try:
                loss = (model(x) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                value = loss.item()
            except gg.DeviceLostError as e:
                assert endpoint in str(e) and step == 3, (step, e)
                break
            held = model.weight          # computed on the server, still referenced
        else:
            raise AssertionError("training went on after the server died")
        print(expect_lost(held.numpy, endpoint))
        expect_lost(lambda: (held * 2).numpy(), endpoint)
        cpu = ggrad.tensor(np.arange(4, dtype=np.float32))
        assert (cpu * 2).numpy().tolist() == [0, 2, 4, 6]   # other devices carry on
    """)
    assert "failed:" in out


def test_server_killed_before_reading_a_computed_tensor():
    _run("""
        endpoint, server, dev = added("ggml")
        y = ggrad.tensor(np.ones(8, np.float32), device=dev) * 3
        y.realize()
        server.kill()
        server.wait()
        expect_lost(y.numpy, endpoint)
        expect_lost(y.numpy, endpoint)      # and again: the device stays lost
    """)


@pytest.mark.parametrize("peer", ["silent", "garbage", "hangs-up"])
def test_peer_that_is_not_an_rpc_server(peer):
    """A TCP peer that says nothing, garbage, or hangs up: DeviceError at rpc_add_server, within the timeout."""
    _run(f"""
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        held = []
        def serve():
            while True:
                conn, _ = listener.accept()
                if {peer!r} == "garbage":
                    conn.sendall(b"HTTP/1.0 400 Bad Request\\r\\n\\r\\n" * 4)
                    held.append(conn)
                elif {peer!r} == "silent":
                    held.append(conn)
                else:
                    conn.close()
        threading.Thread(target=serve, daemon=True).start()
        t0 = time.monotonic()
        try:
            gg.rpc_add_server(f"127.0.0.1:{{port}}", connect_timeout=1.0)
        except gg.DeviceError as e:
            assert f"127.0.0.1:{{port}}" in str(e), e
            print(e)
        else:
            raise AssertionError("a non-RPC peer was accepted")
        assert time.monotonic() - t0 < 15, time.monotonic() - t0
        assert not [d for d in gg.devices() if d.backend_name == "RPC"]
    """)


@pytest.mark.parametrize("lie", ["base-zero", "short-buffer", "hangs"])
def test_server_that_lies_after_the_handshake(lie):
    """A peer that passes HELLO, then gives a buffer base of 0 or a buffer smaller than asked (GGML_ASSERTs in
    GGML's client), or never answers a read (GGML's client waits forever)."""
    _run(f"""
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        lie = {lie!r}
        answers = {{P.DEVICE_COUNT: struct.pack("<I", 1), P.GET_ALIGNMENT: struct.pack("<Q", 32),
                    P.GET_MAX_SIZE: struct.pack("<Q", 1 << 40), P.HELLO: P.hello_reply(),
                    P.GET_DEVICE_MEMORY: struct.pack("<QQ", 1 << 30, 1 << 30),
                    P.BUFFER_GET_BASE: struct.pack("<Q", 0 if lie == "base-zero" else 1 << 20)}}
        def liar(conn):
            while True:
                try:
                    cmd, size = P.recv_request_header(conn)
                except ConnectionError:
                    return
                payload = P.recv_exact(conn, size)
                if cmd == P.ALLOC_BUFFER:
                    asked = struct.unpack_from("<Q", payload, 4)[0]
                    P.send_reply(conn, struct.pack("<QQ", 0x1000, asked // 2 if lie == "short-buffer" else asked))
                elif cmd == P.GET_TENSOR:
                    time.sleep(3600)
                elif cmd != P.SET_TENSOR:
                    P.send_reply(conn, answers[cmd])
        def serve():
            while True:
                threading.Thread(target=liar, args=(listener.accept()[0],), daemon=True).start()
        threading.Thread(target=serve, daemon=True).start()
        endpoint = f"127.0.0.1:{{port}}"
        dev = gg.rpc_add_server(endpoint, timeout=1.0)[0]
        def use():
            ctx = gg.Context(n_tensors=1)
            t = ctx.new_tensor(gg.f32, (4,))
            buf = gg.alloc_context_tensors(ctx, dev.buffer_type)
            gg.set_data(t, np.ones(4, np.float32))
            gg.get_data(t)
        t0 = time.monotonic()
        message = expect_lost(use, endpoint)
        assert time.monotonic() - t0 < 30
        want = {{"base-zero": "buffer base of 0", "short-buffer": "bad reply: a buffer of", "hangs": "within 1 s"}}
        assert want[lie] in message, message
        expect_lost(lambda: (ggrad.tensor([1.0], device=dev) * 2).numpy(), endpoint)
    """)


def test_rpc_start_server_bad_endpoint_raises(free_port):
    for bad in ("bad endpoint", "127.0.0.1", "127.0.0.1:99999", ":50052", 50052):
        with pytest.raises(gg.DeviceError, match="endpoint"):
            gg.rpc_start_server(bad)
    with pytest.raises(gg.DeviceError, match="cannot listen"), pytest.warns(UserWarning, match="no authentication"):
        gg.rpc_start_server("256.1.1.1:50052")


def test_rpc_add_server_bad_endpoint_raises():
    with pytest.raises(gg.DeviceError, match="endpoint"):
        gg.rpc_add_server("no port here")


def test_allocation_over_the_server_cap_is_a_memory_error():
    """The proxy's "allocation failed" answer reaches ggrad as MemoryError; the failed compute is rolled back
    (rollback.py): the tensor stays pending and a read of it fails again, and once it is dropped the device
    keeps working; the server is gone when its client is."""
    out = _run("""
        port = free_port()
        server = start_server("ggrad", port, "--max-buffer-bytes", str(8 << 20))
        dev = gg.rpc_add_server(f"127.0.0.1:{port}")[0]
        big = ggrad.zeros(4 << 20, device=dev)     # 16 MiB > the 8 MiB cap
        for attempt in range(2):
            try:
                big.numpy()
            except MemoryError as e:
                print(e)
            else:
                raise AssertionError("allocated past the cap")
        del big
        small = ggrad.tensor(np.arange(4, dtype=np.float32), device=dev) * 2
        assert small.numpy().tolist() == [0, 2, 4, 6]
        print("SERVER", server.pid)
    """)
    pid = int(out.split("SERVER ")[1].split()[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"the rpc_server {pid} outlived its client")


def test_every_client_request_after_the_server_is_gone():
    """Once the server is gone, each of GGML's client requests gets a reply it takes without aborting."""
    _run("""
        endpoint, server, dev = added("ggml")
        ctx = gg.Context(n_tensors=4)
        a = ctx.new_tensor(gg.f32, (64,))
        b = ctx.new_tensor(gg.f32, (64,))
        kept = gg.alloc_context_tensors(ctx, dev.buffer_type)
        server.kill()
        server.wait()
        time.sleep(0.3)
        lib = gg.lib
        free, total = dev.memory()                                       # GET_DEVICE_MEMORY
        kept.clear(0)                                                    # BUFFER_CLEAR
        lib.ggml_backend_tensor_memset(a.ptr, 0, 0, 16)                  # MEMSET_TENSOR
        lib.ggml_backend_tensor_copy(a.ptr, b.ptr)                       # COPY_TENSOR
        qctx = gg.Context(n_tensors=1)
        q = qctx.new_tensor(gg.as_dtype("q8_0"), (96, 2))                # GET_ALLOC_SIZE, INIT_TENSOR
        qbuf = gg.alloc_context_tensors(qctx, dev.buffer_type)           # ALLOC_BUFFER, BUFFER_GET_BASE
        big = gg.Buffer(dev.buffer_type, 12 << 20)
        expect_lost(lambda: gg.set_data(a, np.ones(64, np.float32)), endpoint)
        raw = np.ones(11 << 18, np.float32)                              # 11 MiB: SET_TENSOR_HASH
        t = gg.Context(n_tensors=1).new_tensor(gg.f32, (raw.size,))
        big.place(t)
        lib.ggml_backend_tensor_set(t.ptr, gg.ffi.from_buffer("void *", raw), 0, raw.nbytes)
        gctx = gg.Context(n_tensors=8)
        x = gctx.new_tensor(gg.f32, (8,))
        y = gg.GTensor(lib.ggml_sqr(gctx.ptr, x.ptr), gctx)
        y.set_output()
        xbuf = gg.alloc_context_tensors(gctx, dev.buffer_type)
        graph = gg.Graph(16)
        graph.build_forward_expand(y)
        sched = gg.Scheduler(dev, graph_size=64)
        sched.alloc(graph)
        expect_lost(lambda: sched.compute(graph), endpoint)              # GRAPH_COMPUTE
        expect_lost(lambda: gg.get_data(y), endpoint)                    # GET_TENSOR
        del kept, qbuf, xbuf, sched                                      # FREE_BUFFER
        big.free()
    """)
