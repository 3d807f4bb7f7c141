"""Tensor.register_hook, retain_grad and register_post_accumulate_grad_hook against PyTorch's: what
each hook sees, what its return value changes, how often and in which order hooks run."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

rng = np.random.default_rng(1)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def both(a):
    return (ggrad.tensor(a, requires_grad=True), ggrad), (torch.tensor(a, requires_grad=True), torch)


def close(ours, theirs, rtol=1e-5):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-6)


def test_hooks_replace_gradients_of_leaves_and_non_leaves():
    a = r(3)
    results = []
    for x, lib in both(a):
        seen = []
        x.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10.0)
        y = x * 3.0
        y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2.0)
        y.retain_grad()
        (y * y).sum().backward()
        results.append((seen, x.grad, y.grad))
    (seen, xg, yg), (tseen, txg, tyg) = results
    assert len(seen) == len(tseen) == 2
    for s, t in zip(seen, tseen):
        np.testing.assert_allclose(s, t, rtol=1e-5)
    close(xg, txg)
    close(yg, tyg)


def test_retain_grad_sees_the_gradient_after_every_hook():
    """PyTorch runs retain_grad's capture after the tensor's hooks, whenever it was asked for."""
    a = r(2)
    grads = []
    for x, lib in both(a):
        y = x * 2.0
        y.register_hook(lambda g: g + 1.0)
        y.retain_grad()
        y.register_hook(lambda g: g * 2.0)
        y.sum().backward()
        grads.append((y.grad, x.grad))
    close(grads[0][0], grads[1][0])
    close(grads[0][1], grads[1][1])


def test_a_leaf_used_twice_is_hooked_once_with_the_sum():
    a = r(4)
    calls = []
    for x, lib in both(a):
        seen = []
        x.register_hook(lambda g: seen.append(g.numpy().copy()))
        (x * x * 3.0 + x.exp()).sum().backward()
        calls.append(seen)
    assert len(calls[0]) == len(calls[1]) == 1
    np.testing.assert_allclose(calls[0][0], calls[1][0], rtol=1e-5)


def _branches(x, w):
    u = x.exp()
    v = u * w
    return {"u": u, "v": v, "out": v.sin() + u}


def _late_leaf(x, w):
    q = w * 3.0
    p = x * 2.0
    t = q.exp() * p
    return {"p": p, "q": q, "t": t, "out": t + q}


def _skip_connections(x, w):
    a1 = x * 2.0
    a2 = a1 * 3.0
    b1 = w * a2
    return {"a1": a1, "a2": a2, "b1": b1, "out": b1 + a1 + x}


@pytest.mark.parametrize("build", [_branches, _late_leaf, _skip_connections])
def test_hook_order_across_a_branching_graph_is_torchs(build):
    a, b = r(3), r(3)
    orders = []
    for lib in (ggrad, torch):
        x = lib.tensor(a, requires_grad=True)
        w = lib.tensor(b, requires_grad=True)
        order = []
        tensors = dict(x=x, w=w, **build(x, w))
        for name, t in tensors.items():
            t.register_hook(lambda g, name=name: order.append(name))
        (tensors["out"] * tensors["out"]).sum().backward()
        orders.append(order)
    assert orders[0] == orders[1]


def test_hooks_in_autograd_grad_change_what_is_returned():
    a = r(2)
    out = []
    for x, lib in both(a):
        x.register_hook(lambda g: g * 10.0)
        y = x * 3.0
        y.register_hook(lambda g: g * 2.0)
        z = (y * y).sum()
        gx, = lib.autograd.grad(z, x, retain_graph=True)
        gy, = lib.autograd.grad(z, y)
        out.append((gx, gy, x.grad))
    close(out[0][0], out[1][0])
    close(out[0][1], out[1][1])
    assert out[0][2] is None and out[1][2] is None


def test_remove_and_context_manager():
    x = ggrad.tensor(r(2), requires_grad=True)
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    with x.register_hook(lambda g: calls.append(2)):
        (x * 2.0).sum().backward()
    handle.remove()
    handle.remove()
    (x * 2.0).sum().backward()
    assert calls == [1, 2]
    y = x * 2.0
    h = y.register_hook(lambda g: g * 0.0)
    h.remove()
    x.grad = None
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_hook_of_a_dropped_non_leaf_still_runs_and_each_backward_runs_it():
    x = ggrad.tensor(r(2), requires_grad=True)
    calls = []
    y = x * 2.0
    y.register_hook(lambda g: calls.append(g.numpy().copy()))
    z = (y * 3.0).sum()
    del y
    z.backward(retain_graph=True)
    z.backward()
    assert len(calls) == 2
    np.testing.assert_allclose(calls[0], [3.0, 3.0])


def test_post_accumulate_grad_hook():
    a = r(3)
    seen = []
    for x, lib in both(a):
        x.grad = lib.ones(3)
        values = []
        x.register_post_accumulate_grad_hook(lambda t: values.append(t.grad.numpy().copy()))
        (x * x).sum().backward()
        seen.append(values)
    assert len(seen[0]) == len(seen[1]) == 1
    np.testing.assert_allclose(seen[0][0], seen[1][0], rtol=1e-5)


def test_errors_as_torch():
    for x, lib in both(r(2)):
        with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
            lib.ones(2).register_hook(lambda g: g)
        with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf"):
            (x * 2).register_post_accumulate_grad_hook(lambda t: None)
        y = x * 2
        y.register_hook(lambda g: lib.ones(3))
        with pytest.raises(RuntimeError, match="has changed the size of value"):
            y.sum().backward()


def test_hook_under_create_graph_is_differentiated():
    """A hook's replacement gradient is part of the recorded graph when create_graph=True."""
    a = r(3)
    out = []
    for x, lib in both(a):
        y = x.tanh()
        y.register_hook(lambda g, x=x: g * x)
        g, = lib.autograd.grad(y.sum(), x, create_graph=True)
        g.sum().backward()
        out.append(x.grad)
    close(out[0], out[1], rtol=1e-4)


def test_autograd_grad_calls_only_the_hooks_on_its_path():
    """grad(z, x) does not run the part of the graph that leads only elsewhere, nor its hooks."""
    calls = []
    for x, lib in both(r(2)):
        seen = []
        w = lib.tensor(r(2), requires_grad=True)
        off_path = w * 2.0
        off_path.register_hook(lambda g: seen.append("off"))
        on_path = x * 3.0
        on_path.register_hook(lambda g: seen.append("on"))
        lib.autograd.grad((off_path * on_path).sum(), x)
        calls.append(seen)
    assert calls[0] == calls[1] == ["on"]


def test_leaves_reached_by_one_gradient_get_gradients_of_their_own():
    """b_ih and b_hh of an LSTM get the same gradient: an in-place change of one .grad (clip_grad_norm_)
    must not change the other's (it did: both held one Tensor, so clipping scaled it twice)."""
    results = []
    for lib in (torch, ggrad):
        a = lib.ones(3, requires_grad=True)
        b = lib.ones(3, requires_grad=True)
        y = lib.ones(3, requires_grad=True)
        y_sum = y * 2
        y_sum.retain_grad()
        (a + b + y_sum).sum().backward()
        assert a.grad is not b.grad
        a.grad.mul_(0.5)
        lib.nn.utils.clip_grad_norm_([a, b, y], 0.1)
        results.append([t.grad.numpy().copy() for t in (a, b, y, y_sum)])
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
