"""nn.AdaptiveLogSoftmaxWithLoss against PyTorch's, from the same weights: output, loss, every gradient,
log_prob, predict, 0-d targets, the structure (state-dict keys and shapes) and errors."""
import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("cutoffs, div_value, head_bias", [([5, 12], 2.0, False), ([3], 4.0, True),
                                                            ([2, 6, 10, 15], 1.5, False)])
def test_matches_pytorch(cutoffs, div_value, head_bias):
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs, div_value=div_value, head_bias=head_bias)
    ours = ggrad.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs, div_value=div_value, head_bias=head_bias)
    state = theirs.state_dict()
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {k: tuple(v.shape) for k, v in state.items()}
    ours.load_state_dict({k: ggrad.tensor(v.numpy()) for k, v in state.items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 8)).astype(np.float32)
    target = rng.integers(0, 20, 12)
    target[:3] = [0, 19, cutoffs[0]]
    results = []
    for lib, module in ((ggrad, ours), (torch, theirs)):
        xi = lib.tensor(x, requires_grad=True)
        out = module(xi, lib.tensor(target))
        (out.loss + out.output[0]).backward()
        results.append([out.output.detach().numpy(), out.loss.detach().numpy(), xi.grad.numpy()] +
                       [p.grad if p.grad is None else p.grad.numpy() for p in module.parameters()] +
                       [module.log_prob(lib.tensor(x)).detach().numpy(), module.predict(lib.tensor(x)).numpy(),
                        module(lib.tensor(x[0]), lib.tensor(target[0])).output.detach().numpy()])
    for a, b in zip(*results):
        assert (a is None) == (b is None)   # a cluster no target falls in gets no gradient
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3]),
    lambda lib: lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [0, 3]),
    lambda lib: lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 10]),
    lambda lib: lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(lib.ones(2, 8), lib.tensor([1, 10])),
    lambda lib: lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(lib.ones(3, 8), lib.tensor([1, 2])),
    lambda lib: lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(lib.ones(2, 8), lib.ones(2, 2).long())])
def test_errors_as_pytorchs(call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)):
        call(ggrad)
