"""ConvTranspose3d and F.conv_transpose3d against PyTorch: values, input/weight/bias gradients, for stride,
padding, output_padding, dilation, groups, no bias, unbatched input and output_size; errors as PyTorch's."""

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.nn import functional as F

torch = pytest.importorskip("torch")

CASES = [dict(), dict(stride=2), dict(stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2)),
         dict(dilation=(2, 1, 2), padding=1), dict(stride=(1, 2, 2), dilation=(3, 1, 1), output_padding=(2, 1, 0)),
         dict(groups=2, stride=2, padding=1, bias=False), dict(stride=3, padding=2, output_padding=1, dilation=2)]


def _pair(shape, seed):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ggrad.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)


@pytest.mark.parametrize("kwargs", CASES, ids=[str(c) for c in CASES])
def test_module_values_and_gradients(kwargs):
    torch.manual_seed(0)
    theirs = torch.nn.ConvTranspose3d(4, 6, (3, 2, 3), **kwargs)
    ours = nn.ConvTranspose3d(4, 6, (3, 2, 3), **kwargs)
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    g, t = _pair((2, 4, 3, 4, 3), 1)
    y, want = ours(g), theirs(t)
    assert tuple(y.shape) == tuple(want.shape)
    np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    weights = np.random.default_rng(2).standard_normal(tuple(want.shape)).astype(np.float32)
    (y * ggrad.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)
    assert repr(ours) == repr(theirs)


def test_functional_unbatched_and_output_size():
    g, t = _pair((4, 2, 3, 2), 3)
    wg, wt = _pair((4, 3, 2, 2, 2), 4)
    np.testing.assert_allclose(F.conv_transpose3d(g, wg, stride=2, padding=1).detach().numpy(),
                               torch.nn.functional.conv_transpose3d(t, wt, stride=2, padding=1).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ggrad.conv_transpose3d(g, wg).detach().numpy(),
                               torch.conv_transpose3d(t, wt).detach().numpy(), rtol=1e-5, atol=1e-6)
    torch.manual_seed(0)
    theirs = torch.nn.ConvTranspose3d(4, 2, 3, stride=2)
    ours = nn.ConvTranspose3d(4, 2, 3, stride=2)
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x, xt = _pair((1, 4, 3, 3, 3), 5)
    np.testing.assert_allclose(ours(x, output_size=(8, 7, 8)).detach().numpy(),
                               theirs(xt, output_size=(8, 7, 8)).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [dict(stride=2, output_padding=2), dict(output_padding=-1)])
def test_bad_output_padding_raises(kwargs):
    x, w = np.ones((1, 2, 3, 3, 3), np.float32), np.ones((2, 1, 2, 2, 2), np.float32)
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv_transpose3d(torch.tensor(x), torch.tensor(w), **kwargs)
    with pytest.raises((RuntimeError, ValueError)):
        F.conv_transpose3d(ggrad.tensor(x), ggrad.tensor(w), **kwargs)
