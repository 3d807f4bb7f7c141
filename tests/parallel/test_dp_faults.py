"""dp_train over the CPU and an RPC server that is killed mid-run: a RuntimeError naming the server, and the
process (and its CPU) carry on. In a subprocess: the test must not depend on GGML not aborting."""

import subprocess
import sys
import textwrap

import pytest

import ggrad.ggml as gg

pytestmark = pytest.mark.skipif(not gg.has_backend("RPC"), reason="needs GGML built with RPC (see README)")

_SCRIPT = """
import socket, subprocess, sys, threading, time
import numpy as np
import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim
from ggrad.ggml.rpc import protocol as P
from ggrad.parallel import dp_train

ggrad.set_num_threads(1)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
endpoint = f"127.0.0.1:{port}"
server = subprocess.Popen([sys.executable, "-m", "ggrad.rpc_server", "--port", str(port), "--threads", "1"],
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
P.wait_listening(port, server)
rpc = gg.rpc_add_server(endpoint)[0]
rng = np.random.default_rng(0)
x = rng.standard_normal((4096, 6)).astype(np.float32)
y = x[:, :3].argmax(1).astype(np.int32)
model_fn = lambda: nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
optimizer_fn = lambda params: optim.SGD(params, lr=0.1)
killer = threading.Timer(1.0, server.kill)
killer.start()
t0 = time.monotonic()
try:
    dp_train(model_fn, optimizer_fn, ggrad.cross_entropy, x, y, ["cpu", rpc.name], epochs=1000, batch_size=32,
             verbose=0)
except RuntimeError as e:
    assert isinstance(e, gg.DeviceLostError) and endpoint in str(e), e
    print(e)
else:
    raise AssertionError("dp_train finished although its server was killed")
assert time.monotonic() - t0 < 60
model = model_fn()
loss = ggrad.cross_entropy(model(ggrad.tensor(x[:32])), ggrad.tensor(y[:32]))
loss.backward()
assert np.isfinite(loss.item())
print("OK")
"""


def test_dp_train_survives_a_killed_server():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT)], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), \
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
