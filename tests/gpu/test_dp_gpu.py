"""Data parallel over two backends of one GPU: the GPU itself and an RPC server serving the same GPU.

Two GPUs of one host are not lent to this project, so the multi-device paths of DataParallel (split,
gradient reduction, the update on each replica) are checked on the GPU through two GGML backends: the
direct one (cuda:0, vulkan:0) and `python -m ggrad.rpc_server --device <gpu>` on loopback. Skipped where
the installed GGML has no GPU or no RPC (see test_gpu.py for how to point it at a GPU build).
"""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim
from ggrad.ggml.rpc import protocol
from ggrad.parallel import DataParallel

from test_gpu import gpu  # noqa: F401  (the parametrized GPU device fixture)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gpu_pair(gpu):  # noqa: F811
    """[the GPU, the same GPU behind an RPC server]; the server lives for the test."""
    if not gg.has_backend("RPC"):
        pytest.skip("needs GGML built with -DGGML_RPC=ON")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ggrad.rpc_server", "--port", str(port), "--device",
                             gpu.torch_name, "--threads", "1"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        protocol.wait_listening(port, proc)
        served = gg.rpc_add_server(f"127.0.0.1:{port}")
        assert len(served) == 1, served
        yield [gpu, served[0]]
    finally:
        proc.kill()
        proc.wait()


def _model():
    ggrad.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 64), nn.GELU(), nn.Linear(64, 5))


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 12)).astype(np.float32)
    return x, (x[:, :5].argmax(1)).astype(np.int32)


def test_two_backends_of_one_gpu_train_as_one_device(gpu_pair):
    x, y = _data()
    single = _model().to(gpu_pair[0])
    opt = optim.SGD(single.parameters(), lr=0.1, momentum=0.9)
    want = []
    for _ in range(8):
        loss = ggrad.cross_entropy(single(ggrad.tensor(x, device=gpu_pair[0])), ggrad.tensor(y, device=gpu_pair[0]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        want.append(loss.item())
    model = _model()
    dp = DataParallel(model, gpu_pair, optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    try:
        got = [dp.step(x, y, ggrad.cross_entropy) for _ in range(8)]
        reduce_ms = 1e3 * dp.timings["reduce"]
    finally:
        dp.close()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5)
    for a, b in zip(dp.replicas[0].parameters(), dp.replicas[1].parameters()):
        assert np.array_equal(a.numpy(), b.numpy()), "replicas must stay identical bit for bit"
    for a, b in zip(dp.module.parameters(), single.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-4)
    print(f"{gpu_pair[0].name} + {gpu_pair[1].name}: reduction {reduce_ms:.2f} ms in the last step")
