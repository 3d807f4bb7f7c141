"""The graph cache on an RPC device: a replayed step computes what a fresh one would.

GGML's RPC client sends GRAPH_RECOMPUTE instead of the graph when a scheduler split keeps its uid, and
the server then runs the graph it stored last time, with the tensor addresses of that time. A replayed
entry gives its held results fresh buffers (and its stand-ins this step's inputs), so every compute on
an RPC device must send its graph again: these tests compare repeated steps on a server with the CPU.
"""

import numpy as np
import pytest

import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim

pytestmark = pytest.mark.skipif(not gg.has_backend("RPC"), reason="this libggml-python has no RPC backend")


def _chain(device, steps=6):
    """w <- 2 w + 1, every intermediate held (each step's result lives in a buffer of its own)."""
    w = ggrad.tensor(np.ones(4, np.float32), device=device)
    held = []
    for _ in range(steps):
        w = w * 2 + 1
        held.append(w)
        w.numpy()
    return [h.numpy() for h in held]


def _training(device, steps=6):
    """Adam steps, the loss tensors kept (as a loop collecting its losses for later does)."""
    ggrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2)).to(device)
    opt = optim.Adam(model.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = ggrad.tensor(rng.standard_normal((8, 6)).astype(np.float32), device=device)
        loss = (model(x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)   # held: each step's loss gets a buffer of its own
    return [loss.item() for loss in losses], [p.numpy() for p in model.parameters()]


def test_held_results_of_replayed_steps_match_the_cpu(rpc_device, one_thread):
    before = ggrad.stats()["cache_hits"]
    got = _chain(rpc_device)
    assert ggrad.stats()["cache_hits"] > before   # the steps did replay the cached graph
    want = _chain("cpu")
    np.testing.assert_array_equal(np.array(got), np.array(want))
    assert want[-1][0] == 127.0


def test_training_steps_on_a_server_match_the_cpu(rpc_device, one_thread):
    losses, params = _training(rpc_device)
    cpu_losses, cpu_params = _training("cpu")
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-6, atol=1e-7)
    for p, q in zip(params, cpu_params):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
