"""Module hooks against PyTorch's: forward pre-hooks and forward hooks (with_kwargs, prepend,
always_call), full backward hooks and backward pre-hooks (what grad_input and grad_output hold, and
replacing them), removal, and the walking helpers (apply, named_modules)."""

import warnings

import numpy as np
import pytest

import ggrad
import ggrad.nn as gnn

torch = pytest.importorskip("torch")

rng = np.random.default_rng(3)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def linear_pair(n_in=3, n_out=2):
    """A ggrad and a torch Linear with the same weights."""
    ours, theirs = gnn.Linear(n_in, n_out), torch.nn.Linear(n_in, n_out)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
    return ours, theirs


def as_lists(grads):
    return [None if g is None else np.asarray(g.detach().numpy() if hasattr(g, "detach") else g.numpy()).tolist()
            for g in grads]


def assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for o, t in zip(as_lists(ours), as_lists(theirs)):
        if o is None or t is None:
            assert o is None and t is None
        else:
            np.testing.assert_allclose(np.array(o), np.array(t), rtol=1e-5, atol=1e-6)


def test_forward_pre_hook_and_forward_hook_replace_input_and_output():
    a = r(4, 3)
    outs, logs = [], []
    for lib, layer in zip((ggrad, torch), linear_pair()):
        log = []
        layer.register_forward_pre_hook(lambda m, args: log.append("pre") or (args[0] * 2.0,))
        layer.register_forward_pre_hook(lambda m, args, kwargs: log.append(("prekw", dict(kwargs))),
                                        with_kwargs=True)
        layer.register_forward_hook(lambda m, args, out: log.append("post") or out + 1.0)
        layer.register_forward_hook(lambda m, args, out: log.append("first"), prepend=True)
        layer.register_forward_hook(lambda m, args, kwargs, out: log.append("postkw"), with_kwargs=True)
        outs.append(layer(lib.tensor(a)))
        logs.append(log)
    assert logs[0] == logs[1] == ["pre", ("prekw", {}), "first", "post", "postkw"]
    np.testing.assert_allclose(outs[0].numpy(), outs[1].detach().numpy(), rtol=1e-5, atol=1e-6)


def test_pre_hook_returning_one_value_and_kwargs():
    class Scale(gnn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, args: args[0] + 1.0)   # a single value becomes (value,)
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 3.0}), with_kwargs=True)
    assert m(ggrad.tensor([1.0]), factor=2.0).tolist() == [6.0]
    bad = Scale()
    bad.register_forward_pre_hook(lambda mod, args, kwargs: 5, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"forward pre-hook must return None or a tuple of \(new_args, new_kwargs\)"):
        bad(ggrad.tensor([1.0]))


def test_handles_remove_hooks():
    layer = gnn.Linear(2, 2)
    calls = []
    h1 = layer.register_forward_hook(lambda m, a, o: calls.append(1))
    with layer.register_forward_pre_hook(lambda m, a: calls.append(0)):
        layer(ggrad.ones(1, 2))
    h1.remove()
    layer(ggrad.ones(1, 2))
    assert calls == [0, 1]


def test_always_call_forward_hook_runs_when_forward_raises():
    class Fails(gnn.Module):
        def forward(self, x):
            raise ValueError("boom")

    for Module in (Fails,):
        m = Module()
        seen = []
        m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
        m.register_forward_hook(lambda mod, args, out: seen.append("never"))
        with pytest.raises(ValueError, match="boom"):
            m(ggrad.ones(1))
        assert seen == [None]


class Two:
    """A module of two Tensor inputs (the second needs no gradient), a number, and two outputs."""

    @staticmethod
    def make(lib):
        base = gnn.Module if lib is ggrad else torch.nn.Module

        class TwoOut(base):
            def forward(self, a, b, k=1.0):
                return a * b * k, a + b

        return TwoOut()


def test_full_backward_hook_grad_input_and_grad_output_as_torch():
    a, b = r(2), r(2)
    seen = {}
    for lib in (ggrad, torch):
        m = Two.make(lib)
        log = seen[lib.__name__] = []
        m.register_full_backward_pre_hook(lambda mod, go, log=log: log.append(("pre", go)))
        m.register_full_backward_hook(lambda mod, gi, go, log=log: log.append(("hook", gi, go)))
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b)
        o1, o2 = m(x, y)
        o1.sum().backward()                      # the second output gets no gradient
        o1, o2 = m(x, y, k=2.0)
        (o1 * 3.0).sum().backward()
        (lambda u, v: (u.sum() + v.sum()).backward())(*m(x, y))
    ours, theirs = seen["ggrad"], seen["torch"]
    assert [e[0] for e in ours] == [e[0] for e in theirs] == ["pre", "hook"] * 3
    for o, t in zip(ours, theirs):
        for og, tg in zip(o[1:], t[1:]):
            assert_same(og, tg)


def test_backward_hooks_replace_gradients():
    a = r(1, 3)
    grads = []
    for lib, layer in zip((ggrad, torch), linear_pair(3, 2)):
        layer.register_full_backward_pre_hook(lambda m, go: (go[0] * 2.0,))
        layer.register_full_backward_hook(lambda m, gi, go: (gi[0] + 7.0,))
        x = lib.tensor(a, requires_grad=True)
        layer(x).sum().backward()
        grads.append((x.grad, layer.weight.grad))
    for o, t in zip(*grads):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_backward_hook_when_no_input_requires_grad():
    seen = {}
    for lib, layer in zip((ggrad, torch), linear_pair(2, 1)):
        log = seen[lib.__name__] = []
        layer.register_full_backward_hook(lambda m, gi, go, log=log: log.append((gi, go)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layer(lib.ones(1, 2)).sum().backward()
    (gi, go), = seen["ggrad"]
    (tgi, tgo), = seen["torch"]
    assert gi == (None,) and tgi == (None,)
    assert_same(go, tgo)
    assert ggrad.nn.Linear(2, 1).weight.grad is None


def test_backward_hook_errors_as_torch():
    for lib, layer in zip((ggrad, torch), linear_pair(2, 2)):
        layer.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
        with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2, "
                                               "but expected 1"):
            layer(lib.ones(1, 2, requires_grad=True)).sum().backward()
    for lib, layer in zip((ggrad, torch), linear_pair(2, 2)):
        layer.register_full_backward_pre_hook(lambda m, go: (go[0], go[0]))
        with pytest.raises(RuntimeError, match="Backward pre hook returned an invalid number of grad_output"):
            layer(lib.ones(1, 2, requires_grad=True)).sum().backward()


def test_hooks_on_submodules_of_a_model_run_in_torchs_order():
    a = r(2, 3)
    orders = []
    for lib in (ggrad, torch):
        nn = gnn if lib is ggrad else torch.nn
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        order = []
        for name, module in model.named_modules():
            module.register_forward_hook(lambda m, i, o, name=name: order.append(("fwd", name)))
            module.register_full_backward_hook(lambda m, gi, go, name=name: order.append(("bwd", name)))
        model(lib.tensor(a, requires_grad=True)).sum().backward()
        orders.append(order)
    assert orders[0] == orders[1]


def test_apply_and_named_modules_walk_as_torch():
    names = []
    for nn in (gnn, torch.nn):
        model = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
        visited = []
        model.apply(lambda m: visited.append(type(m).__name__))
        names.append((visited, [n for n, _ in model.named_modules()]))
    assert names[0] == names[1]
