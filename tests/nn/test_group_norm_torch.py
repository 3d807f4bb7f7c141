"""GroupNorm, InstanceNorm1d/2d and LocalResponseNorm (and their F forms) against PyTorch: values and
gradients of the input and the affine parameters, running statistics, unbatched input, and errors."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")
from torch_parity_util import compare, copy_weights, leaf, randn  # noqa: E402  (needs torch)


def pair(name, *args, **kwargs):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    with torch.no_grad():   # affine parameters away from 1 and 0
        for p in theirs.parameters():
            p.normal_()
    return copy_weights(getattr(nn, name)(*args, **kwargs), theirs)


@pytest.mark.parametrize("groups,shape", [(3, (2, 6, 5, 4)), (1, (2, 6, 7)), (6, (3, 6, 4, 4)), (2, (4, 4))],
                         ids=["2d", "one_group_1d", "per_channel", "no_spatial"])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(groups, shape, affine):
    ours, theirs = pair("GroupNorm", groups, shape[1], eps=1e-3, affine=affine)
    x, tx = leaf(randn(*shape) * 3 + 1)
    compare(ours, theirs, [x], [tx], atol=1e-4)


def test_functional_group_norm_with_weight_only():
    x, tx = leaf(randn(2, 4, 3, 3))
    w, tw = leaf(randn(4))
    ours, theirs = F.group_norm(x, 2, w), torch.nn.functional.group_norm(tx, 2, tw)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-4, atol=1e-5)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_group_norm_errors():
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(4, 6)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(ggrad.tensor(randn(2, 6, 3)), 4)


@pytest.mark.parametrize("name,shape", [("InstanceNorm1d", (2, 3, 7)), ("InstanceNorm2d", (2, 3, 4, 5)),
                                        ("InstanceNorm1d", (3, 7)), ("InstanceNorm2d", (3, 4, 5))],
                         ids=["1d", "2d", "1d_unbatched", "2d_unbatched"])
@pytest.mark.parametrize("affine", [True, False])
def test_instance_norm(name, shape, affine):
    ours, theirs = pair(name, 3, affine=affine)
    x, tx = leaf(randn(*shape) * 2 - 1)
    compare(ours, theirs, [x], [tx], atol=1e-4)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_instance_norm_running_stats(momentum):
    ours, theirs = pair("InstanceNorm2d", 3, affine=True, track_running_stats=True, momentum=momentum)
    for _ in range(3):
        x = randn(2, 3, 4, 5) * 2 + 0.5
        ours(ggrad.tensor(x))
        theirs(torch.tensor(x))
    for key in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours, key).numpy(), getattr(theirs, key).numpy(), rtol=1e-5, atol=1e-6)
    ours.eval()
    theirs.eval()
    x, tx = leaf(randn(2, 3, 4, 5))
    compare(ours, theirs, [x], [tx], atol=1e-4)


def test_instance_norm_defaults():
    ours, theirs = nn.InstanceNorm1d(4), torch.nn.InstanceNorm1d(4)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name,args", [("GroupNorm", (2, 4)), ("InstanceNorm2d", (4,))])
def test_affine_without_bias(name, args):
    ours, theirs = pair(name, *args, affine=True, bias=False)
    assert repr(ours) == repr(theirs)
    x, tx = leaf(randn(2, 4, 3, 3))
    compare(ours, theirs, [x], [tx], atol=1e-4)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("shape", [(2, 6, 5), (2, 6, 3, 4)], ids=["3d", "4d"])
def test_local_response_norm(size, shape):
    ours = nn.LocalResponseNorm(size, alpha=0.5, beta=0.6, k=1.5)
    theirs = torch.nn.LocalResponseNorm(size, alpha=0.5, beta=0.6, k=1.5)
    x, tx = leaf(randn(*shape))
    compare(ours, theirs, [x], [tx])
    assert repr(ours) == repr(theirs)
