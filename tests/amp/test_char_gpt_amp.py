"""The char-GPT of the main job trained under autocast bf16 and f16 (with a GradScaler) tracks float32.

200 AdamW steps of a small CharGPT on the standard library's source: the mean training loss of the
last 20 steps under autocast is within 2% of the float32 run's. CI runs 60 steps (about 5 s on 2
cores); `GGRAD_AMP_STEPS=200` runs the full 200.
"""

import os

import numpy as np
import pytest

import ggrad
from ggrad import optim
from ggrad.amp import GradScaler
from ggrad.examples.char_gpt import VOCAB, CharGPT, batches, load_corpus

STEPS = int(os.environ.get("GGRAD_AMP_STEPS", "60"))
CONFIG = dict(d_model=64, layers=2, heads=2, context=32)
BATCH = 16


@pytest.fixture(scope="module")
def corpus():
    train, _ = load_corpus(max_bytes=1 << 20)
    return train


def _train(data, dtype, steps):
    ggrad.manual_seed(0)
    model = CharGPT(len(VOCAB), **CONFIG)
    opt = optim.AdamW(model.parameters(), lr=3e-3)
    scaler = GradScaler("cpu", enabled=dtype is ggrad.float16)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x, y = batches(data, BATCH, CONFIG["context"], rng)
        with ggrad.autocast("cpu", dtype=dtype or ggrad.bfloat16, enabled=dtype is not None):
            logits = model(ggrad.tensor(x))
            loss = ggrad.cross_entropy(logits.reshape(-1, len(VOCAB)), ggrad.tensor(y.reshape(-1)))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype is ggrad.float32 for p in model.parameters())
    return np.array(losses)


@pytest.fixture(scope="module")
def float32_losses(corpus):
    return _train(corpus, None, STEPS)


@pytest.mark.parametrize("dtype", [ggrad.bfloat16, ggrad.float16], ids=["bf16", "f16"])
def test_autocast_tracks_float32(corpus, float32_losses, dtype):
    losses = _train(corpus, dtype, STEPS)
    assert np.isfinite(losses).all()
    assert float32_losses[-20:].mean() < 0.9 * float32_losses[:5].mean()   # it learns at all
    ref, got = float32_losses[-20:].mean(), losses[-20:].mean()
    assert abs(got - ref) / ref < 0.02, f"{dtype.name}: {got:.4f} vs float32 {ref:.4f}"
