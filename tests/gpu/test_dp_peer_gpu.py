"""Data parallel over two CUDA devices with the gradients all-reduced on them (GGML's copies between the
devices, sums in the update graphs), in a subprocess: on a host with two GPUs, cuda:0 and cuda:1 (peer
copies); with one, GGML_CUDA_DEVICES=2 shows it as CUDA0 and CUDA1, two GGML backends of one GPU with
streams of their own (copies within the GPU). The subprocess sets the variables before GGML's CUDA backend
starts and keeps a GGML abort out of pytest. Skipped without a CUDA device.
"""

import os
import subprocess
import sys

import pytest

import ggrad

_SCRIPT = r"""
import numpy as np
import ggrad
from ggrad import nn, optim
from ggrad.autograd.device_copy import copy_to_device
from ggrad.parallel import DataParallel

devices = ["cuda:0", "cuda:1"]
x = np.random.default_rng(0).standard_normal((64, 12)).astype(np.float32)
y = x[:, :5].argmax(1).astype(np.int32)
probe = ggrad.tensor(x, device=devices[1]) * 3.0
assert np.array_equal(copy_to_device(probe, devices[0]).numpy(), probe.numpy()), "a copy changed bytes"

def model():
    ggrad.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 5))

single = model().to(devices[0])
opt = optim.AdamW(single.parameters(), lr=1e-2)
want = []
for _ in range(50):
    loss = ggrad.cross_entropy(single(ggrad.tensor(x, device=devices[0])), ggrad.tensor(y, device=devices[0]))
    opt.zero_grad()
    loss.backward()
    ggrad.nn.utils.clip_grad_norm_(single.parameters(), 0.5)
    opt.step()
    want.append(loss.item())
replica0 = model()
dp = DataParallel(replica0, devices, optim.AdamW(replica0.parameters(), lr=1e-2), bucket_mb=0.01)
try:
    got = [dp.step(x, y, ggrad.cross_entropy, max_grad_norm=0.5) for _ in range(50)]
finally:
    dp.close()
assert [p.device.name for p in dp.replicas[1].parameters()][0] == "CUDA1"
for a, b in zip(dp.replicas[0].parameters(), dp.replicas[1].parameters()):
    assert np.array_equal(a.numpy(), b.numpy()), "replicas must stay identical bit for bit"
np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5)
# GGML's cuBLAS takes f32 products in TF32 (~1e-3 relative): two half batches and one whole batch round their
# gradients differently, and 50 AdamW steps at lr 1e-2 carry that to ~2e-4 in a parameter (on the CPU, the
# same training with 1e-3 relative noise in its gradients ends 2.1e-4 past rtol 1e-3; with 1e-7, 1e-8).
for a, b in zip(dp.module.parameters(), single.parameters()):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-3)
n_bytes = 4 * sum(p.numel() for p in replica0.parameters())
assert dp.reduce_bytes == 2 * n_bytes, (dp.reduce_bytes, n_bytes)
print(f"OK {[d.description for d in dp.devices]}: reduce {1e3 * dp.timings['reduce']:.2f} ms of a "
      f"{1e3 * dp.timings['step']:.2f} ms step, {dp.reduce_bytes} bytes copied")
"""


def _cuda_devices():
    return [d for d in ggrad.devices() if d.backend_name == "CUDA"]


@pytest.mark.skipif(not _cuda_devices(), reason="no CUDA device in this GGML build")
def test_two_cuda_devices_reduce_on_the_devices_and_stay_identical():
    env = dict(os.environ, GGML_CUDA_P2P="1")
    if len(_cuda_devices()) < 2:
        env["GGML_CUDA_DEVICES"] = "2"   # one GPU shown as two devices
    run = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"exit {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
    print(run.stdout.strip().splitlines()[-1])
