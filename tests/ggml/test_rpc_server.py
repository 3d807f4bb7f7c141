"""`python -m ggrad.rpc_server` against hostile raw-socket clients: each is disconnected, the server serves on.

GGML's own server aborts on a GET_TENSOR outside its buffer, commits any ALLOC_BUFFER size and serves one
client at a time; these tests speak the protocol byte by byte (ggrad.ggml.rpc.protocol's layouts) to a
server in a subprocess and check that the next client is served correctly.
"""

import select
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import lib
from ggrad.ggml.rpc import protocol as P

pytestmark = pytest.mark.skipif(not gg.has_backend("RPC"), reason="this libggml-python has no RPC backend")

CAP = 64 << 20
IDLE = 2.0


def _start(port, *extra):
    proc = subprocess.Popen([sys.executable, "-m", "ggrad.rpc_server", "--port", str(port), "--threads", "1",
                             "--max-buffer-bytes", str(CAP), "--idle-timeout", str(IDLE), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    P.wait_listening(port, proc)
    return proc


@pytest.fixture(scope="module")
def safe_server(free_port):
    port = free_port()
    proc = _start(port, "--max-clients", "2")
    yield port, proc
    proc.kill()
    proc.wait()


class Client:
    """A raw protocol client: requests by hand, replies read and sized as GGML's client would."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        assert self.call(P.HELLO, bytes(P.CONN_CAPS_SIZE), 28)[:3] == bytes(P.PROTO_VERSION)

    def call(self, cmd, payload, reply=None):
        P.send_request(self.sock, cmd, payload)
        if reply is None:
            return None
        assert P.recv_u64(self.sock) == reply
        return P.recv_exact(self.sock, reply)

    def alloc(self, size):
        ptr, got = struct.unpack("<QQ", self.call(P.ALLOC_BUFFER, struct.pack("<IQ", 0, size), 16))
        base = struct.unpack("<Q", self.call(P.BUFFER_GET_BASE, struct.pack("<Q", ptr), 8))[0] if ptr else 0
        return ptr, got, base

    def closed(self):
        """Whether the server closed this connection (within the socket's timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def tensor(buffer, data, ne, op=0, src=(), name=b"t", tid=None):
    """An f32 rpc_tensor record of shape `ne` (GGML order), contiguous, at address `data`."""
    t = np.zeros((), P.TENSOR)
    t["id"], t["type"], t["buffer"], t["data"], t["op"], t["name"] = tid or data or 1, 0, buffer, data, op, name
    t["flags"] = lib.GGML_TENSOR_FLAG_COMPUTE if op else 0
    t["ne"] = list(ne) + [1] * (4 - len(ne))
    nb = [4]
    for n in t["ne"][:3]:
        nb.append(nb[-1] * int(n))
    t["nb"] = nb
    t["src"][:len(src)] = src
    return t.tobytes()


def _q4_0(record):
    """The record as a q4_0 tensor (32 values a block): a row of 5 is not whole blocks."""
    t = np.frombuffer(record, P.TENSOR).copy()
    t["type"] = lib.GGML_TYPE_Q4_0
    return t.tobytes()


def round_trip(port):
    """A well-behaved client: upload 256 floats, read them back."""
    c = Client(port)
    ptr, _, base = c.alloc(1024)
    x = np.arange(256, dtype=np.float32)
    c.call(P.SET_TENSOR, tensor(ptr, base, [256]) + struct.pack("<Q", 0) + x.tobytes())
    got = c.call(P.GET_TENSOR, tensor(ptr, base, [256]) + struct.pack("<QQ", 0, 1024), 1024)
    c.sock.close()
    return np.array_equal(np.frombuffer(got, np.float32), x)


def test_well_behaved_client(safe_server):
    assert round_trip(safe_server[0])


def test_get_tensor_outside_its_buffer_disconnects_only_that_client(safe_server):
    port, proc = safe_server
    c = Client(port)
    ptr, _, base = c.alloc(1024)
    c.call(P.GET_TENSOR, tensor(ptr, base, [1 << 20]) + struct.pack("<QQ", 0, 4096))   # GGML would abort
    assert c.closed()
    assert proc.poll() is None and round_trip(port)


@pytest.mark.parametrize("make", [
    lambda ptr, base: (P.SET_TENSOR, tensor(ptr, base + 512, [256]) + struct.pack("<Q", 0) + bytes(1024)),
    lambda ptr, base: (P.SET_TENSOR, tensor(ptr, base, [1]) + struct.pack("<Q", 0) + bytes(1024)),
    lambda ptr, base: (P.GET_TENSOR, tensor(ptr, base, [4]) + struct.pack("<QQ", 8, 16)),
    lambda ptr, base: (P.GET_TENSOR, _q4_0(tensor(ptr, base, [5])) + struct.pack("<QQ", 0, 4)),
    lambda ptr, base: (P.COPY_TENSOR, tensor(ptr, base, [256]) + tensor(ptr, base + 4, [256])),
    lambda ptr, base: (P.GET_TENSOR, tensor(ptr, base - 64, [16]) + struct.pack("<QQ", 0, 64)),
    lambda ptr, base: (P.FREE_BUFFER, struct.pack("<Q", ptr + 8)),
    lambda ptr, base: (P.GRAPH_RECOMPUTE, struct.pack("<I", 0)),
    lambda ptr, base: (P.ALLOC_BUFFER, struct.pack("<IQ", 7, 64)),
    lambda ptr, base: (P.HELLO, bytes(P.CONN_CAPS_SIZE)),
    lambda ptr, base: (200, b""),
], ids=["set-past-end", "set-past-tensor", "get-past-tensor", "partial-block", "copy-past-end", "get-before-start",
        "free-unknown", "recompute-nothing", "bad-device", "second-hello", "unknown-command"])
def test_invalid_requests_disconnect(safe_server, make):
    port, proc = safe_server
    c = Client(port)
    ptr, _, base = c.alloc(1024)
    c.call(*make(ptr, base))
    assert c.closed()
    assert proc.poll() is None and round_trip(port)


def test_wrong_size_and_oversized_messages_are_not_read(safe_server):
    port, proc = safe_server
    c = Client(port)
    c.sock.sendall(struct.pack("<BQ", P.GET_ALIGNMENT, 5))   # a 4-byte request claiming 5
    assert c.closed()
    c = Client(port)
    c.sock.sendall(struct.pack("<BQ", P.GRAPH_COMPUTE, 1 << 40))   # 1 TiB graph: refused before reading it
    assert c.closed()
    assert proc.poll() is None and round_trip(port)


def _graph(nodes, tensors, device=0):
    return (struct.pack("<II", device, len(nodes)) + struct.pack(f"<{len(nodes)}Q", *nodes)
            + struct.pack("<I", len(tensors)) + b"".join(tensors))


def test_graph_checks(safe_server):
    port, proc = safe_server
    for bad in ("outside", "no-buffer", "missing-source"):
        c = Client(port)
        ptr, _, base = c.alloc(1024)
        a = tensor(ptr, base, [16], tid=1)
        if bad == "outside":
            out = tensor(ptr, base + 1000, [16], op=lib.GGML_OP_SQR, src=[1], tid=2)
        elif bad == "no-buffer":
            out = tensor(0, 0, [16], op=lib.GGML_OP_SQR, src=[1], tid=2)   # GGML would write through NULL
        else:
            out = tensor(ptr, base + 64, [16], op=lib.GGML_OP_SQR, src=[99], tid=2)
        c.call(P.GRAPH_COMPUTE, _graph([2], [a, out]))
        assert c.closed(), bad
    # a valid graph computes: the squares of 16 floats
    c = Client(port)
    ptr, _, base = c.alloc(1024)
    x = np.arange(16, dtype=np.float32)
    c.call(P.SET_TENSOR, tensor(ptr, base, [16]) + struct.pack("<Q", 0) + x.tobytes())
    c.call(P.GRAPH_COMPUTE, _graph([2], [tensor(ptr, base, [16], tid=1),
                                         tensor(ptr, base + 64, [16], op=lib.GGML_OP_SQR, src=[1], tid=2)]))
    got = c.call(P.GET_TENSOR, tensor(ptr, base + 64, [16]) + struct.pack("<QQ", 0, 64), 64)
    np.testing.assert_array_equal(np.frombuffer(got, np.float32), x * x)
    assert proc.poll() is None


def _rss_tree_kib(pid):
    """Resident memory of a process and its children, in KiB."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
            with open(f"/proc/{p}/task/{p}/children") as f:
                pids += [int(c) for c in f.read().split()]
        except (FileNotFoundError, StopIteration):
            pass
    return total


def test_allocation_over_the_cap_fails_cleanly(safe_server):
    port, proc = safe_server
    before = _rss_tree_kib(proc.pid)
    c = Client(port)
    assert c.alloc(2 << 30) == (0, 0, 0)          # 2 GiB > the 64 MiB cap: GGML's "allocation failed"
    ptr, size, base = c.alloc(CAP // 2)          # within the cap: granted, on the same connection
    assert ptr and size >= CAP // 2 and base
    assert c.alloc(CAP // 2 + 4096) == (0, 0, 0)   # the cap counts what this client already holds
    assert _rss_tree_kib(proc.pid) - before < 256 << 10
    c.sock.close()
    time.sleep(0.2)
    c = Client(port)   # the first client's buffers were given back
    assert c.alloc(CAP // 2)[0]
    assert proc.poll() is None


def test_idle_client_does_not_block_others(free_port):
    port = free_port()
    proc = _start(port, "--max-clients", "1")
    try:
        idle = Client(port)                       # holds the only worker, then says nothing
        t0 = time.monotonic()
        assert round_trip(port)                   # served once the idle one is disconnected
        waited = time.monotonic() - t0
        assert IDLE * 0.5 < waited < IDLE + 10, waited
        assert idle.closed()
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_two_clients_at_once(safe_server):
    port, _ = safe_server
    first = Client(port)
    ptr, _, base = first.alloc(1024)
    assert round_trip(port)                       # while the first holds its connection
    first.call(P.SET_TENSOR, tensor(ptr, base, [4]) + struct.pack("<Q", 0) + bytes(16))
    assert first.call(P.GET_TENSOR, tensor(ptr, base, [4]) + struct.pack("<QQ", 0, 16), 16) == bytes(16)


def test_a_dying_ggml_server_is_restarted(safe_server):
    port, proc = safe_server
    c = Client(port)
    ptr, _, base = c.alloc(4096)
    # in bounds, but a copy of 16 elements into 8, which GGML's CPU code asserts on: the worker aborts
    a = tensor(ptr, base, [16], tid=1)
    out = tensor(ptr, base + 128, [8], op=lib.GGML_OP_DUP, src=[1], tid=2)
    c.call(P.GRAPH_COMPUTE, _graph([2], [a, out]))
    c.call(P.GET_DEVICE_MEMORY, struct.pack("<I", 0))
    assert c.closed()
    assert proc.poll() is None
    assert round_trip(port) and round_trip(port)


def test_other_addresses_warn_that_there_is_no_authentication(free_port):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ggrad.rpc_server", "--host", "0.0.0.0", "--port", str(port),
                             "--threads", "1", "--max-clients", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        P.wait_listening(port, proc)
        assert round_trip(port)
    finally:
        proc.kill()
        out = proc.communicate()[0].decode()
    assert "no authentication" in out, out


def test_connection_flood_is_bounded(free_port):
    """16 connections per worker at most (each is a thread); the rest are closed at once, service goes on."""
    port = free_port()
    proc = _start(port, "--max-clients", "1")
    try:
        flood = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(24)]
        time.sleep(0.5)   # well within the idle timeout: only the refused ones are closed
        closed, _, _ = select.select(flood, [], [], 0)
        assert len(closed) == 24 - 16 and all(s.recv(1) == b"" for s in closed), len(closed)
        for s in flood:
            s.close()
        time.sleep(0.3)
        assert round_trip(port) and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
