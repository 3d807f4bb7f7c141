"""A graph split over a device and the CPU gets its cross-backend inputs (on an RPC device, no GPU needed).

GGML's scheduler rewires the sources of nodes that read another backend's tensor to its own copies;
`Scheduler.alloc` splits each graph twice (reserve, then alloc), and without putting the sources back
in between every such input read garbage: conv2d's d/dx (im2col_back falls back to the CPU on CUDA)
and a whole char-GPT run (NaN) were wrong on the H200 until this was fixed.

Runs in a subprocess: an RPC server's device stays registered in the process that added it.
"""

import subprocess
import sys

import pytest

import ggrad.ggml as gg

pytestmark = pytest.mark.skipif(not gg.has_backend("RPC"), reason="this libggml-python has no RPC backend")

_SERVER = """
import os, sys, threading
import ggrad.ggml as g
threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
g.rpc_start_server(sys.argv[1], n_threads=1)
"""

_CHECK = """
import socket, subprocess, sys, time
import numpy as np
import ggrad.ggml as gg
from ggrad.ggml import lib
endpoint = sys.argv[1]
server = subprocess.Popen([sys.executable, "-c", sys.argv[2], endpoint], stdin=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
host, port = endpoint.split(":")
deadline = time.monotonic() + 30
while True:
    try:
        socket.create_connection((host, int(port)), timeout=0.5).close()
        break
    except OSError:
        if server.poll() is not None or time.monotonic() > deadline:
            sys.exit("the rpc server did not start")
        time.sleep(0.05)
dev = gg.rpc_add_server(endpoint)[0]
# c = 2 * a on the device with `a` in a CPU buffer: the scheduler copies `a` over (a split input)
ctx = gg.Context(n_tensors=8)
a = ctx.new_tensor(gg.f32, (8,))
c = gg.GTensor(lib.ggml_scale(ctx.ptr, a.ptr, 2.0), ctx)
bufs = [gg.Buffer(gg.cpu().buffer_type, gg.alloc_size(gg.cpu().buffer_type, a)),
        gg.Buffer(dev.buffer_type, gg.alloc_size(dev.buffer_type, c))]
bufs[0].place(a)
bufs[1].place(c)
gg.set_data(a, np.arange(8, dtype=np.float32))
graph = gg.Graph(16)
lib.ggml_build_forward_expand(graph.ptr, c.ptr)
sched = gg.Scheduler(dev, 16)
for _ in range(2):   # allocated and computed again, as Replay does
    sched.alloc(graph)
    sched.compute(graph)
    print(gg.get_data(c, (8,)).tolist())
"""


def test_input_from_the_cpu_reaches_a_device_op(free_port):
    r = subprocess.run([sys.executable, "-c", _CHECK, f"127.0.0.1:{free_port()}", _SERVER],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    want = [2.0 * i for i in range(8)]
    assert r.stdout.splitlines() == [str(want), str(want)], r.stdout
