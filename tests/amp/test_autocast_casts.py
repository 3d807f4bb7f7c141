"""The casts autocast puts in a training step's graph: one per weight a step (reused by forward and
backward, none for its gradient), no float32 -> low -> float32 round trips around an activation that
an op computes in float32 for GGML's sake (except a value that op keeps for its backward, kept in the low
precision as PyTorch keeps it), and the same numbers as torch.autocast."""

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.autograd import execution

torch = pytest.importorskip("torch")

VIEWS = {"RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE", "CONT"}


def _producer(t):
    """The node that computed `t`'s values (through views and copies of the same dtype)."""
    while t.op in VIEWS or (t.op == "CPY" and t.src(0).dtype == t.dtype):
        t = t.src(0)
    return t


def _computed_casts(step):
    """(source dtype, result dtype, source's producer op and dtype, result ne) of every dtype-changing CPY
    node computed while `step()` runs and its graphs are computed."""
    casts = []

    def observe(ptr, ask):
        if not ask:
            t = ggrad.ggml.GTensor(ptr, None)
            if t.op == "CPY" and t.src(0).dtype != t.dtype:
                made = _producer(t.src(0))
                made_from = made.src(0).dtype.name if made.op == "CPY" else None
                casts.append((t.src(0).dtype.name, t.dtype.name, made.op, made_from, tuple(t.ne)))
        return True
    previous = execution.eval_hook
    execution.eval_hook = observe
    try:
        step()
    finally:
        execution.eval_hook = previous
    return casts


class _Tower(nn.Module):
    """A residual MLP with one Linear used twice: x + fc(gelu(fc(x))), then a float32 loss of no table op
    (a table op such as cross_entropy widens its float16 input as PyTorch does)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return x + self.fc(nn.functional.gelu(self.fc(x)))


def _step(model, x, dtype):
    def run():
        with ggrad.autocast("cpu", dtype=dtype):
            h = model(x)
            loss = (h * h).mean()
        model.zero_grad()
        loss.backward()
        ggrad.realize()
    return run


@pytest.mark.parametrize("dtype", [ggrad.float16, ggrad.bfloat16])
def test_weight_cast_once_per_step_even_when_used_twice(dtype):
    ggrad.manual_seed(0)
    model = _Tower()
    x = ggrad.randn(5, 16)
    casts = _computed_casts(_step(model, x, dtype))
    of_weight = [c for c in casts if c[4][:2] == (16, 16)]
    assert of_weight == [("f32", dtype.name, "NONE", None, (16, 16, 1, 1))], casts
    assert model.fc.weight.grad.dtype is ggrad.float32


@pytest.mark.parametrize("dtype", [ggrad.float16, ggrad.bfloat16])
def test_round_trips_only_where_backward_keeps_the_rounded_value(dtype):
    """Nothing rounded to `dtype` is widened back, except the one value an op keeps for its backward (GELU's
    input): PyTorch keeps that in `dtype` (half the bytes of its float32 source, alive from forward to
    backward), so the op reads the rounded value forward and converts it again backward, and its gradient
    goes to the float32 source uncast (no round trip of the gradient). The biases are never cast, x
    (float32) is cast once."""
    ggrad.manual_seed(0)
    model = _Tower()
    x = ggrad.randn(5, 16)
    casts = _computed_casts(_step(model, x, dtype))
    round_trips = [c for c in casts if c[3] == c[1]]
    assert round_trips == [(dtype.name, "f32", "CPY", "f32", (16, 5, 1, 1))] * 2, casts   # forward, backward
    assert not [c for c in casts if c[4][1:] == (1, 1, 1)], "a bias was cast"
    x_casts = [c for c in casts if c[2] == "NONE" and c[4][:2] == (16, 5)]
    assert len(x_casts) == 1, casts
    # the weight, x and gelu's result, what PyTorch casts; gelu's input rounded, and converted twice
    assert len(casts) == 6, casts


def test_tower_matches_torch_autocast():
    """The folded step's loss and gradients against torch.autocast (float16, within its rounding)."""
    ggrad.manual_seed(0)
    model = _Tower()
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((5, 16)).astype(np.float32)
    x = ggrad.tensor(x_np, requires_grad=True)
    with ggrad.autocast("cpu", dtype=ggrad.float16):
        h = model(x)
        loss = ggrad.cross_entropy(h, ggrad.tensor(np.arange(5, dtype=np.int32))) + (h * h).mean()
    loss.backward()

    t_fc = torch.nn.Linear(16, 16)
    with torch.no_grad():
        t_fc.weight.copy_(torch.tensor(model.fc.weight.numpy()))
        t_fc.bias.copy_(torch.tensor(model.fc.bias.numpy()))
    tx = torch.tensor(x_np, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.float16):
        th = tx + t_fc(torch.nn.functional.gelu(t_fc(tx)))
        t_loss = torch.nn.functional.cross_entropy(th, torch.arange(5)) + (th * th).mean()
    t_loss.backward()
    assert h.dtype is ggrad.float32 and th.dtype is torch.float32
    np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=3e-3)
    for got, want in ((x.grad, tx.grad), (model.fc.weight.grad, t_fc.weight.grad), (model.fc.bias.grad, t_fc.bias.grad)):
        want = want.numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-2, atol=1e-2 * np.abs(want).max())


@pytest.mark.parametrize("dtype", [ggrad.float16, ggrad.bfloat16])
def test_attention_scores_are_never_cast(dtype):
    """Inside attention the products keep float32 (PyTorch's fused SDPA never rounds its scores): no cast
    of a (B, H, L, S) tensor in the forward or the backward."""
    ggrad.manual_seed(0)
    mha = nn.MultiHeadAttention(16, 2, batch_first=True)   # ggrad's: is_causal needs no attn_mask
    x = ggrad.randn(3, 12, 16)

    def step():
        with ggrad.autocast("cpu", dtype=dtype):
            out, _ = mha(x, x, x, is_causal=True)
        mha.zero_grad()
        (out.float() ** 2).mean().backward()
        ggrad.realize()
    casts = _computed_casts(step)
    assert casts and not [c for c in casts if c[4][:2] == (12, 12)], casts
    assert mha.in_proj_weight.grad.dtype is ggrad.float32
