"""ggrad.compile_step on every GPU device of the installed GGML: the char-GPT step (f32, autocast bf16, autocast
f16 with a GradScaler) through compile_step gives bitwise the eager steps' losses and weights on the same
device, recorded once and replayed, in one split (skipped without a GPU device: test_gpu.py)."""

import numpy as np
import pytest

import ggrad
from ggrad import optim
from ggrad.amp import GradScaler
from ggrad.examples.char_gpt import VOCAB, CharGPT

from test_gpu import gpu  # noqa: F401  (the parametrized GPU device fixture)

CONFIG = dict(d_model=64, layers=2, heads=2, context=32)
DTYPES = {"f32": None, "bf16": ggrad.bfloat16, "f16": ggrad.float16}


def _train(device, dtype, compiled, steps=8):
    ggrad.manual_seed(0)
    model = CharGPT(len(VOCAB), **CONFIG, dropout=0.1).to(device)
    opt = optim.AdamW(model.parameters(), lr=3e-3)
    scaler = GradScaler(enabled=dtype is ggrad.float16)
    kind = device.torch_name.split(":")[0]

    def step(x, y):
        with ggrad.autocast(kind, dtype=dtype or ggrad.float16, enabled=dtype is not None):
            loss = ggrad.cross_entropy(model(x).reshape(-1, len(VOCAB)), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    run = ggrad.compile_step(step) if compiled else step
    rng = np.random.default_rng(0)
    ggrad.manual_seed(1)
    losses = []
    for _ in range(steps):
        x = rng.integers(0, len(VOCAB), (8, CONFIG["context"])).astype(np.int32)
        y = rng.integers(0, len(VOCAB), 8 * CONFIG["context"]).astype(np.int32)
        losses.append(run(ggrad.tensor(x, device=device), ggrad.tensor(y, device=device)).float().item())
    return losses, [p.detach().numpy() for p in model.parameters()], run


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_compiled_gpt_step_equals_eager_on_the_device(gpu, name):  # noqa: F811
    eager = _train(gpu, DTYPES[name], False)
    compiled = _train(gpu, DTYPES[name], True)
    assert eager[0] == compiled[0]
    for a, b in zip(eager[1], compiled[1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_the_step_is_replayed_in_one_split(gpu, name):  # noqa: F811
    """The whole step runs on the device and is replayed. (Vulkan's buffers all start at one made-up address:
    a gradient is found among the graph's results by its buffer and address together.)"""
    if gpu.backend_name == "RPC":
        pytest.skip("an RPC device's backend is another machine's; the split count is about local backends")
    step = _train(gpu, DTYPES[name], True)[2]
    assert step.replays >= 5
    replay = next(iter(step._replays.values()))
    assert replay.graph.scheduler.n_splits == 1
