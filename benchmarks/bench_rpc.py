"""What the RPC safety layers cost: a W2 training step and a small read on an RPC device, three ways.

    direct  GGML's client straight to GGML's server (no relay, no proxy: the unprotected path)
    relay   ggrad's client relay in front of GGML's client, to GGML's server
    safe    the relay, to `python -m ggrad.rpc_server` (the checking proxy in front of GGML's server)

Each way runs in a fresh client process against a fresh server on this host (1 thread each). Prints the
median ms of a W2 step (forward, backward, AdamW on rpc:0) and the median us of reading 4 floats back.

    python benchmarks/bench_rpc.py [--steps 20] [--reads 200]
"""

import argparse
import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table  # noqa: E402

from ggrad.ggml.rpc import protocol as P  # noqa: E402

_CLIENT = r"""
import json, statistics, sys, time
import numpy as np
sys.path.insert(0, {bench_dir!r})
import ggrad, ggrad.ggml as gg
from bench_gpt import ggrad_step_fn
from common import median_ms
ggrad.set_num_threads(1)
endpoint, mode = {endpoint!r}, {mode!r}
if mode == "direct":
    fn = gg.backend.backend_proc("RPC", "ggml_backend_rpc_add_server", "ggml_backend_reg_t (*)(const char *)")
    gg.lib.ggml_backend_register(fn(endpoint.encode()))
    dev = [d for d in gg.devices() if d.backend_name == "RPC"][0]
else:
    dev = gg.rpc_add_server(endpoint)[0]
step = ggrad_step_fn(dev.name)
step_ms = median_ms(step, warmup=3, repeats={steps})
y = ggrad.tensor(np.ones(4, np.float32), device=dev) * 2
y.realize()
times = []
for _ in range({reads}):
    t0 = time.perf_counter()
    y.numpy()
    times.append((time.perf_counter() - t0) * 1e6)
print(json.dumps(dict(step_ms=step_ms, read_us=statistics.median(times))))
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(kind, port):
    if kind == "safe":
        cmd = [sys.executable, "-m", "ggrad.rpc_server", "--port", str(port), "--threads", "1"]
    else:
        cmd = [sys.executable, "-m", "ggrad.ggml.rpc.worker", f"127.0.0.1:{port}", "--threads", "1"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    P.wait_listening(port, proc)
    return proc


def run(mode, steps, reads):
    port = _free_port()
    server = _server("safe" if mode == "safe" else "ggml", port)
    try:
        code = _CLIENT.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), endpoint=f"127.0.0.1:{port}",
                              mode=mode, steps=steps, reads=reads)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.kill()
        server.wait()


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args(argv)
    rows = []
    base = None
    for mode in ("direct", "relay", "safe"):
        r = run(mode, args.steps, args.reads)
        base = base or r
        rows.append(dict(path=mode, step_ms=f"{r['step_ms']:.1f}", read_us=f"{r['read_us']:.0f}",
                         step_vs_direct=f"{r['step_ms'] / base['step_ms']:.2f}",
                         read_vs_direct=f"{r['read_us'] / base['read_us']:.2f}"))
    print_table("W2 step and a 4-float read on rpc:0 (medians, 1 server thread, 1 client thread)", rows,
                ["path", "step_ms", "step_vs_direct", "read_us", "read_vs_direct"])


if __name__ == "__main__":
    main()
