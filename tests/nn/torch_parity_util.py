"""The oracle for modules with a PyTorch twin: copy torch's weights in (the state_dict keys and shapes must
be the same), run both, and compare the results and every gradient (of the inputs and of each parameter)."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def copy_weights(ours, theirs):
    """Load `theirs`' state_dict into `ours`, after checking that both have the same keys and shapes."""
    ours_shapes = [(k, tuple(v.shape)) for k, v in ours.state_dict().items()]
    assert ours_shapes == [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def leaf(array):
    return ggrad.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def flat(result):
    """The tensors of a result: a tensor, or nested tuples and lists of tensors ((output, (h, c)))."""
    if isinstance(result, (tuple, list)):
        return [t for part in result for t in flat(part)]
    return [result]


def compare(ours, theirs, our_inputs, their_inputs, atol=2e-5, rtol=1e-4, **kwargs):
    """Call both modules (each keyword argument is one value for both or a (ggrad, torch) pair), backward a random weighting of every result, and compare the values
    and all the gradients: of the inputs that require grad and of every parameter."""
    ours_kw = {k: v[0] if isinstance(v, tuple) else v for k, v in kwargs.items()}
    theirs_kw = {k: v[1] if isinstance(v, tuple) else v for k, v in kwargs.items()}
    mine, yours = flat(ours(*our_inputs, **ours_kw)), flat(theirs(*their_inputs, **theirs_kw))
    assert len(mine) == len(yours)
    loss_ours, loss_theirs = 0.0, 0.0
    for a, b in zip(mine, yours):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=rtol, atol=atol)
        w = randn(*b.shape)
        loss_ours = loss_ours + (a * ggrad.tensor(w)).sum()
        loss_theirs = loss_theirs + (b * torch.tensor(w)).sum()
    loss_ours.backward()
    loss_theirs.backward()
    for x, y in zip(flat(our_inputs), flat(their_inputs)):
        if y.requires_grad:
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=rtol, atol=atol)
    theirs_named = dict(theirs.named_parameters())
    ours_named = dict(ours.named_parameters())
    assert sorted(ours_named) == sorted(theirs_named)
    for name, p in ours_named.items():
        np.testing.assert_allclose(p.grad.numpy(), theirs_named[name].grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)


def train_side_by_side(ours, theirs, x, observe, steps=3, lr=0.1, rtol=1e-4, atol=1e-5):
    """`steps` SGD steps of mean(module(x)^2) on both modules from their current states; after each step's
    backward (before its update) the arrays `observe(module, y)` lists must agree."""
    opts = (ggrad.optim.SGD(ours.parameters(), lr=lr), torch.optim.SGD(theirs.parameters(), lr=lr))
    for _ in range(steps):
        seen = []
        for lib, module, opt in ((ggrad, ours, opts[0]), (torch, theirs, opts[1])):
            opt.zero_grad()
            y = module(lib.tensor(x))
            (y * y).mean().backward()
            seen.append(observe(module, y))
            opt.step()
        assert len(seen[0]) == len(seen[1])
        for a, b in zip(*seen):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
