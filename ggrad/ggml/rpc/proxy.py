"""One client of a ggrad RPC server: every request read, checked by its Session, then forwarded to GGML.

The client speaks to this proxy only; GGML's own server (a worker process on a loopback port) sees only
requests that passed the checks. Payloads are bounded before they are read: a SET_TENSOR's data must fit
in the tensor it names and is streamed through, a GRAPH_COMPUTE may not exceed `max_graph_bytes`. Any
breach raises ProtocolError and the caller closes this client's connection; the server serves on.
"""

import struct

from . import protocol as P
from .guard import Session

_SET_HEAD = P.TENSOR_SIZE + 8   # rpc_tensor + offset, before SET_TENSOR's data


class Proxy:
    """Forwards one client's requests over `upstream`, a connection to a worker that already said HELLO."""

    def __init__(self, client, upstream, n_devices, budget, max_graph_bytes):
        self.client, self.up = client, upstream
        self.session = Session(n_devices, budget)
        self.max_graph_bytes = max_graph_bytes

    def close(self):
        self.session.close()

    def serve(self):
        """Handle requests until the client leaves (returns) or breaks a rule (ProtocolError)."""
        while True:
            try:
                cmd = P.recv_exact(self.client, 1)[0]
            except ConnectionError:
                return
            size = P.recv_u64(self.client)
            if cmd >= P.COMMAND_COUNT:
                raise P.ProtocolError(f"unknown command {cmd}")
            if cmd == P.SET_TENSOR:
                self._set_tensor(size)
            elif cmd == P.GRAPH_COMPUTE:
                self._graph_compute(size)
            else:
                self._fixed(cmd, size)

    # ---- the two variable-size requests ------------------------------------------------------------------
    def _set_tensor(self, size):
        if size < _SET_HEAD:
            raise P.ProtocolError(f"SET_TENSOR of {size} bytes")
        head = P.recv_exact(self.client, _SET_HEAD)
        _, nbytes = self.session.tensor(head, 0, "SET_TENSOR")
        offset = struct.unpack_from("<Q", head, P.TENSOR_SIZE)[0]
        self.session.within(nbytes, offset, size - _SET_HEAD, "SET_TENSOR")
        self.up.sendall(struct.pack("<BQ", P.SET_TENSOR, size) + head)
        P.pipe(self.client, self.up, size - _SET_HEAD)

    def _graph_compute(self, size):
        if size > self.max_graph_bytes:
            raise P.ProtocolError(f"GRAPH_COMPUTE of {size} bytes, the limit is {self.max_graph_bytes}")
        payload = P.recv_exact(self.client, size)
        self.session.graph(payload)
        P.send_request(self.up, P.GRAPH_COMPUTE, payload)

    # ---- fixed-size requests -------------------------------------------------------------------------------
    def _fixed(self, cmd, size):
        name = P.NAMES[cmd]
        if size != P.REQUEST_SIZE[cmd]:
            raise P.ProtocolError(f"{name} of {size} bytes, expected {P.REQUEST_SIZE[cmd]}")
        payload = P.recv_exact(self.client, size)
        check = _CHECKS.get(cmd)
        if check is not None and check(self, payload):
            return   # answered here
        P.send_request(self.up, cmd, payload)
        expected = P.reply_size(cmd, payload)
        if expected is None:
            return
        got = P.recv_u64(self.up)
        if got != expected:
            raise P.ProtocolError(f"the GGML server answered {name} with {got} bytes, expected {expected}")
        if cmd == P.GET_TENSOR:
            self.client.sendall(struct.pack("<Q", got))
            P.pipe(self.up, self.client, got)
            return
        reply = P.recv_exact(self.up, got)
        if cmd == P.ALLOC_BUFFER:
            reply = self._allocated(payload, reply)
        elif cmd == P.FREE_BUFFER:
            self.session.free_buffer(struct.unpack("<Q", payload)[0])
        P.send_reply(self.client, reply)

    def _alloc(self, payload):
        self.session.device(payload, 0, "ALLOC_BUFFER")
        size = struct.unpack_from("<Q", payload, 4)[0]
        if not self.session.budget.reserve(size):
            P.send_reply(self.client, bytes(16))   # what GGML answers when the allocation fails
            return True

    def _allocated(self, payload, reply):
        asked = struct.unpack_from("<Q", payload, 4)[0]
        remote_ptr, remote_size = struct.unpack("<QQ", reply)
        if remote_ptr == 0:
            self.session.budget.release(asked)
            return reply
        self.session.budget.release(asked - remote_size)   # the server may round the size up
        base = struct.unpack("<Q", P.call(self.up, P.BUFFER_GET_BASE, struct.pack("<Q", remote_ptr), 8))[0]
        self.session.add_buffer(remote_ptr, base, remote_size)
        return reply

    def _get_tensor(self, payload):
        _, nbytes = self.session.tensor(payload, 0, "GET_TENSOR")
        offset, size = struct.unpack_from("<QQ", payload, P.TENSOR_SIZE)
        self.session.within(nbytes, offset, size, "GET_TENSOR")

    def _copy_tensor(self, payload):
        _, src_bytes = self.session.tensor(payload, 0, "COPY_TENSOR src")
        dst, _ = self.session.tensor(payload, P.TENSOR_SIZE, "COPY_TENSOR dst")
        self.session.region(dst, 0, src_bytes, "COPY_TENSOR")

    def _memset_tensor(self, payload):
        _, nbytes = self.session.tensor(payload, 0, "MEMSET_TENSOR")
        offset, size = struct.unpack_from("<QQ", payload, P.TENSOR_SIZE)
        self.session.within(nbytes, offset, size, "MEMSET_TENSOR")

    def _alloc_size(self, payload):
        self.session.device(payload, 0, "GET_ALLOC_SIZE")
        self.session.tensor(payload, 4, "GET_ALLOC_SIZE", need_buffer=False)
        for i in range(P.MAX_SRC):
            offset = 4 + (1 + i) * P.TENSOR_SIZE
            if struct.unpack_from("<Q", payload, offset)[0] != 0:
                self.session.tensor(payload, offset, "GET_ALLOC_SIZE source", need_buffer=False)

    def _known_buffer(self, payload):
        self.session.known_buffer(struct.unpack_from("<Q", payload)[0], "buffer request")

    def _device(self, payload):
        self.session.device(payload, 0, "device request")

    def _tensor_in_buffer(self, payload):
        self.session.tensor(payload, 0, "tensor request")

    def _tensor_anywhere(self, payload):
        self.session.tensor(payload, 0, "INIT_TENSOR", need_buffer=False)

    def _recompute(self, payload):
        self.session.recompute(payload)

    def _hello(self, payload):
        raise P.ProtocolError("a second HELLO")


_CHECKS = {
    P.HELLO: Proxy._hello,
    P.ALLOC_BUFFER: Proxy._alloc,
    P.GET_ALIGNMENT: Proxy._device,
    P.GET_MAX_SIZE: Proxy._device,
    P.GET_DEVICE_MEMORY: Proxy._device,
    P.BUFFER_GET_BASE: Proxy._known_buffer,
    P.FREE_BUFFER: Proxy._known_buffer,
    P.BUFFER_CLEAR: Proxy._known_buffer,
    P.GET_TENSOR: Proxy._get_tensor,
    P.COPY_TENSOR: Proxy._copy_tensor,
    P.MEMSET_TENSOR: Proxy._memset_tensor,
    P.SET_TENSOR_HASH: Proxy._tensor_in_buffer,
    P.INIT_TENSOR: Proxy._tensor_anywhere,
    P.GET_ALLOC_SIZE: Proxy._alloc_size,
    P.GRAPH_RECOMPUTE: Proxy._recompute,
}
