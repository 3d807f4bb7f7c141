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


_RESUME_SCRIPT = """
import socket, subprocess, sys
import numpy as np
import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim
from ggrad.ggml.rpc import protocol as P
from ggrad.parallel import dp_train, read_checkpoint
from ggrad.train import Callback

ggrad.set_num_threads(1)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
server = subprocess.Popen([sys.executable, "-m", "ggrad.rpc_server", "--port", str(port), "--threads", "1"],
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
P.wait_listening(port, server)
rpc = gg.rpc_add_server(f"127.0.0.1:{port}")[0]
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 6)).astype(np.float32)
batches = [(x[i:i + 32], x[i:i + 32, :3].argmax(1).astype(np.int32)) for i in range(0, 256, 32)]

def model_and_optimizer(seed):
    ggrad.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    return model, optim.AdamW(model.parameters(), lr=1e-2)

class KillServer(Callback):
    def on_batch_end(self, batch, logs=None):
        if batch == 3 and self.epoch == 1:   # step 12: after the checkpoint of step 10
            server.kill()
            server.wait()
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

path = sys.argv[1]
model, opt = model_and_optimizer(0)
try:
    dp_train(model, opt, "cross_entropy", batches, devices=["cpu", rpc.name], epochs=3, checkpoint=path,
             checkpoint_every=5, callbacks=[KillServer()], verbose=0)
except gg.DeviceLostError as e:
    print("lost:", e)
else:
    raise AssertionError("dp_train finished although its server was killed")
state = read_checkpoint(path)
assert (state["step"], state["epoch"], state["batch"]) == (10, 1, 2), state["step"]
saved = [state["model"][k].numpy() for k in model.state_dict()]
for steps in (10, 24):   # resume to no step further (the checkpoint's weights), then to the end, on the CPU alone
    fresh, fresh_opt = model_and_optimizer(1)
    history = dp_train(fresh, fresh_opt, "cross_entropy", batches, devices=["cpu"], epochs=3, max_steps=steps,
                       resume=path, verbose=0)
    now = [p.numpy() for p in fresh.parameters()]
    assert all(np.array_equal(a, b) for a, b in zip(saved, now)) == (steps == 10)
assert history.history["loss"] and all(np.isfinite(history.history["loss"]))
print("OK")
"""


def test_killed_server_then_resume_on_the_cpu(tmp_path):
    """A server killed at step 12: DeviceLostError; the checkpoint of step 10 resumes on the CPU alone."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_RESUME_SCRIPT), str(tmp_path / "run.ckpt")],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), \
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
