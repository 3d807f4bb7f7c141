"""The client's relay: GGML's RPC client talks to this process, which talks to the real server.

GGML's client aborts its process on any failed socket read or write (RPC_STATUS_ASSERT) and waits forever
for a reply. Its endpoint is therefore this relay on 127.0.0.1, which forwards each request to the server
with timeouts and checks each reply. When the server dies, times out or answers what GGML could not take
(a buffer base of 0, a short reply, a wrong size), the relay writes `FAILED <reason>` on stdout and from
then on answers every request itself with a well-formed reply that steers GGML down its normal paths
(fake buffers, zero data), so GGML never aborts; ggrad reads the line and raises at the next compute or read.

`python -m ggrad.ggml.rpc.relay HOST:PORT` first checks the peer (HELLO, DEVICE_COUNT), then prints
`READY <port>` or `ERROR <reason>`; it exits when its parent closes stdin.
"""

import argparse
import os
import select
import socket
import struct
import sys
import threading

from . import protocol as P

_FAKE_BASE = 1 << 40   # fake buffer k starts at k << 40: aligned for any alignment, never 0


class Peer:
    """What the relay knows of the server: its devices, and whether it has failed."""

    def __init__(self, host, port, connect_timeout, timeout):
        self.host, self.port = host, port
        self.connect_timeout, self.timeout = connect_timeout, timeout
        self.failure = None
        self._lock = threading.Lock()
        self._fakes = 0
        self.probe()

    def probe(self):
        sock = P.connect(self.host, self.port, self.connect_timeout)
        try:
            sock.settimeout(self.connect_timeout)
            try:
                P.check_hello_reply(P.call(sock, P.HELLO, bytes(P.CONN_CAPS_SIZE), P.REPLY_SIZE[P.HELLO]))
            except socket.timeout:
                raise P.ProtocolError(f"no answer to HELLO within {self.connect_timeout:g} s") from None
            except (ConnectionError, P.ProtocolError) as e:
                raise P.ProtocolError(f"it does not speak GGML's RPC protocol ({e})") from None
            self.n_devices = struct.unpack("<I", P.call(sock, P.DEVICE_COUNT, b"", 4))[0]
            if not 0 < self.n_devices <= P.MAX_DEVICES:
                raise P.ProtocolError(f"it reports {self.n_devices} devices")
            devs = [struct.pack("<I", d) for d in range(self.n_devices)]
            self.alignment = [struct.unpack("<Q", P.call(sock, P.GET_ALIGNMENT, d, 8))[0] for d in devs]
            self.max_size = [struct.unpack("<Q", P.call(sock, P.GET_MAX_SIZE, d, 8))[0] for d in devs]
            self.memory = [P.call(sock, P.GET_DEVICE_MEMORY, d, 16) for d in devs]
            if any(not _power_of_two(a) for a in self.alignment) or 0 in self.max_size:
                raise P.ProtocolError(f"alignments {self.alignment}, max sizes {self.max_size}")
        finally:
            sock.close()

    def fail(self, reason):
        with self._lock:
            if self.failure is None:
                self.failure = reason
                sys.stdout.write(f"FAILED {reason}\n")
                sys.stdout.flush()

    def fake_buffer(self):
        with self._lock:
            self._fakes += 1
            return self._fakes << 40


def _power_of_two(n):
    return 0 < n <= 1 << 30 and n & (n - 1) == 0


class Link:
    """One connection of GGML's client, and its twin to the server (until the server fails)."""

    def __init__(self, local, peer):
        self.local, self.peer, self.up = local, peer, None
        self.bases = {}   # remote_ptr -> base, to answer BUFFER_GET_BASE once the server is gone

    def run(self):
        try:
            while self._next():
                pass
        finally:
            self.local.close()
            self._drop()

    def _drop(self):
        if self.up is not None:
            self.up.close()
            self.up = None

    def _lost(self, reason):
        self.peer.fail(reason)
        self._drop()

    def _next(self):
        """Relay one request of GGML's; False once GGML has closed its connection."""
        if self.up is not None and self.peer.failure is None:
            self._watch()
        try:
            cmd, size = P.recv_request_header(self.local)
        except ConnectionError:
            return False
        if cmd == P.SET_TENSOR:
            self._set_tensor(size)
            return True
        payload = P.recv_exact(self.local, size)
        if cmd == P.HELLO and self.up is None and self.peer.failure is None:
            self._connect()
        reply = self._forward(cmd, payload)
        if reply is None and self.peer.failure is not None:
            reply = self._fake(cmd, payload)
        if reply is not None and reply is not _ANSWERED:
            P.send_reply(self.local, reply)
        return True

    def _watch(self):
        """Wait for GGML's next request; a server that closes or talks meanwhile has failed."""
        try:
            ready, _, _ = select.select([self.local, self.up], [], [])
            if self.up in ready and self.local not in ready:
                self._lost("the server closed the connection" if not self.up.recv(1, socket.MSG_PEEK)
                           else "the server sent data nobody asked for")
        except OSError as e:
            self._lost(f"connection lost ({e})")

    def _connect(self):
        try:
            self.up = P.connect(self.peer.host, self.peer.port, self.peer.connect_timeout)
            self.up.settimeout(self.peer.timeout)
        except OSError as e:
            self._lost(f"could not connect ({e})")

    def _forward(self, cmd, payload):
        """The server's reply (checked), None for no reply or a failure; GET_TENSOR's is piped here."""
        if self.peer.failure is not None:
            self._drop()   # failed on another connection: every link answers for the server from now on
        if self.up is None:
            return None
        name = P.NAMES[cmd]
        try:
            if cmd == P.HELLO:
                payload = bytes(P.CONN_CAPS_SIZE)   # no transport upgrade through a relay
            P.send_request(self.up, cmd, payload)
            expected = P.reply_size(cmd, payload)
            if expected is None:
                return None
            got = P.recv_u64(self.up)
            if got != expected:
                raise P.ProtocolError(f"{name} answered with {got} bytes, expected {expected}")
            if cmd == P.GET_TENSOR:
                return self._get_tensor(got)
            reply = P.recv_exact(self.up, got)
            self._check(cmd, payload, reply)
            return reply[:4] + bytes(P.CONN_CAPS_SIZE) if cmd == P.HELLO else reply
        except socket.timeout:
            self._lost(f"no answer to {name} within {self.peer.timeout:g} s")
        except (OSError, ConnectionError) as e:
            self._lost(f"connection lost during {name} ({e})")
        except (P.ProtocolError, struct.error, IndexError) as e:
            self._lost(f"bad reply: {e}")
        return None

    def _get_tensor(self, size):
        """Pipe GET_TENSOR's data to GGML; if the server fails midway, finish it with zeros."""
        self.local.sendall(struct.pack("<Q", size))
        sent = 0
        buf = bytearray(min(size, P.CHUNK))
        try:
            while sent < size:
                k = self.up.recv_into(buf, min(size - sent, len(buf)))
                if k == 0:
                    raise ConnectionError("closed")
                self.local.sendall(memoryview(buf)[:k])
                sent += k
        except socket.timeout:
            self._lost(f"no answer to GET_TENSOR within {self.peer.timeout:g} s")
        except (OSError, ConnectionError) as e:
            self._lost(f"connection lost during GET_TENSOR ({e})")
        _send_zeros(self.local, size - sent, header=False)
        return _ANSWERED

    def _check(self, cmd, payload, reply):
        """Raise ProtocolError for a reply GGML's client would abort on or be misled by."""
        if cmd == P.HELLO:
            P.check_hello_reply(reply)
        elif cmd == P.DEVICE_COUNT and struct.unpack("<I", reply)[0] != self.peer.n_devices:
            raise P.ProtocolError(f"device count changed to {struct.unpack('<I', reply)[0]}")
        elif cmd == P.ALLOC_BUFFER:
            ptr, size = struct.unpack("<QQ", reply)
            if ptr and size < struct.unpack_from("<Q", payload, 4)[0]:
                raise P.ProtocolError(f"a buffer of {size} bytes for {struct.unpack_from('<Q', payload, 4)[0]}")
        elif cmd == P.BUFFER_GET_BASE:
            base = struct.unpack("<Q", reply)[0]
            if base == 0:
                raise P.ProtocolError("a buffer base of 0")
            self.bases[struct.unpack("<Q", payload)[0]] = base
        elif cmd == P.GET_ALIGNMENT and not _power_of_two(struct.unpack("<Q", reply)[0]):
            raise P.ProtocolError(f"alignment {struct.unpack('<Q', reply)[0]}")
        elif cmd == P.GET_MAX_SIZE and struct.unpack("<Q", reply)[0] == 0:
            raise P.ProtocolError("a max buffer size of 0")
        elif cmd == P.GET_ALLOC_SIZE:
            need = P.tensor_nbytes(P.parse_tensor(payload, 4))
            if not need <= struct.unpack("<Q", reply)[0] <= 2 * need + (1 << 30):
                raise P.ProtocolError(f"an alloc size of {struct.unpack('<Q', reply)[0]} for {need} bytes")
        elif cmd == P.GET_DEVICE_MEMORY and struct.unpack("<I", payload)[0] < self.peer.n_devices:
            self.peer.memory[struct.unpack("<I", payload)[0]] = reply

    def _fake(self, cmd, payload):
        """A reply that GGML's client takes without aborting, for a server that is gone."""
        if cmd in (P.SET_TENSOR, P.GRAPH_COMPUTE, P.GRAPH_RECOMPUTE):
            return None
        if cmd == P.HELLO:
            return P.hello_reply()
        if cmd == P.DEVICE_COUNT:
            return struct.pack("<I", self.peer.n_devices)
        if cmd == P.GET_TENSOR:
            _send_zeros(self.local, P.reply_size(cmd, payload))
            return _ANSWERED
        if cmd in (P.SET_TENSOR_HASH, P.COPY_TENSOR):
            return b"\x01"   # "done": no data to upload, no fallback copy through the host
        if cmd == P.ALLOC_BUFFER:
            return struct.pack("<QQ", self.peer.fake_buffer(), struct.unpack_from("<Q", payload, 4)[0])
        if cmd == P.BUFFER_GET_BASE:
            ptr = struct.unpack("<Q", payload)[0]
            return struct.pack("<Q", self.bases.get(ptr, ptr if ptr % _FAKE_BASE == 0 else _FAKE_BASE))
        if cmd == P.GET_ALLOC_SIZE:
            return struct.pack("<Q", P.tensor_nbytes(P.parse_tensor(payload, 4)))
        dev = min(struct.unpack_from("<I", payload)[0], self.peer.n_devices - 1) if len(payload) == 4 else 0
        if cmd == P.GET_ALIGNMENT:
            return struct.pack("<Q", self.peer.alignment[dev])
        if cmd == P.GET_MAX_SIZE:
            return struct.pack("<Q", self.peer.max_size[dev])
        if cmd == P.GET_DEVICE_MEMORY:
            return self.peer.memory[dev]
        return b""   # FREE_BUFFER, BUFFER_CLEAR, MEMSET_TENSOR, INIT_TENSOR

    def _set_tensor(self, size):
        """Stream SET_TENSOR's data to the server; once it has failed, read it and drop it."""
        self._send_up(struct.pack("<BQ", P.SET_TENSOR, size))
        left = size
        buf = bytearray(min(size, P.CHUNK))
        while left:
            k = self.local.recv_into(buf, min(left, len(buf)))
            if k == 0:
                raise ConnectionError("GGML closed its connection mid-request")
            left -= k
            self._send_up(memoryview(buf)[:k])

    def _send_up(self, data):
        if self.up is not None:
            try:
                self.up.sendall(data)
            except OSError as e:
                self._lost(f"connection lost during SET_TENSOR ({e})")


_ANSWERED = object()   # the reply already went to GGML


def _send_zeros(sock, n, header=True):
    if header:
        sock.sendall(struct.pack("<Q", n))
    zeros = bytes(min(n, P.CHUNK))
    while n:
        k = min(n, len(zeros))
        sock.sendall(zeros[:k] if k < len(zeros) else zeros)
        n -= k


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ggrad.ggml.rpc.relay")
    parser.add_argument("endpoint")
    parser.add_argument("--connect-timeout", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
    try:
        host, port = P.parse_endpoint(args.endpoint)
        peer = Peer(host, port, args.connect_timeout, args.timeout)
    except socket.timeout:
        sys.stdout.write(f"ERROR no connection within {args.connect_timeout:g} s\n")
        return
    except (OSError, ValueError, P.ProtocolError) as e:
        sys.stdout.write(f"ERROR {e}\n")
        return
    finally:
        sys.stdout.flush()
    listener = socket.create_server(("127.0.0.1", 0))
    sys.stdout.write(f"READY {listener.getsockname()[1]}\n")
    sys.stdout.flush()
    while True:
        local, _ = listener.accept()
        local.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=Link(local, peer).run, daemon=True).start()


if __name__ == "__main__":
    main()
