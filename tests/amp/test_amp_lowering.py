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


@pytest.mark.parametrize("backend", ["CPU", "CUDA", "VULKAN"])
def test_products_keep_their_low_precision_rows(backend):
    """A product of a float32 activation keeps the float16 rows it multiplied (for the weight gradient), as
    PyTorch does, not their float32 source: half the bytes held from forward to backward under every
    lowering (CUDA's float32 out_prod casts them back in the backward). The gradients are checked above."""
    ggrad.manual_seed(0)
    w = ggrad.nn.Parameter(ggrad.randn(8, 16))
    x = ggrad.randn(4, 16, requires_grad=True)
    with lowering.forced(ggrad.device("cpu"), getattr(lowering, backend)):
        with ggrad.autocast("cpu", dtype=ggrad.float16):
            y = ggrad.linear(x * 2.0, w)
        product = y.grad_fn.next_functions[0][0]
        assert product.name.startswith("LowPrecisionProduct")
        assert [t.dtype for t in product.ctx.saved_tensors] == [ggrad.float16, ggrad.float16]
        y.float().sum().backward()
    assert x.grad.dtype is ggrad.float32 and w.grad.dtype is ggrad.float32
