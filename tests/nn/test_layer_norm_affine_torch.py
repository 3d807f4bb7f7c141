"""layer_norm with its weight and bias as one recorded op (LayerNormAffine) and one for its gradients: values
and gradients as torch's under every backend's choices (the weight's sums by repeat_back, out_prod or
sum_rows: broadcast.leading_sums_node), second derivatives, frozen parameters, and the calls it leaves."""

import collections

import numpy as np
import pytest

import ggrad
from ggrad.autograd import execution, lowering, primitive

torch = pytest.importorskip("torch")
SHAPE, C = (3, 5, 24), 24


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return ((rng.standard_normal(SHAPE) * 2 + 0.5).astype(np.float32), rng.standard_normal(C).astype(np.float32),
            rng.standard_normal(C).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32))


def _recorded(fn):
    counts = collections.Counter()
    original = primitive.Primitive._record.__func__

    def record(cls, ctx, args, tensors):
        counts[cls.__name__] += 1
        return original(cls, ctx, args, tensors)
    primitive.Primitive._record = classmethod(record)
    try:
        fn()
    finally:
        primitive.Primitive._record = classmethod(original)
    return counts


@pytest.mark.parametrize("choices", ["CPU", "RPC", "CUDA", "VULKAN"])
def test_values_and_gradients_as_torch(no_graph_cache, choices):
    x_np, w_np, b_np, g_np = _data()
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
        x, w, b = (ggrad.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
        out = {}

        def run():
            out["y"] = ggrad.nn.functional.layer_norm(x, (C,), w, b, eps=1e-5)
            (out["y"] * ggrad.tensor(g_np)).sum().backward()
        counts = _recorded(run)
        got = [t.numpy() for t in (out["y"], x.grad, w.grad, b.grad)]
    assert counts["LayerNormAffine"] == counts["LayerNormAffineGrads"] == 1
    assert counts["Mul"] == 2 and not counts["LayerNormCore"]   # the loss product and its gradient
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
    yt = torch.nn.functional.layer_norm(xt, (C,), wt, bt, eps=1e-5)
    (yt * torch.tensor(g_np)).sum().backward()
    for mine, theirs in zip(got, (yt.detach(), xt.grad, wt.grad, bt.grad)):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-4, atol=1e-4)


def test_second_derivatives_as_torch():
    x_np, w_np, b_np, _ = _data(1)
    x, w, b = (ggrad.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
    y = ggrad.nn.functional.layer_norm(x, (C,), w, b)
    yt = torch.nn.functional.layer_norm(xt, (C,), wt, bt)
    gx, gw = ggrad.autograd.grad((y * y).sum(), (x, w), create_graph=True)
    gxt, gwt = torch.autograd.grad((yt * yt).sum(), (xt, wt), create_graph=True)
    ((gx * gx).sum() + (gw * gw).sum()).backward()
    ((gxt * gxt).sum() + (gwt * gwt).sum()).backward()
    for mine, theirs in ((gx, gxt), (gw, gwt), (x.grad, xt.grad), (w.grad, wt.grad), (b.grad, bt.grad)):
        np.testing.assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), rtol=2e-4, atol=2e-4)


def test_frozen_weight_and_bias_get_no_gradient_ops():
    x_np, w_np, b_np, _ = _data(2)
    x = ggrad.tensor(x_np, requires_grad=True)
    ln = ggrad.nn.LayerNorm(C)
    ln.weight.data = ggrad.tensor(w_np)
    ln.requires_grad_(False)
    counts = _recorded(lambda: ln(x).square().sum().backward())
    assert counts["LayerNormAffineGrads"] == 1 and counts["SumTo"] == 0
    xt = torch.tensor(x_np, requires_grad=True)
    torch.nn.functional.layer_norm(xt, (C,), torch.tensor(w_np)).square().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert ln.weight.grad is None and ln.bias.grad is None


@pytest.mark.parametrize("case", ["no_bias", "two_dims", "half_weight"])
def test_other_calls_take_the_composition(case):
    x_np, w_np, b_np, _ = _data(3)
    x = ggrad.tensor(x_np, requires_grad=True)
    w, b, shape = ggrad.tensor(w_np), ggrad.tensor(b_np), (C,)
    if case == "no_bias":
        b = None
    elif case == "two_dims":
        shape = SHAPE[1:]
        w = ggrad.tensor(np.resize(w_np, shape))
        b = ggrad.tensor(np.resize(b_np, shape))
    else:
        w = w.half()
    out = {}
    counts = _recorded(lambda: out.setdefault("y", ggrad.nn.functional.layer_norm(x, shape, w, b)))
    assert counts["LayerNormAffine"] == 0 and counts["LayerNormCore"] == 1
    xt = torch.tensor(x_np)
    wt = torch.tensor(w.float().numpy())
    bt = None if b is None else torch.tensor(b.numpy())
    want = torch.nn.functional.layer_norm(xt, shape, wt, bt).numpy()
    np.testing.assert_allclose(out["y"].float().numpy(), want, rtol=1e-2 if case == "half_weight" else 1e-4,
                               atol=1e-2 if case == "half_weight" else 1e-4)
