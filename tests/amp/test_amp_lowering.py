"""Autocast under the GPU backends' lowering choices, run on the CPU: the same gradients as the CPU's
choices, and no op that CUDA or Vulkan lack (out_prod of a non-f32 operand; cross_entropy on Vulkan)."""

import numpy as np
import pytest

import ggrad
from ggrad import ggml
from ggrad.autograd import lowering
from ggrad.examples.char_gpt import CharGPT

DTYPES = {"f16": ggrad.float16, "bf16": ggrad.bfloat16}


def _gradients(dtype):
    ggrad.manual_seed(0)
    model = CharGPT(32, 32, 2, 2, 16)
    rng = np.random.default_rng(0)
    x = ggrad.tensor(rng.integers(0, 32, (4, 16)).astype(np.int32))
    y = ggrad.tensor(rng.integers(0, 32, 64).astype(np.int32))
    with ggrad.autocast("cpu", dtype=dtype):
        loss = ggrad.cross_entropy(model(x).reshape(-1, 32), y)
    loss.backward()
    return [loss.item()] + [p.grad.numpy() for p in model.parameters()]


@pytest.mark.parametrize("backend", ["CUDA", "VULKAN"])
@pytest.mark.parametrize("name", sorted(DTYPES))
def test_gpu_lowering_of_an_autocast_step(monkeypatch, backend, name):
    built = []
    real_out_prod, real_ce = ggml.ops.out_prod, ggml.ops.cross_entropy_loss

    def out_prod(ctx, a, b):
        built.append(("out_prod", a.dtype.name, b.dtype.name))
        return real_out_prod(ctx, a, b)

    def cross_entropy_loss(ctx, a, b):
        built.append(("cross_entropy_loss",))
        return real_ce(ctx, a, b)
    monkeypatch.setattr(ggml.ops, "out_prod", out_prod)
    monkeypatch.setattr(ggml.ops, "cross_entropy_loss", cross_entropy_loss)
    want = _gradients(DTYPES[name])
    built.clear()
    with lowering.forced(ggrad.device("cpu"), getattr(lowering, backend)):
        got = _gradients(DTYPES[name])
    assert all(op[1:] == ("f32", "f32") for op in built if op[0] == "out_prod"), built
    if backend == "VULKAN":
        assert ("cross_entropy_loss",) not in built
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-2 * max(1e-3, float(np.abs(w).max())),
                                   err_msg=f"item {i}")
