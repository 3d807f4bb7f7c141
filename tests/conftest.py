"""Fixtures shared by every test package: allocated CPU tensors, free ports, resident memory."""

import ctypes
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import ggrad.ggml as gg


def _return_freed_heap():
    """Ask glibc to hand freed heap pages back before measuring: late in a long test run it kept freed
    128 MiB blocks resident (reusable, not leaked) until trimmed. Memory never freed stays resident."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except AttributeError:  # not glibc
        pass


def _rss_bytes():
    _return_freed_heap()
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def rss_bytes():
    """`rss_bytes()`: resident set size of this process, from /proc/self/statm."""
    return _rss_bytes


@pytest.fixture
def one_thread():
    """One GGML CPU thread for the test, restored afterwards.

    For tests of tiny graphs: on a 2-core machine GGML's spinning thread pool costs far more than it
    saves there (40-200 ms per step with 2 threads against 1.6 ms with one, measured when loaded).
    """
    import ggrad
    before = gg.threads.policy.fixed   # None: chosen per graph
    ggrad.set_num_threads(1)
    try:
        yield
    finally:
        ggrad.set_num_threads(before)


@pytest.fixture(scope="session")
def free_port():
    """`free_port()`: a TCP port on 127.0.0.1 that nothing listens on right now."""
    return _free_port


@pytest.fixture
def cpu_tensor():
    """`make(dtype, shape)`: a tensor of numpy-order `shape` in a CPU backend buffer.

    Returns (tensor, buffer); both live at least as long as the test.
    """
    keep = []

    def make(dtype, shape):
        ctx = gg.Context(n_tensors=1)
        t = ctx.new_tensor(dtype, tuple(reversed(shape)), name="t")
        buf = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)
        keep.append((ctx, buf))
        return t, buf

    yield make
    keep.clear()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ---- an RPC server for the tests that need a second device (tests/ggml, tests/parallel) --------------
def _wait_listening(port, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace")
            raise RuntimeError(f"rpc server exited with {proc.returncode}:\n{out}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"rpc server did not listen on port {port} within {timeout}s")


# The server runs until this test process ends: its stdin then closes and a watchdog thread exits it
# (cffi releases the GIL during rpc_start_server, so the thread runs). It is not killed earlier because
# GGML has no way to unregister a server: its device stays in devices(), and once the server is gone
# every use of it raises DeviceLostError (tests/ggml/test_rpc_faults.py kills servers of their own).
_SERVER = """
import os, sys, threading
import ggrad.ggml as g
threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
g.rpc_start_server({endpoint!r}, n_threads=1)
"""


@pytest.fixture(scope="session")
def server(free_port):
    """An RPC server serving this machine's CPU on a free loopback port."""
    port = free_port()
    endpoint = f"127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", _SERVER.format(endpoint=endpoint)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, proc)
    except BaseException:
        proc.kill()
        raise
    yield endpoint
    if proc.poll() is not None:
        raise RuntimeError(f"the rpc server died during the tests (exit {proc.returncode})")


@pytest.fixture(scope="session")
def rpc_device(server):
    devs = gg.rpc_add_server(server)
    assert len(devs) == 1, devs
    return devs[0]


@pytest.fixture
def no_graph_cache():
    """The graph cache does not key on the lowering: tests that switch choices build every graph."""
    from ggrad.autograd import execution, trace_cache
    was = trace_cache.ENABLED
    execution.set_graph_cache(False)
    yield
    execution.set_graph_cache(was)
