"""A worker of a ggrad RPC server: GGML's own RPC server on a loopback port, in a process of its own.

`python -m ggrad.ggml.rpc.worker 127.0.0.1:PORT --device CPU --threads N` is started by `server.Server`,
which alone connects to it. GGML's server rebuilds each graph it receives recursively, so it runs in a
thread with a large stack; the process exits when its parent closes stdin (the parent died or stopped it).
"""

import argparse
import os
import sys
import threading

from .. import backend

_STACK_BYTES = 512 << 20   # create_node recursion: one frame per tensor of the deepest chain in a graph


def serve(endpoint, device_names, n_threads, cache_dir=None):
    """Run GGML's RPC server (no checks of any kind) on `endpoint`; returns only if it could not start."""
    fn = backend.backend_proc("RPC", "ggml_backend_rpc_start_server",
                              "void (*)(const char *, const char *, size_t, size_t, ggml_backend_dev_t *)")
    if fn is None:
        raise backend.DeviceError("this GGML was built without RPC; rebuild libggml-python with "
                                  "CMAKE_ARGS=-DGGML_RPC=ON")
    devs = [backend.device(n) for n in device_names]
    arr = backend.ffi.new("ggml_backend_dev_t[]", [d.ptr for d in devs])
    cache = backend.ffi.NULL if cache_dir is None else backend.ffi.new("char[]", str(cache_dir).encode())
    fn(endpoint.encode(), cache, n_threads, len(devs), arr)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ggrad.ggml.rpc.worker")
    parser.add_argument("endpoint")
    parser.add_argument("--device", action="append", default=None)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
    threading.stack_size(_STACK_BYTES)
    server = threading.Thread(target=serve, daemon=True,
                              args=(args.endpoint, args.device or ["CPU"], args.threads, args.cache_dir))
    server.start()
    server.join()
    sys.exit(3)   # GGML's server returned: it could not bind its port


if __name__ == "__main__":
    main()
