"""`TCPStore`: PyTorch's key-value store over TCP (torch.distributed.TCPStore), where torchrun's ranks meet.

The master (rank 0) serves the keys from a daemon thread, one thread per client connection; every rank,
the master included, talks to it as a client. A request is a command byte and length-prefixed fields;
`get` and `wait` block on the server until their keys exist or the store's timeout passes. Keys are str,
values bytes (a str is stored encoded), as PyTorch's.
"""

import datetime
import socket
import struct
import threading
import time

_SET, _GET, _ADD, _CHECK, _WAIT, _DELETE, _NUM_KEYS, _COMPARE_SET = range(8)
_OK, _MISSING = 0, 1


class DistError(RuntimeError):
    """An error of the distributed layer (PyTorch's torch.distributed.DistError)."""


class DistStoreError(DistError):
    """A store operation that could not complete: a timeout waiting for keys, a server out of reach."""


def _send(sock, *fields):
    sock.sendall(b"".join(struct.pack("!Q", len(f)) + f for f in fields))


def _reply(sock, status, value):
    sock.sendall(bytes([status]) + struct.pack("!Q", len(value)) + value)


def _receive_exactly(sock, n):
    data = bytearray(n)
    view, got = memoryview(data), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("the store's peer closed the connection")
        got += k
    return bytes(data)


def _receive(sock, count):
    return [_receive_exactly(sock, struct.unpack("!Q", _receive_exactly(sock, 8))[0]) for _ in range(count)]


def _bytes(value):
    return value.encode() if isinstance(value, str) else bytes(value)


def _seconds(timeout):
    return timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)


class _Server:
    """The master's keys and the threads that serve them."""

    def __init__(self, listener):
        self.listener = listener
        self.keys, self.changed = {}, threading.Condition()
        self.clients = 0
        threading.Thread(target=self._accept, daemon=True, name="ggrad-TCPStore").start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:   # the listener was closed
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.changed:
                self.clients += 1
                self.changed.notify_all()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            try:
                while True:
                    command = _receive_exactly(conn, 1)[0]
                    self._answer(conn, command)
            except (ConnectionError, OSError):
                return

    def _await(self, keys, timeout):
        """Whether every key exists within `timeout` seconds (the caller holds `changed`)."""
        return self.changed.wait_for(lambda: all(k in self.keys for k in keys), timeout)

    def _answer(self, conn, command):
        if command in (_SET, _ADD, _DELETE, _COMPARE_SET):
            count = {_SET: 2, _ADD: 2, _DELETE: 1, _COMPARE_SET: 3}[command]
            fields = _receive(conn, count)
            with self.changed:
                key = fields[0].decode()
                if command == _SET:
                    self.keys[key], reply = fields[1], b""
                elif command == _ADD:
                    value = int(self.keys.get(key, b"0")) + int(fields[1])
                    self.keys[key] = reply = str(value).encode()
                elif command == _DELETE:
                    reply = b"1" if self.keys.pop(key, None) is not None else b"0"
                else:
                    current = self.keys.get(key)
                    if (current is None and fields[1] == b"") or current == fields[1]:
                        self.keys[key] = fields[2]
                    reply = self.keys.get(key, fields[1])
                self.changed.notify_all()
            _reply(conn, _OK, reply)
        elif command in (_GET, _WAIT, _CHECK):
            timeout, keys = _receive(conn, 2)
            keys = [k.decode() for k in keys.split(b"\0")] if keys else []
            with self.changed:
                if command == _CHECK:
                    found = all(k in self.keys for k in keys)
                    _reply(conn, _OK, b"1" if found else b"0")
                elif self._await(keys, float(timeout)):
                    _reply(conn, _OK, self.keys[keys[0]] if command == _GET else b"")
                else:
                    _reply(conn, _MISSING, ", ".join("/" + k for k in keys if k not in self.keys).encode())
        elif command == _NUM_KEYS:
            with self.changed:
                _reply(conn, _OK, str(len(self.keys)).encode())
        else:
            raise ConnectionError(f"unknown store command {command}")


class TCPStore:
    """A key-value store served by the master over TCP (PyTorch's torch.distributed.TCPStore).

    Args:
        host_name (str): the master's address. port (int): its port (0 on the master: any free one).
        world_size (int, optional): the number of clients; with `wait_for_workers`, the master's
            constructor returns once that many have connected.
        is_master (bool): serve the store from this process.
        timeout (timedelta): how long connecting, `get` and `wait` may take. Default: 300 s.
    Raises DistStoreError when the master cannot be reached in time, RuntimeError when the master's port
    is taken.
    """

    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=datetime.timedelta(seconds=300),
                 wait_for_workers=True, multi_tenant=False, master_listen_fd=None, use_libuv=True):
        self.host, self.timeout = host_name, timeout if isinstance(timeout, datetime.timedelta) else \
            datetime.timedelta(seconds=float(timeout))
        self._server = None
        if is_master:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind((host_name, int(port)))
            except OSError as e:
                listener.close()
                raise RuntimeError(f"TCPStore: the server socket has failed to listen on port {port} ({e.strerror}); "
                                   "is another run using it? Choose another MASTER_PORT") from None
            listener.listen(128)
            port = listener.getsockname()[1]
            self._server = _Server(listener)
        self.port = int(port)
        self._lock = threading.Lock()
        self._sock = self._connect()
        if is_master and world_size is not None and wait_for_workers:
            with self._server.changed:
                if not self._server.changed.wait_for(lambda: self._server.clients >= world_size,
                                                     _seconds(self.timeout)):
                    raise DistStoreError(f"TCPStore: {self._server.clients} of {world_size} clients joined within "
                                         f"{self.timeout}")

    def _connect(self):
        deadline = time.monotonic() + _seconds(self.timeout)
        while True:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=5)
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistStoreError(f"TCPStore: no master at {self.host}:{self.port} within {self.timeout} "
                                         f"({e})") from None
                time.sleep(0.05)

    def _request(self, command, *fields):
        with self._lock:
            self._sock.sendall(bytes([command]))
            _send(self._sock, *fields)
            status, reply = _receive_exactly(self._sock, 1)[0], _receive(self._sock, 1)[0]
        return status, reply

    def set(self, key, value):
        self._request(_SET, key.encode(), _bytes(value))

    def get(self, key):
        """The value of `key` (bytes), waiting for it up to the store's timeout."""
        return self._waited(_GET, [key], None)

    def add(self, key, amount):
        """Add `amount` to the integer at `key` (0 when absent); the new value."""
        return int(self._request(_ADD, key.encode(), str(int(amount)).encode())[1])

    def compare_set(self, key, expected_value, desired_value):
        """Set `key` to `desired_value` if it holds `expected_value` (or is absent and expected is empty);
        the value after."""
        return self._request(_COMPARE_SET, key.encode(), _bytes(expected_value), _bytes(desired_value))[1]

    def wait(self, keys, timeout=None):
        """Return once every key of `keys` exists; DistStoreError after `timeout` (default: the store's)."""
        self._waited(_WAIT, keys, timeout)

    def check(self, keys):
        return self._request(_CHECK, b"0", "\0".join(keys).encode())[1] == b"1"

    def delete_key(self, key):
        return self._request(_DELETE, key.encode())[1] == b"1"

    def num_keys(self):
        return int(self._request(_NUM_KEYS)[1])

    def set_timeout(self, timeout):
        self.timeout = timeout

    def _waited(self, command, keys, timeout):
        seconds = _seconds(self.timeout if timeout is None else timeout)
        status, reply = self._request(command, str(seconds).encode(), "\0".join(keys).encode())
        if status != _OK:
            raise DistStoreError(f"wait timeout after {seconds * 1000:g}ms, keys: {reply.decode()}")
        return reply

    def close(self):
        """Close this client's connection (and, on the master, stop serving new clients)."""
        self._sock.close()
        if self._server is not None:
            self._server.listener.close()
