"""The user's side of an RPC server: the relay process GGML's client talks to, and its failure flag.

`Relay(endpoint)` starts `python -m ggrad.ggml.rpc.relay`, which checks that the peer speaks GGML's RPC
protocol (DeviceError otherwise, within the timeouts) and listens on a loopback port: GGML is given that
port as the server's endpoint. `failure()` reads the relay's `FAILED <reason>` line without blocking, so
checking a device costs one system call.

The relay must outlive every GGML call of this process, buffers freed at interpreter exit included: its
pipes are raw file descriptors that nothing closes before the process ends (the relay exits when its
stdin reaches end-of-file, i.e. when this process is gone).
"""

import os
import select
import time

from ..errors import DeviceError
from .process import spawn

_START_SECONDS = 30.0   # the relay's Python start, on a loaded machine


class Relay:
    def __init__(self, endpoint, connect_timeout=5.0, timeout=300.0):
        self.endpoint = endpoint
        stdin_r, self._stdin = os.pipe()
        self._fd, stdout_w = os.pipe()
        self.proc = spawn("ggrad.ggml.rpc.relay", [endpoint, f"--connect-timeout={connect_timeout}",
                                                   f"--timeout={timeout}"], stdin=stdin_r, stdout=stdout_w)
        os.close(stdin_r)
        os.close(stdout_w)
        line = self._first_line(_START_SECONDS + 3 * connect_timeout)
        word, _, rest = line.partition(" ")
        if word != "READY":
            self.close()
            raise DeviceError(f"could not add RPC server {endpoint!r}: {rest or line or 'the relay did not start'}")
        self.local_endpoint = f"127.0.0.1:{int(rest)}"
        os.set_blocking(self._fd, False)
        self._pending = b""
        self._failure = None

    def _first_line(self, seconds):
        deadline = time.monotonic() + seconds
        out = b""
        fd = self._fd
        while not out.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return "ERROR no answer within the timeout"
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            out += chunk
        return out.decode(errors="replace").strip()

    def failure(self):
        """Why the server was given up on, or None while it is healthy."""
        if self._failure is None:
            try:
                chunk = os.read(self._fd, 4096)
            except BlockingIOError:
                return None
            self._pending += chunk
            if not chunk:
                self._failure = "the relay process exited"
            elif b"\n" in self._pending:
                self._failure = self._pending.split(b"\n", 1)[0].decode(errors="replace").partition(" ")[2]
        return self._failure

    def close(self):
        """Stop a relay that GGML was never given (a failed rpc_add_server)."""
        self.proc.kill()
        self.proc.wait()
        os.close(self._stdin)
        os.close(self._fd)
