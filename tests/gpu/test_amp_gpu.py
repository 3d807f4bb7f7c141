"""Mixed precision on every GPU device of the installed GGML: the autocast GPT step is one split (no op
falls back to the CPU: CUDA's missing f16 out_prod and Vulkan's missing cross_entropy are lowered
around), its loss tracks float32 on the same device, and autocast products agree with the CPU's.

Skipped without a GPU device (see test_gpu.py for how to point ggrad at a CUDA or Vulkan GGML build).
The GPT trains 40 steps; `GGRAD_AMP_STEPS=200` runs the issue's 200.
"""

import os

import numpy as np
import pytest

import ggrad
from ggrad import optim
from ggrad.amp import GradScaler
from ggrad.autograd import memory
from ggrad.examples.char_gpt import VOCAB, CharGPT, batches, load_corpus

from test_gpu import gpu  # noqa: F401  (the parametrized GPU device fixture)

DTYPES = {"f16": ggrad.float16, "bf16": ggrad.bfloat16}
CONFIG = dict(d_model=64, layers=2, heads=2, context=32)
STEPS = int(os.environ.get("GGRAD_AMP_STEPS", "40"))


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(max_bytes=1 << 20)[0]


def _train(device, data, dtype, steps=STEPS):
    """Losses of `steps` AdamW steps of a small CharGPT on `device`, under autocast `dtype` (None: f32)."""
    ggrad.manual_seed(0)
    model = CharGPT(len(VOCAB), **CONFIG).to(device)
    opt = optim.AdamW(model.parameters(), lr=3e-3)
    scaler = GradScaler(enabled=dtype is ggrad.float16)
    kind = device.torch_name.split(":")[0]
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x, y = batches(data, 16, CONFIG["context"], rng)
        with ggrad.autocast(kind, dtype=dtype or ggrad.float16, enabled=dtype is not None):
            logits = model(ggrad.tensor(x, device=device))
            loss = ggrad.cross_entropy(logits.reshape(-1, len(VOCAB)), ggrad.tensor(y.reshape(-1), device=device))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype is ggrad.float32 and p.grad.dtype is ggrad.float32 for p in model.parameters())
    return np.array(losses)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_autocast_gpt_step_is_one_split_and_tracks_float32(gpu, corpus, name):  # noqa: F811
    ref = _train(gpu, corpus, None)
    losses = _train(gpu, corpus, DTYPES[name])
    if gpu.backend_name != "RPC":   # an RPC device's backend is another machine's: its splits say nothing
        splits = memory.runtime(gpu).scheduler.n_splits
        assert splits == 1, f"the autocast {name} step ran in {splits} splits (an op fell back to the CPU)"
    assert np.isfinite(losses).all()
    assert abs(losses[-10:].mean() - ref[-10:].mean()) / ref[-10:].mean() < 0.02, (losses[-10:], ref[-10:])


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_autocast_linear_matches_cpu(gpu, name):  # noqa: F811
    """Forward and gradients of an autocast linear on the GPU against the same on the CPU (CUDA's f16
    product accumulates in f16: hence the tolerance)."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((64, 256), (128, 256), (128,))]
    results = []
    for device in (ggrad.device("cpu"), gpu):
        x, w, b = (ggrad.tensor(a, device=device, requires_grad=True) for a in arrays)
        with ggrad.autocast(device.torch_name.split(":")[0], dtype=DTYPES[name]):
            out = ggrad.linear(x, w, b)
        assert out.dtype is DTYPES[name]
        (out.float() * out.float()).sum().backward()
        results.append([out.float().numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()])
    for what, cpu_value, gpu_value in zip(("out", "dx", "dw", "db"), *results):
        scale = float(np.abs(cpu_value).max())
        np.testing.assert_allclose(gpu_value, cpu_value, rtol=2e-2, atol=2e-2 * scale, err_msg=what)
