"""The wire format of GGML 0.20.2's RPC protocol (ggml-rpc.cpp, protocol v5.0.0), and socket helpers.

A request is `| command (1 byte) | size (u64) | payload |`; a reply, for the commands that have one,
is `| size (u64) | payload |`. Every struct is packed little-endian. Tensors travel as `rpc_tensor`
(296 bytes). SET_TENSOR, GRAPH_COMPUTE and GRAPH_RECOMPUTE have no reply.
"""

import socket
import struct
import time

import numpy as np

from .._lib import lib

PROTO_VERSION = (5, 0, 0)
CONN_CAPS_SIZE = 24
MAX_DEVICES = 64             # a DEVICE_COUNT above this is not a server GGML would talk to sanely

(ALLOC_BUFFER, GET_ALIGNMENT, GET_MAX_SIZE, BUFFER_GET_BASE, FREE_BUFFER, BUFFER_CLEAR, SET_TENSOR,
 SET_TENSOR_HASH, GET_TENSOR, COPY_TENSOR, GRAPH_COMPUTE, GET_DEVICE_MEMORY, INIT_TENSOR, GET_ALLOC_SIZE,
 HELLO, DEVICE_COUNT, GRAPH_RECOMPUTE, MEMSET_TENSOR) = range(18)
COMMAND_COUNT = 18
NAMES = ("ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER", "BUFFER_CLEAR",
         "SET_TENSOR", "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR", "GRAPH_COMPUTE", "GET_DEVICE_MEMORY",
         "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR")

MAX_SRC = 10
TENSOR = np.dtype([
    ("id", "<u8"), ("type", "<u4"), ("buffer", "<u8"), ("ne", "<u4", 4), ("nb", "<u4", 4), ("op", "<u4"),
    ("op_params", "<i4", 16), ("flags", "<i4"), ("src", "<u8", MAX_SRC), ("view_src", "<u8"),
    ("view_offs", "<u8"), ("data", "<u8"), ("name", "S64"), ("padding", "S4")])
TENSOR_SIZE = TENSOR.itemsize
if TENSOR_SIZE != 296:
    raise ImportError(f"rpc_tensor is 296 bytes in GGML 0.20.2, this layout gives {TENSOR_SIZE}")

# Request payload sizes of the fixed-size commands (the variable ones, SET_TENSOR and GRAPH_COMPUTE, are absent).
REQUEST_SIZE = {
    ALLOC_BUFFER: 12, GET_ALIGNMENT: 4, GET_MAX_SIZE: 4, BUFFER_GET_BASE: 8, FREE_BUFFER: 8, BUFFER_CLEAR: 9,
    SET_TENSOR_HASH: TENSOR_SIZE + 16, GET_TENSOR: TENSOR_SIZE + 16, COPY_TENSOR: 2 * TENSOR_SIZE,
    GET_DEVICE_MEMORY: 4, INIT_TENSOR: TENSOR_SIZE, GET_ALLOC_SIZE: 4 + (1 + MAX_SRC) * TENSOR_SIZE,
    HELLO: CONN_CAPS_SIZE, DEVICE_COUNT: 0, GRAPH_RECOMPUTE: 4, MEMSET_TENSOR: TENSOR_SIZE + 17,
}
# Reply payload sizes (GET_TENSOR's is the size it asks for; no entry: no reply).
REPLY_SIZE = {
    ALLOC_BUFFER: 16, GET_ALIGNMENT: 8, GET_MAX_SIZE: 8, BUFFER_GET_BASE: 8, FREE_BUFFER: 0, BUFFER_CLEAR: 0,
    SET_TENSOR_HASH: 1, COPY_TENSOR: 1, GET_DEVICE_MEMORY: 16, INIT_TENSOR: 0, GET_ALLOC_SIZE: 8,
    HELLO: 4 + CONN_CAPS_SIZE, DEVICE_COUNT: 4, MEMSET_TENSOR: 0,
}

TYPE_COUNT = int(lib.GGML_TYPE_COUNT)
OP_COUNT = int(lib.GGML_OP_COUNT)
# (block size, bytes per block) of every type GGML can deserialize; removed types have block size 0.
TYPE_SIZES = {t: (int(lib.ggml_blck_size(t)), int(lib.ggml_type_size(t))) for t in range(TYPE_COUNT)
              if lib.ggml_blck_size(t) > 0}


class ProtocolError(Exception):
    """A peer broke the protocol: bad size, unknown command, region outside its buffer, ..."""


def tensor_nbytes(t):
    """`ggml_nbytes` of one `TENSOR` record, exact (no 64-bit wrap-around); its type must be valid."""
    ne = [int(x) for x in t["ne"]]
    nb = [int(x) for x in t["nb"]]
    if min(ne) <= 0:
        return 0
    block, size = TYPE_SIZES[int(t["type"])]
    if block == 1:
        return size + sum((n - 1) * s for n, s in zip(ne, nb))
    return ne[0] * nb[0] // block + sum((n - 1) * s for n, s in zip(ne[1:], nb[1:]))


def parse_tensor(payload, offset=0):
    return np.frombuffer(payload, TENSOR, 1, offset)[0]


def reply_size(cmd, payload):
    """Bytes of the reply to this request, or None for a command without one."""
    if cmd == GET_TENSOR:
        return struct.unpack_from("<Q", payload, TENSOR_SIZE + 8)[0]
    return REPLY_SIZE.get(cmd)


def hello_reply(caps=bytes(CONN_CAPS_SIZE)):
    return bytes(PROTO_VERSION) + b"\0" + caps


def check_hello_reply(reply):
    """Raise ProtocolError unless `reply` is a HELLO answer this client (v5.0) accepts."""
    major, minor, patch = reply[0], reply[1], reply[2]
    if major != PROTO_VERSION[0] or minor > PROTO_VERSION[1]:
        raise ProtocolError(f"RPC protocol v{major}.{minor}.{patch}, this GGML speaks "
                            f"v{PROTO_VERSION[0]}.{PROTO_VERSION[1]}.x")


# ---- sockets --------------------------------------------------------------------------------------------

CHUNK = 1 << 20


def recv_exact(sock, n):
    """Exactly `n` bytes from `sock` (ConnectionError if it closes first; socket.timeout passes through)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, CHUNK))
        if k == 0:
            raise ConnectionError(f"connection closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


def recv_u64(sock):
    return struct.unpack("<Q", recv_exact(sock, 8))[0]


def recv_request_header(sock):
    """(command, payload size) of the next request."""
    cmd = recv_exact(sock, 1)[0]
    return cmd, recv_u64(sock)


def send_request(sock, cmd, payload=b""):
    sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)


def send_reply(sock, payload=b""):
    sock.sendall(struct.pack("<Q", len(payload)) + payload)


def pipe(src, dst, n):
    """Copy `n` bytes from socket `src` to socket `dst` in chunks (never `n` bytes in memory at once)."""
    buf = bytearray(min(n, CHUNK))
    view = memoryview(buf)
    left = n
    while left:
        k = src.recv_into(view, min(left, len(buf)))
        if k == 0:
            raise ConnectionError(f"connection closed with {left} of {n} bytes to go")
        dst.sendall(view[:k])
        left -= k


def call(sock, cmd, payload, expected):
    """Send a request and read its reply, which must be `expected` bytes long."""
    send_request(sock, cmd, payload)
    size = recv_u64(sock)
    if size != expected:
        raise ProtocolError(f"{NAMES[cmd]} reply of {size} bytes, expected {expected}")
    return recv_exact(sock, size)


def connect(host, port, timeout):
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def parse_endpoint(endpoint):
    """(host, port) of `"host:port"`; ValueError otherwise."""
    if not isinstance(endpoint, str):
        raise ValueError(f"an RPC endpoint is a 'host:port' string, not {type(endpoint).__name__}")
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad RPC endpoint {endpoint!r}: expected 'host:port' with a port in 1..65535")
    return host, int(port)


def wait_listening(port, proc, timeout=60.0):
    """Wait until something accepts connections on 127.0.0.1:`port`.

    RuntimeError if the server process `proc` exits first, or (after killing it) if `timeout` passes.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening on port {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"nothing listened on port {port} within {timeout:g} s")
