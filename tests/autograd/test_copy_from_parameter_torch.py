"""`t.copy_(param)` keeps the parameter's values of that moment, as PyTorch's, though the fused optimizer
steps then write the parameter's memory in place (hand-written EMA and target-network code does this)."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("optimizer", ["SGD", "AdamW", "Adam"])
def test_a_copy_of_a_parameter_keeps_its_values_through_a_step(optimizer):
    results = []
    for lib in (ggrad, torch):
        p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0]))
        kept = lib.zeros(3)
        with lib.no_grad():
            kept.copy_(p)
        opt = getattr(lib.optim, optimizer)([p], lr=0.5)
        (p * p).sum().backward()
        opt.step()
        results.append((kept.numpy().copy(), p.detach().numpy().copy()))
    np.testing.assert_array_equal(results[0][0], [1.0, -2.0, 3.0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-4)   # GGML's Adam places eps a little apart
    np.testing.assert_array_equal(results[0][0], results[1][0])
