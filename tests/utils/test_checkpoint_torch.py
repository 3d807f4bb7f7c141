"""`ggrad.utils.checkpoint`: the same gradients as without checkpointing and as PyTorch's checkpoint, for inputs,
parameters, several outputs, dropout (the recomputation redraws the same mask), keyword arguments, and
checkpoint_sequential; PyTorch's refusals and warnings."""

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.utils.checkpoint import checkpoint, checkpoint_sequential

torch = pytest.importorskip("torch")
from torch.utils.checkpoint import checkpoint as torch_checkpoint  # noqa: E402


def _pair(seed=0):
    """A ggrad block and a PyTorch block with the same weights."""
    torch.manual_seed(seed)
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    ours = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_gradients_match_pytorch_and_plain_backward(use_reentrant):
    ours, theirs = _pair()
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    gx, tx = ggrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (checkpoint(ours, gx, use_reentrant=use_reentrant) ** 2).sum().backward()
    (torch_checkpoint(theirs, tx, use_reentrant=use_reentrant) ** 2).sum().backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_parameters_alone_get_gradients_without_reentrancy_as_pytorch():
    ours, theirs = _pair()
    x = np.ones((2, 4), np.float32)
    checkpoint(ours, ggrad.tensor(x), use_reentrant=False).sum().backward()
    torch_checkpoint(theirs, torch.tensor(x), use_reentrant=False).sum().backward()
    np.testing.assert_allclose(ours[0].weight.grad.numpy(), theirs[0].weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    ours.zero_grad()
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        out = checkpoint(ours, ggrad.tensor(x), use_reentrant=True)
    assert not out.requires_grad                                       # reentrant: no input needs it


def test_dropout_is_redrawn_identically_and_outputs_can_be_several():
    drop = nn.Dropout(0.5)
    x = ggrad.ones(64, requires_grad=True)

    def two(t, scale=1.0):
        y = drop(t) * scale
        return y, y * 2

    ggrad.manual_seed(3)
    a, b = checkpoint(two, x, use_reentrant=False, scale=3.0)
    (a + b).sum().backward()
    kept = a.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 3.0 * 2 * 3, 0.0), rtol=1e-6)


def test_checkpoint_sequential_matches_plain():
    ours, _ = _pair()
    x = ggrad.tensor(np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    checkpoint_sequential(ours, 2, x, use_reentrant=False).sum().backward()
    with_ckpt = [p.grad.numpy() for p in ours.parameters()] + [x.grad.numpy()]
    ours.zero_grad()
    x.grad = None
    ours(x).sum().backward()
    for a, b in zip(with_ckpt, [p.grad.numpy() for p in ours.parameters()] + [x.grad.numpy()]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_refusals_and_warnings_as_pytorch():
    x = ggrad.ones(2, requires_grad=True)
    for fn in (torch_checkpoint, checkpoint):
        lib_x = torch.ones(2, requires_grad=True) if fn is torch_checkpoint else x
        with pytest.raises(ValueError, match="Unexpected keyword arguments"):
            fn(lambda t, k: t * k, lib_x, use_reentrant=True, k=2)
        with pytest.warns(UserWarning, match="use_reentrant"):
            fn(lambda t: t * 2, lib_x)
