"""Tensor methods against PyTorch's: `sum_to_size` (also how the engine sums a custom Function's broadcast
gradient back to its input's shape)."""

import numpy as np
import pytest
import torch

import ggrad


@pytest.mark.parametrize("size", [(3,), ((1, 3),), (2, 1), (torch.Size([2, 3]),), (1, 1), ([3],)])
def test_sum_to_size_as_pytorch(size):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours = ggrad.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    mine, ref = ours.sum_to_size(*size), theirs.sum_to_size(*size)
    np.testing.assert_allclose(mine.numpy(), ref.detach().numpy())
    mine.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy())


@pytest.mark.parametrize("size", [(4,), (1, 2, 3), (3, 3)])
def test_sum_to_size_refuses_what_does_not_broadcast_as_pytorch(size):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(RuntimeError) as theirs:
        torch.tensor(x).sum_to_size(*size)
    with pytest.raises(RuntimeError) as ours:
        ggrad.tensor(x).sum_to_size(*size)
    assert str(theirs.value) in str(ours.value)   # ggrad names the op in front


def test_a_custom_function_s_broadcast_gradient_is_summed_to_its_input():
    class Broadcasting(ggrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g.expand(4, *g.shape)   # broadcast: the engine sums it back

    x = ggrad.ones(2, 3, requires_grad=True)
    Broadcasting.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 4.0))


@pytest.mark.parametrize("size", [(), ("a",)])
def test_sum_to_size_argument_errors_as_pytorch(size):
    with pytest.raises(TypeError):
        torch.ones(2).sum_to_size(*size)
    with pytest.raises(TypeError, match="sum_to_size.*size"):
        ggrad.ones(2).sum_to_size(*size)
