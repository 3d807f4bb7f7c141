"""The collectives over TCP sockets, for processes that torchrun (or anything setting its variables) started.

Rendezvous: rank 0 listens on a free port of MASTER_ADDR and publishes it in the TCPStore; every other rank
connects to it and says which rank of which world it is. The ranks then form a star around rank 0. A
reduction sends every rank's array to rank 0, which combines them in rank order ((x0 op x1) op x2 ...) and
sends the result back: every rank holds the same bits, those one process combining the ranks' values in
that order computes. Broadcast and all-gather pass through rank 0 the same way. Each receive waits at
most the group's timeout; a peer that closed its connection or did not answer raises RankLostError.
"""

import socket
import struct
import time

import numpy as np

from .mpi import RankLostError, size_mismatch

_MAGIC = b"ggrd"
_HELLO = struct.Struct("!4sqq")     # magic, rank, world size
_HEADER = struct.Struct("!4sQ")     # magic, payload bytes
_COMBINE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum, "band": np.bitwise_and,
            "bor": np.bitwise_or, "bxor": np.bitwise_xor, "lor": np.logical_or, "land": np.logical_and,
            "lxor": np.logical_xor}


class SocketTransport:
    """ggrad.collectives' operations between `size` processes over TCP (`peers`: rank -> socket; rank 0
    holds one per other rank, the others one to rank 0)."""

    def __init__(self, rank, size, timeout, peers):
        self.rank, self.size, self.timeout, self.peers = rank, size, timeout, peers
        for sock in peers.values():
            sock.settimeout(timeout)

    # ---- messages ------------------------------------------------------------------------------
    def _send(self, peer, array, what):
        data = memoryview(np.ascontiguousarray(array)).cast("B")
        try:
            self.peers[peer].sendall(_HEADER.pack(_MAGIC, data.nbytes))
            self.peers[peer].sendall(data)
        except OSError as e:
            raise self._lost(peer, what, e) from None

    def _receive(self, peer, out, what):
        """Receive rank `peer`'s array into the contiguous array `out` (same byte size)."""
        sock, view = self.peers[peer], memoryview(out).cast("B")
        try:
            magic, nbytes = _HEADER.unpack(self._exactly(sock, bytearray(_HEADER.size)))
            if magic != _MAGIC or nbytes != view.nbytes:
                raise RuntimeError(f"{what}: rank {peer} sent {nbytes} bytes where rank {self.rank} expects "
                                   f"{view.nbytes}: every rank must pass tensors of the same shape and dtype")
            self._exactly(sock, view)
        except (OSError, ConnectionError) as e:
            raise self._lost(peer, what, e) from None
        return out

    @staticmethod
    def _exactly(sock, buffer):
        view, got = memoryview(buffer).cast("B"), 0
        while got < view.nbytes:
            n = sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("connection closed")
            got += n
        return buffer

    def _lost(self, peer, what, error):
        if isinstance(error, socket.timeout):
            why = f"no answer within {self.timeout:g} s"
        else:
            why = f"its connection closed ({error}); did its process exit?"
        return RankLostError(f"ggrad.distributed: rank {self.rank} of {self.size}: {what}: rank {peer}: {why}. "
                             "The run cannot continue; resume it from its last checkpoint")

    def _others(self):
        return range(1, self.size)

    # ---- collectives ---------------------------------------------------------------------------
    def reduce(self, array, op, what):
        """Combine the contiguous `array` across the ranks with `op` ("sum", "max", ...), in place."""
        if self.size == 1:
            return array
        if self.rank == 0:
            part = np.empty_like(array)
            for peer in self._others():
                _COMBINE[op](array, self._receive(peer, part, what), out=array)
            for peer in self._others():
                self._send(peer, array, what)
        else:
            self._send(0, array, what)
            self._receive(0, array, what)
        return array

    def sum_arrays(self, arrays, what):
        for array in arrays:
            self.reduce(array, "sum", what)
        return arrays

    def gather(self, array, table, what):
        """table[r] = rank r's `array` on every rank (table: (size, array.size), contiguous)."""
        table[self.rank] = array
        if self.rank == 0:
            for peer in self._others():
                self._receive(peer, table[peer], what)
            for peer in self._others():
                self._send(peer, table, what)
        elif self.size > 1:
            self._send(0, array, what)
            self._receive(0, table, what)
        return table

    def broadcast(self, arrays, root, what):
        """Overwrite each contiguous array with rank `root`'s."""
        for array in arrays:
            if self.rank == root and root != 0:
                self._send(0, array, what)
            elif self.rank == 0:
                if root != 0:
                    self._receive(root, array, what)
                for peer in self._others():
                    if peer != root:
                        self._send(peer, array, what)
            else:
                self._receive(0, array, what)
        return arrays

    def barrier(self):
        self.reduce(np.zeros(1, np.int32), "sum", "barrier")

    def check_same_size(self, size, what):
        """RuntimeError on every rank unless every rank passes the same `size`."""
        bounds = self.reduce(np.array([size, -size], np.int64), "max", what)
        if bounds[0] != -bounds[1]:
            raise size_mismatch(what, self.rank, size, -bounds[1], bounds[0])

    def close(self):
        for sock in self.peers.values():
            sock.close()
        self.peers = {}


def rendezvous(store, rank, size, timeout, generation):
    """A SocketTransport joining the `size` processes that call this with the same `store` and
    `generation` (the how-many-th group of the run), each with its own `rank`."""
    if size == 1:
        return SocketTransport(0, 1, timeout, {})
    key = f"ggrad/{generation}/root"
    if rank != 0:
        host, port = store.get(key).decode().rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(_HELLO.pack(_MAGIC, rank, size))
        return SocketTransport(rank, size, timeout, {0: sock})
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((store.host, 0))
    listener.listen(size)
    store.set(key, f"{store.host}:{listener.getsockname()[1]}")
    peers, deadline = {}, time.monotonic() + timeout
    with listener:
        while len(peers) < size - 1:
            listener.settimeout(max(deadline - time.monotonic(), 1e-3))
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                missing = sorted(set(range(1, size)) - set(peers))
                raise RankLostError(f"ggrad.distributed: rank 0 of {size}: ranks {missing} did not join within "
                                    f"{timeout:g} s (did one fail to start?)") from None
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(timeout)
            magic, peer, peer_size = _HELLO.unpack(SocketTransport._exactly(conn, bytearray(_HELLO.size)))
            if magic != _MAGIC or peer_size != size or not 0 < peer < size or peer in peers:
                conn.close()
                raise RuntimeError(f"init_process_group: a process joined as rank {peer} of {peer_size}, but rank 0 "
                                   f"expects ranks 1 to {size - 1} of {size}, each once: check RANK and WORLD_SIZE")
            peers[peer] = conn
    return SocketTransport(0, size, timeout, peers)
