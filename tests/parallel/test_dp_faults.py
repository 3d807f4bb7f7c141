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


# a `python -m ggrad.rpc_server` on a free port, for the scripts below: (process, endpoint, its device)
_START_SERVER = """
import socket, subprocess, sys
import ggrad.ggml as gg
from ggrad.ggml.rpc import protocol as P


def start_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "ggrad.rpc_server", "--port", str(port), "--threads", "1"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    P.wait_listening(port, server)
    endpoint = f"127.0.0.1:{port}"
    return server, endpoint, gg.rpc_add_server(endpoint)[0]
"""

_RESUME_SCRIPT = _START_SERVER + """
import socket, subprocess, sys
import numpy as np
import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim
from ggrad.ggml.rpc import protocol as P
from ggrad.parallel import dp_train, read_checkpoint
from ggrad.train import Callback

ggrad.set_num_threads(1)


server, _, rpc = start_server()
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
# on a fresh server in place of the dead one, the resumed run ends where an uninterrupted run ends, bitwise
replacement, _, rpc2 = start_server()
finals = []
for seed, resume in ((0, None), (1, path)):
    fresh, fresh_opt = model_and_optimizer(seed)
    dp_train(fresh, fresh_opt, "cross_entropy", batches, devices=["cpu", rpc2.name], epochs=3, resume=resume,
             verbose=0)
    finals.append([p.numpy() for p in fresh.parameters()])
assert all(np.array_equal(a, b) for a, b in zip(*finals)), "the resumed run differs from the uninterrupted one"
replacement.kill()
replacement.wait()
print("OK")
"""


def test_killed_server_then_resume_on_the_cpu_or_a_fresh_server(tmp_path):
    """A server killed at step 12: DeviceLostError; the checkpoint of step 10 resumes on the CPU alone, and
    on the CPU and a fresh server to the weights of an uninterrupted run on the CPU and a server, bitwise."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_RESUME_SCRIPT), str(tmp_path / "run.ckpt")],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), \
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"


_FAULT_POINTS_SCRIPT = _START_SERVER + """
import socket, subprocess, sys, time
import numpy as np
import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim
from ggrad.ggml.rpc import protocol as P
from ggrad.parallel import dp_train
from ggrad.train import Callback

ggrad.set_num_threads(1)
rng = np.random.default_rng(0)
x = rng.standard_normal((128, 6)).astype(np.float32)
batches = [(x[i:i + 16], x[i:i + 16, :3].argmax(1).astype(np.int32)) for i in range(0, 128, 16)]



def kill(server):
    server.kill()
    server.wait()


class Snapshot(Callback):
    '''Keeps the model's weights at the end of each step; kills the server after step `kill_after`.'''
    def __init__(self, server, kill_after):
        super().__init__()
        self.server, self.kill_after, self.weights = server, kill_after, None
    def on_batch_end(self, batch, logs=None):
        self.weights = [p.numpy().copy() for p in self.model.parameters()]
        if batch == self.kill_after:
            kill(self.server)


def run(point):
    '''dp_train on the CPU and a server that dies at `point`: a DeviceLostError naming the server, the
    model (replica 0, on the CPU) left as the last whole step made it, and the CPU still trains it.'''
    server, endpoint, rpc = start_server()
    ggrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = optim.SGD(model.parameters(), lr=0.1)
    before = [p.numpy().copy() for p in model.parameters()]
    snapshot = Snapshot(server, 1 if point == "between steps" else None)
    calls = []

    def loss_fn(out, target):   # "during a step": the server dies after the CPU's graph went to its thread
        calls.append(out.device.name)
        if point == "during a step" and len(calls) == 6:   # step 3, the server's replica
            assert out.device.name == rpc.name
            kill(server)
        return ggrad.cross_entropy(out, target)

    if point == "before dp_train":
        kill(server)
    t0 = time.monotonic()
    try:
        dp_train(model, opt, loss_fn, batches, devices=["cpu", rpc.name], callbacks=[snapshot], verbose=0)
    except RuntimeError as e:
        assert isinstance(e, gg.DeviceLostError) and endpoint in str(e), (point, e)
    else:
        raise AssertionError(f"{point}: dp_train finished although its server was dead")
    assert time.monotonic() - t0 < 60, point
    expected = before if snapshot.weights is None else snapshot.weights
    assert all(np.array_equal(p.numpy(), w) for p, w in zip(model.parameters(), expected)), point
    assert len(dp_train(model, opt, "cross_entropy", batches, devices=["cpu"], verbose=0).history["loss"]) == 1
    return point


for point in ("before dp_train", "between steps", "during a step"):
    print(run(point), "OK")
print("OK")
"""


def test_a_dead_server_before_between_and_during_steps():
    """The server dies before dp_train starts (the replica cannot be copied to it), between two steps, and
    inside a step (after the CPU replica's graph was handed to its thread): each time a DeviceLostError
    (a RuntimeError) naming the server; the model keeps the last whole step's weights (no device applied
    a partial update) and the same process trains it on the CPU afterwards."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_FAULT_POINTS_SCRIPT)], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), \
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
