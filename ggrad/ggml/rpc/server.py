"""A ggrad RPC server: GGML's RPC protocol served safely, to several clients at once.

Clients connect to a Python proxy (`proxy.Proxy`, one thread per client); GGML's server itself runs in
worker processes bound to 127.0.0.1 on private ports, one worker per client being served. A worker that
dies (a request GGML aborts on that no check foresaw) is restarted; its client is disconnected, the others
carry on. A client idle for `idle_timeout` seconds is disconnected, so it holds a worker no longer.
The protocol has no authentication: anyone who reaches the port may use the devices.
"""

import logging
import queue
import socket
import struct
import subprocess
import threading
import time
import warnings

from . import protocol as P
from .guard import Budget
from .process import spawn
from .proxy import Proxy

log = logging.getLogger("ggrad.rpc_server")
_START_TIMEOUT = 60.0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bind(host, port):
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


class Worker:
    """One GGML RPC server process on a private loopback port."""

    def __init__(self, device_names, threads, cache_dir=None):
        self.args = [f"--threads={threads}"] + [f"--device={d}" for d in device_names]
        if cache_dir is not None:
            self.args.append(f"--cache-dir={cache_dir}")
        self.proc = None
        self.start()

    def start(self):
        for _ in range(5):   # another process may take the port between choosing and binding it
            self.port = _free_port()
            self.proc = spawn("ggrad.ggml.rpc.worker", [f"127.0.0.1:{self.port}"] + self.args,
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + _START_TIMEOUT
            while self.proc.poll() is None and time.monotonic() < deadline:
                try:
                    self.connect().close()
                    return
                except OSError:
                    time.sleep(0.05)
            self.stop()
        raise RuntimeError("could not start GGML's RPC server (see python -m ggrad.ggml.rpc.worker)")

    def connect(self):
        """A connection to the worker that has said HELLO (conn_caps zero: plain TCP)."""
        sock = P.connect("127.0.0.1", self.port, timeout=10.0)
        try:
            P.check_hello_reply(P.call(sock, P.HELLO, bytes(P.CONN_CAPS_SIZE), P.REPLY_SIZE[P.HELLO]))
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)   # a compute may take long; the client's side has the timeout
        return sock

    @property
    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc = None


class Server:
    """Serve `device_names` at host:port; `serve_forever()` blocks, `close()` stops (from another thread)."""

    def __init__(self, host="127.0.0.1", port=50052, device_names=("CPU",), threads=None, max_clients=4,
                 max_buffer_bytes=None, idle_timeout=600.0, max_graph_bytes=64 << 20, cache_dir=None):
        if max_clients < 1:
            raise ValueError(f"max_clients must be at least 1, got {max_clients}")
        if idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive, got {idle_timeout}")
        if host not in ("127.0.0.1", "localhost", "::1"):
            warnings.warn(f"serving GGML RPC on {host}: the protocol has no authentication, anyone who reaches "
                          f"port {port} may use these devices", stacklevel=2)
        self.listener = _bind(host, port)   # OSError for a bad host or a taken port, before any worker starts
        self.endpoint = f"{host}:{self.listener.getsockname()[1]}"
        self.idle_timeout = float(idle_timeout)
        self.max_graph_bytes = int(max_graph_bytes)
        threads = threads or 1
        self.workers = queue.Queue()
        self._all = [Worker(device_names, threads, cache_dir) for _ in range(max_clients)]
        for w in self._all:
            self.workers.put(w)
        self.n_devices, free = self._probe(self._all[0])
        self.budget = Budget(free if max_buffer_bytes is None else max_buffer_bytes)
        # connections waiting for a worker or for their HELLO are threads too: bound them
        self._connections = threading.BoundedSemaphore(16 * max_clients)
        self._closed = False

    @staticmethod
    def _probe(worker):
        sock = worker.connect()
        try:
            n = struct.unpack("<I", P.call(sock, P.DEVICE_COUNT, b"", 4))[0]
            free = sum(struct.unpack("<QQ", P.call(sock, P.GET_DEVICE_MEMORY, struct.pack("<I", d), 16))[0]
                       for d in range(n))
        finally:
            sock.close()
        return n, free

    def serve_forever(self):
        self.listener.listen(64)   # only now: a client that connects is served
        log.info("serving GGML RPC at %s (%d devices, %d clients at once, %d bytes of buffers)",
                 self.endpoint, self.n_devices, len(self._all), self.budget.cap)
        while not self._closed:
            try:
                client, addr = self.listener.accept()
            except OSError:
                if self._closed:
                    return
                raise
            if not self._connections.acquire(blocking=False):
                log.warning("client %s:%d refused: too many connections", *addr[:2])
                client.close()
                continue
            threading.Thread(target=self._serve_client, args=(client, addr), daemon=True).start()

    def close(self):
        self._closed = True
        self.listener.close()
        for w in self._all:
            w.stop()

    def _serve_client(self, client, addr):
        who = f"{addr[0]}:{addr[1]}"
        client.settimeout(self.idle_timeout)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        worker = up = proxy = None
        try:
            cmd, size = P.recv_request_header(client)
            if cmd != P.HELLO or size != P.REQUEST_SIZE[P.HELLO]:
                raise P.ProtocolError(f"first request {cmd} of {size} bytes, expected HELLO")
            P.recv_exact(client, size)
            # a busy worker frees within idle_timeout of its client's last request, unless that client works
            worker = self.workers.get(timeout=2 * self.idle_timeout + 10)
            up = self._connect(worker)
            P.send_reply(client, P.hello_reply())
            proxy = Proxy(client, up, self.n_devices, self.budget, self.max_graph_bytes)
            proxy.serve()
            log.info("client %s left", who)
        except queue.Empty:
            log.warning("client %s: every worker stayed busy, disconnected", who)
        except socket.timeout:
            log.warning("client %s idle for %.0f s, disconnected", who, self.idle_timeout)
        except P.ProtocolError as e:
            log.warning("client %s disconnected: %s", who, e)
        except (ConnectionError, OSError) as e:
            log.warning("client %s: connection lost (%s)", who, e)
        except Exception:   # a bug here must cost this client only
            log.exception("client %s: unexpected error", who)
        finally:
            client.close()
            if proxy is not None:
                proxy.close()
            if up is not None:
                up.close()
            if worker is not None:
                self._release(worker)
            self._connections.release()

    def _connect(self, worker):
        try:
            return worker.connect()
        except OSError:
            log.warning("GGML's RPC server on port %d is gone, restarting it", worker.port)
            worker.stop()
            worker.start()
            return worker.connect()

    def _release(self, worker):
        # GGML frees a client's buffers when its connection closes; a dead worker is started afresh
        if not worker.alive and not self._closed:
            log.warning("GGML's RPC server on port %d died, restarting it", worker.port)
            worker.stop()
            worker.start()
        self.workers.put(worker)
