"""What a ggrad RPC server lets a client ask of GGML: the checks GGML's own server lacks.

GGML's server trusts its client: a tensor whose data lies outside its buffer is a GGML_ASSERT (the server
process aborts), a graph node with no memory is a null write, a GRAPH_RECOMPUTE after a FREE_BUFFER reads
freed memory, and one ALLOC_BUFFER commits whatever size it names. A `Session` holds what one client owns
(its buffers, where they start, what its stored graphs read) and raises ProtocolError for anything outside.
"""

import struct
import threading

import numpy as np

from . import protocol as P

# vectorised type tables for graph checks (block size 1 for invalid types: they are rejected first)
_VALID_TYPES = np.array(sorted(P.TYPE_SIZES), dtype=np.uint32)
_BLOCK = np.ones(P.TYPE_COUNT, np.uint64)
_TYPE_SIZE = np.ones(P.TYPE_COUNT, np.uint64)
for _t, (_b, _s) in P.TYPE_SIZES.items():
    _BLOCK[_t], _TYPE_SIZE[_t] = _b, _s
_HUGE = float(1 << 52)   # larger than any buffer: a tensor claiming more bytes is rejected before exact math


class Budget:
    """Bytes of device memory that all clients of one server may hold together."""

    def __init__(self, cap):
        self.cap = int(cap)
        self.used = 0
        self._lock = threading.Lock()

    def reserve(self, n):
        with self._lock:
            if self.used + n > self.cap:
                return False
            self.used += n
            return True

    def release(self, n):
        with self._lock:
            self.used -= n


class Session:
    """The buffers one client connection owns on its GGML server, and the checks on its requests."""

    def __init__(self, n_devices, budget):
        self.n_devices = n_devices
        self.budget = budget
        self.buffers = {}        # remote_ptr -> (base, size)
        self._table = None       # the same as sorted arrays (ptrs, bases, sizes), for graph checks
        self.graph_buffers = {}  # device -> remote_ptrs its stored graph reads (absent: nothing to recompute)

    # ---- buffers ---------------------------------------------------------------------------------------
    def add_buffer(self, remote_ptr, base, size):
        self.buffers[remote_ptr] = (base, size)
        self._table = None

    def free_buffer(self, remote_ptr):
        _, size = self.buffers.pop(remote_ptr)
        self._table = None
        self.budget.release(size)
        for dev, used in list(self.graph_buffers.items()):
            if remote_ptr in used:
                del self.graph_buffers[dev]

    def close(self):
        for _, size in self.buffers.values():
            self.budget.release(size)
        self.buffers.clear()

    def known_buffer(self, remote_ptr, what):
        if remote_ptr not in self.buffers:
            raise P.ProtocolError(f"{what}: buffer {remote_ptr:#x} is not one of this connection's")

    def device(self, payload, offset=0, what="request"):
        dev = struct.unpack_from("<I", payload, offset)[0]
        if dev >= self.n_devices:
            raise P.ProtocolError(f"{what}: device {dev}, the server has {self.n_devices}")
        return dev

    # ---- tensors ---------------------------------------------------------------------------------------
    def tensor(self, payload, offset, what, need_buffer=True):
        """The `rpc_tensor` at `offset`, checked as GGML's deserialize_tensor would assert; (record, nbytes)."""
        t = P.parse_tensor(payload, offset)
        if int(t["type"]) not in P.TYPE_SIZES:
            raise P.ProtocolError(f"{what}: tensor type {int(t['type'])} is not a GGML type")
        if int(t["ne"][0]) % P.TYPE_SIZES[int(t["type"])][0]:
            raise P.ProtocolError(f"{what}: a row of {int(t['ne'][0])} is not whole blocks of its type")
        buffer = int(t["buffer"])
        if buffer == 0 and not need_buffer:
            return t, P.tensor_nbytes(t)
        self.known_buffer(buffer, what)
        base, size = self.buffers[buffer]
        data, nbytes = int(t["data"]), P.tensor_nbytes(t)
        if data < base or data + nbytes > base + size:
            raise P.ProtocolError(f"{what}: tensor of {nbytes} bytes at {data:#x} is outside its buffer "
                                  f"[{base:#x}, {base + size:#x})")
        return t, nbytes

    @staticmethod
    def within(nbytes, offset, size, what):
        """Bytes [offset, offset + size) of a tensor of `nbytes` (GGML asserts on a read or write past it)."""
        if offset + size > nbytes:
            raise P.ProtocolError(f"{what}: {size} bytes at offset {offset} of a tensor of {nbytes} bytes")

    def region(self, t, offset, size, what):
        """Bytes [data + offset, data + offset + size) of tensor `t` must lie in its buffer."""
        base, buf_size = self.buffers[int(t["buffer"])]
        start = int(t["data"]) + offset
        if start < base or start + size > base + buf_size:
            raise P.ProtocolError(f"{what}: {size} bytes at offset {offset} of the tensor at {int(t['data']):#x} "
                                  f"are outside its buffer [{base:#x}, {base + buf_size:#x})")

    # ---- graphs ----------------------------------------------------------------------------------------
    def graph(self, payload):
        """Check a GRAPH_COMPUTE payload whole: counts, ids, types, ops, and every tensor inside a buffer."""
        if len(payload) < 12:
            raise P.ProtocolError(f"GRAPH_COMPUTE of {len(payload)} bytes")
        dev = self.device(payload, 0, "GRAPH_COMPUTE")
        n_nodes = struct.unpack_from("<I", payload, 4)[0]
        head = 8 + 8 * n_nodes
        if n_nodes == 0 or len(payload) < head + 4:
            raise P.ProtocolError(f"GRAPH_COMPUTE of {len(payload)} bytes cannot hold {n_nodes} nodes")
        n_tensors = struct.unpack_from("<I", payload, head)[0]
        if len(payload) != head + 4 + n_tensors * P.TENSOR_SIZE:
            raise P.ProtocolError(f"GRAPH_COMPUTE of {len(payload)} bytes for {n_nodes} nodes and "
                                  f"{n_tensors} tensors")
        nodes = np.frombuffer(payload, "<u8", n_nodes, 8)
        ts = np.frombuffer(payload, P.TENSOR, n_tensors, head + 4)
        ids = ts["id"]
        problems = []
        if not np.isin(nodes, ids).all():
            problems.append("a node that is not among its tensors")
        linked = np.concatenate([ts["src"].ravel(), ts["view_src"]])
        if not np.isin(linked[linked != 0], ids).all():
            problems.append("a source that is not among its tensors")
        if not np.isin(ts["type"], _VALID_TYPES).all():
            problems.append("a tensor type GGML does not have")
        elif (ts["ne"][:, 0] % _BLOCK[ts["type"]].astype(np.uint32)).any():
            problems.append("a row that is not whole blocks of its type")
        if (ts["op"] >= P.OP_COUNT).any():
            problems.append("an op GGML does not have")
        if self._table is None:
            ptrs = sorted(self.buffers)
            self._table = (np.array(ptrs, np.uint64), np.array([self.buffers[p][0] for p in ptrs], np.uint64),
                           np.array([self.buffers[p][1] for p in ptrs], np.uint64))
        ptrs = self._table[0]
        if problems or not np.isin(ts["buffer"], ptrs).all():
            problem = problems[0] if problems else "a tensor in no buffer of this connection"
            raise P.ProtocolError(f"GRAPH_COMPUTE: {problem}")
        self._graph_extents(ts)
        self.graph_buffers[dev] = set(np.unique(ts["buffer"]).tolist())

    def _graph_extents(self, ts):
        ptrs, all_bases, all_sizes = self._table
        slot = np.searchsorted(ptrs, ts["buffer"])
        bases, sizes = all_bases[slot], all_sizes[slot]
        ne, nb = ts["ne"].astype(np.uint64), ts["nb"].astype(np.uint64)
        block, tsize = _BLOCK[ts["type"]], _TYPE_SIZE[ts["type"]]
        empty = (ne == 0).any(1)
        ne = np.maximum(ne, 1)
        # ggml_nbytes, first in floats (64-bit integers could wrap around), then exactly
        rough = ((ne[:, 1:] - 1).astype(float) * nb[:, 1:]).sum(1) + np.where(
            block == 1, tsize + (ne[:, 0] - 1).astype(float) * nb[:, 0], ne[:, 0].astype(float) * nb[:, 0] / block)
        if ((rough > _HUGE) & ~empty).any():
            raise P.ProtocolError("GRAPH_COMPUTE: a tensor larger than any buffer")
        first = np.where(block == 1, tsize + (ne[:, 0] - 1) * nb[:, 0], ne[:, 0] * nb[:, 0] // block)
        nbytes = np.where(empty, 0, first + ((ne[:, 1:] - 1) * nb[:, 1:]).sum(1)).astype(np.uint64)
        data = ts["data"]
        below = data < bases
        offset = np.where(below, 0, data - bases)
        if below.any() or (offset > sizes).any() or (nbytes > sizes - np.minimum(offset, sizes)).any():
            raise P.ProtocolError("GRAPH_COMPUTE: a tensor whose data lies outside its buffer")

    def recompute(self, payload):
        dev = self.device(payload, 0, "GRAPH_RECOMPUTE")
        if dev not in self.graph_buffers:
            raise P.ProtocolError("GRAPH_RECOMPUTE with no stored graph, or one whose buffers were freed")
