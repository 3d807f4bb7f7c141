"""BatchNorm1d/2d and F.batch_norm against PyTorch: outputs, gradients, running statistics, eval mode."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

RNG = np.random.default_rng(0)

# (layer, input shape, keyword arguments)
CASES = [
    ("BatchNorm2d", (4, 3, 5, 5), {}),
    ("BatchNorm2d", (2, 3, 2, 4), {"momentum": None}),
    ("BatchNorm2d", (3, 2, 3, 3), {"affine": False}),
    ("BatchNorm2d", (3, 2, 3, 3), {"track_running_stats": False}),
    ("BatchNorm1d", (6, 4), {"eps": 1e-3, "momentum": 0.3}),
    ("BatchNorm1d", (3, 4, 7), {}),
]


def _run(T, layer, x, kwargs):
    """Two training steps (the second on 2x), then eval; returns outputs, input gradient, params' grads, state."""
    bn = getattr(T.nn, layer)(x.shape[1], **kwargs)
    if bn.affine:
        with T.no_grad():
            bn.weight.copy_(T.tensor(np.linspace(0.5, 1.5, x.shape[1], dtype=np.float32)))
            bn.bias.copy_(T.tensor(np.linspace(-1, 1, x.shape[1], dtype=np.float32)))
    xi = T.tensor(x, requires_grad=True)
    y = bn(xi)
    weight = T.tensor(np.cos(np.arange(x.size, dtype=np.float32)).reshape(x.shape))
    (y * y * weight).sum().backward()
    bn(xi * 2.0 + 1.0)
    bn.eval()
    z = bn(xi)
    grads = [p.grad.numpy() for p in bn.parameters()]
    state = {k: v.numpy() for k, v in bn.state_dict().items()}
    return y.detach().numpy(), z.detach().numpy(), xi.grad.numpy(), grads, state


@pytest.mark.parametrize("layer, shape, kwargs", CASES)
def test_training_eval_and_running_stats_match_pytorch(layer, shape, kwargs):
    x = RNG.standard_normal(shape).astype(np.float32)
    ref, ours = _run(torch, layer, x, kwargs), _run(ggrad, layer, x, kwargs)
    for what, r, o in zip(("train output", "eval output", "input grad"), ref[:3], ours[:3]):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4, err_msg=what)
    assert len(ours[3]) == len(ref[3])
    for r, o in zip(ref[3], ours[3]):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4)
    assert ours[4].keys() == ref[4].keys()
    for k in ref[4]:
        np.testing.assert_allclose(ours[4][k], ref[4][k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_functional_batch_norm_with_running_stats_in_eval():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    mean, var = np.array([0.1, -0.2, 0.3], np.float32), np.array([1.5, 0.5, 2.0], np.float32)
    want = torch.nn.functional.batch_norm(torch.tensor(x), torch.tensor(mean), torch.tensor(var))
    got = ggrad.nn.functional.batch_norm(ggrad.tensor(x), ggrad.tensor(mean), ggrad.tensor(var))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_bad_inputs_raise_with_the_shapes():
    with pytest.raises(ValueError, match="expected a 4-D input"):
        ggrad.nn.BatchNorm2d(3)(ggrad.ones(2, 3, 4))
    with pytest.raises(ValueError, match="input has 2 channels"):
        ggrad.nn.BatchNorm1d(3)(ggrad.ones(4, 2))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        ggrad.nn.BatchNorm1d(3)(ggrad.ones(1, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):  # PyTorch raises ValueError too
        torch.nn.BatchNorm1d(3)(torch.ones(1, 3))


def test_functional_eval_without_running_stats_raises_as_pytorch():
    with pytest.raises(RuntimeError, match="running_mean must be defined in evaluation mode"):
        torch.nn.functional.batch_norm(torch.ones(2, 3), None, None, training=False)
    with pytest.raises(RuntimeError, match="running_mean must be defined in evaluation mode"):
        ggrad.nn.functional.batch_norm(ggrad.ones(2, 3), None, None, training=False)
    x = RNG.standard_normal((4, 3)).astype(np.float32)   # training without running stats: batch statistics
    np.testing.assert_allclose(ggrad.nn.functional.batch_norm(ggrad.tensor(x), None, None, training=True).numpy(),
                               torch.nn.functional.batch_norm(torch.tensor(x), None, None, training=True).numpy(),
                               rtol=1e-5, atol=1e-5)
