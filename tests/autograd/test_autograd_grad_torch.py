"""ggrad.autograd.grad / backward against torch.autograd: first and higher-order gradients
(create_graph), the errors PyTorch raises, and the rules for unused inputs."""

import numpy as np
import pytest

import ggrad
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def pair(a):
    """The same values as a ggrad and a torch leaf that require grad."""
    return ggrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(ours, theirs, rtol=1e-4, atol=1e-5):
    assert ours is not None and theirs is not None, (ours, theirs)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


def test_grad_returns_gradients_and_leaves_dot_grad_alone():
    a, b = r(3, 4), r(4, 2)
    (x, tx), (w, tw) = pair(a), pair(b)
    gx, gw = ggrad.autograd.grad((x @ w).tanh().sum(), [x, w])
    tgx, tgw = torch.autograd.grad((tx @ tw).tanh().sum(), [tx, tw])
    close(gx, tgx)
    close(gw, tgw)
    assert x.grad is None and w.grad is None
    assert not gx.requires_grad and gx.grad_fn is None


def test_grad_of_non_leaf_and_of_several_outputs():
    (x, tx) = pair(r(5))
    y, ty = x.exp(), tx.exp()
    z, tz = (y * y).sum(), (ty * ty).sum()
    w, tw = (y.sin()).sum(), (ty.sin()).sum()
    gy, = ggrad.autograd.grad([z, w], y, grad_outputs=[None, ggrad.tensor(2.0)])
    tgy, = torch.autograd.grad([tz, tw], ty, grad_outputs=[None, torch.tensor(2.0)])
    close(gy, tgy)


def test_grad_outputs_weight_non_scalar_outputs():
    (x, tx) = pair(r(2, 3))
    v = r(2, 3)
    g, = ggrad.autograd.grad(x.sigmoid() * x, x, grad_outputs=ggrad.tensor(v))
    tg, = torch.autograd.grad(tx.sigmoid() * tx, tx, grad_outputs=torch.tensor(v))
    close(g, tg)


def test_grad_of_an_input_with_itself_and_dict_inputs():
    x, _ = pair(r(3))
    g, = ggrad.autograd.grad(x.sum(), x)
    np.testing.assert_allclose(g.numpy(), np.ones(3))
    w, _ = pair(r(3))
    out = ggrad.autograd.grad((x * w).sum(), {"x": x, "w": w})
    assert list(out) == ["x", "w"]
    np.testing.assert_allclose(out["x"].numpy(), w.numpy())


def test_errors_as_torch():
    x, tx = pair(r(2))
    unused, tunused = pair(r(2))
    for lib, a, u in ((ggrad, x, unused), (torch, tx, tunused)):
        with pytest.raises(RuntimeError, match="index 1 appears to not have been used in the graph"):
            lib.autograd.grad((a * 2).sum(), [a, u])
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
            lib.autograd.grad(a * 2, a)
        with pytest.raises(RuntimeError, match="Mismatch in shape: grad_output\\[0\\] has a shape of"):
            lib.autograd.grad(a * 2, a, grad_outputs=lib.ones(3))
        with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require grad"):
            lib.autograd.grad((a * 2).sum(), lib.ones(2))
        with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
            lib.autograd.grad(lib.ones(2).sum(), a)
        with pytest.raises(ValueError, match="Expected allow_unused to be True"):
            lib.autograd.grad((a * 2).sum(), a, materialize_grads=True, allow_unused=False)
        with pytest.raises(RuntimeError, match="cannot be empty"):
            lib.autograd.grad((a * 2).sum(), [])


def test_allow_unused_and_materialize_grads():
    x, tx = pair(r(2))
    u, tu = pair(r(3))
    gx, gu = ggrad.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    tgx, tgu = torch.autograd.grad((tx * 2).sum(), [tx, tu], allow_unused=True)
    close(gx, tgx)
    assert gu is None and tgu is None
    gx, gu = ggrad.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
    np.testing.assert_array_equal(gu.numpy(), np.zeros(3))


def test_grad_frees_the_graph_unless_retained():
    x, _ = pair(r(3))
    y = (x.exp() * x).sum()
    ggrad.autograd.grad(y, x, retain_graph=True)
    ggrad.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ggrad.autograd.grad(y, x)


def test_backward_twice_raises_and_retain_graph_allows_it():
    x, tx = pair(r(3))
    for a in (x, tx):
        y = (a * a).sum()
        y.backward(retain_graph=True)
        y.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
    close(x.grad, tx.grad)


def test_backward_with_inputs_accumulates_only_there():
    (x, tx), (w, tw) = pair(r(3)), pair(r(3))
    for a, b, lib in ((x, w, ggrad), (tx, tw, torch)):
        h = a * b
        lib.autograd.backward((h * h).sum(), inputs=[b], retain_graph=True)
        (h.exp()).sum().backward(inputs=[a])
    assert x.grad is not None and w.grad is not None
    close(x.grad, tx.grad)
    close(w.grad, tw.grad)


def _mlp(lib, x, w1, b1, w2):
    h = (x @ w1 + b1).tanh()
    s = lib.sigmoid(h * 1.5) * h.exp()
    logits = s @ w2
    return (lib.softmax(logits, -1) * logits).sum() + logits.mean()


def test_second_derivatives_of_a_small_mlp():
    """Gradient penalty: d/dparams of |d loss / d x|^2, for an MLP of tanh, sigmoid, exp, mul, matmul,
    sum, mean and softmax."""
    values = [r(4, 3), r(3, 5) * 0.5, r(5) * 0.1, r(5, 6) * 0.5]
    ours = [ggrad.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    for lib, (x, w1, b1, w2) in ((ggrad, ours), (torch, theirs)):
        gx, = lib.autograd.grad(_mlp(lib, x, w1, b1, w2), x, create_graph=True)
        assert gx.requires_grad
        penalty = (gx * gx).sum()
        penalty.backward()
    for o, t in zip(ours, theirs):
        close(o.grad, t.grad, rtol=2e-3, atol=2e-5)


def test_hessian_vector_product_and_backward_create_graph():
    a, v = r(6), r(6)
    x, tx = pair(a)
    for lib, t in ((ggrad, x), (torch, tx)):
        y = (lib.log_softmax(t * t.sigmoid(), -1) * lib.tensor(v)).sum() + (t.exp() * t).mean()
        y.backward(create_graph=True)
        g = t.grad
        t.grad = None
        (g * lib.tensor(v)).sum().backward()
    close(x.grad, tx.grad, rtol=1e-3)


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm", "cross_entropy", "cross_entropy_soft", "embedding",
                                "conv2d", "avg_pool2d", "softmax_dim0", "norm", "atan"])
def test_second_derivative_through_ops_with_fused_backward(op):
    """Ops whose backward is one GGML node (rms_norm_back, cross_entropy_loss_back, soft_max_ext_back,
    get_rows_back, im2col_back, pool_2d_back) or a composite rule, differentiated twice."""
    a = r(2, 3, 4, 4) if op in ("conv2d", "avg_pool2d") else r(4, 6)
    x, tx = pair(a)
    k = r(2, 3, 3, 3) * 0.3
    labels = np.array([1, 0, 5, 2])
    soft = np.abs(r(4, 6))
    soft /= soft.sum(1, keepdims=True)
    table = r(6, 3)

    def f(lib, t):
        nf = F if lib is ggrad else torch.nn.functional
        if op == "rms_norm":
            return nf.rms_norm(t, (6,), eps=1e-5) * t
        if op == "layer_norm":
            return nf.layer_norm(t, (6,)) * t.sin()
        if op == "cross_entropy":
            return nf.cross_entropy(t * t, lib.tensor(labels))
        if op == "cross_entropy_soft":
            return nf.cross_entropy(t * t, lib.tensor(soft), label_smoothing=0.1)
        if op == "embedding":   # rows of t picked twice: gradient scattered back, then gathered again
            return (nf.embedding(lib.tensor(np.array([0, 2, 2, 3])), t * t) @ lib.tensor(table)) ** 2
        if op == "conv2d":
            return nf.conv2d(t, lib.tensor(k), padding=1) ** 2
        if op == "avg_pool2d":
            return nf.avg_pool2d(t * t, 2) ** 2
        if op == "softmax_dim0":
            return lib.softmax(t * 2.0, 0) * t
        if op == "norm":
            return lib.norm(t * t, dim=1) * 1.0
        return lib.atan(t * t)

    for lib, t in ((ggrad, x), (torch, tx)):
        g, = lib.autograd.grad((f(lib, t) * 1.0).sum(), t, create_graph=True)
        (g * g.exp()).sum().backward()
    close(x.grad, tx.grad, rtol=2e-3, atol=1e-4)


def test_third_derivative():
    x, tx = pair(np.array([0.3, -0.7, 1.1], np.float32))
    for lib, t in ((ggrad, x), (torch, tx)):
        g1, = lib.autograd.grad((t.tanh() * t.sigmoid()).sum(), t, create_graph=True)
        g2, = lib.autograd.grad(g1.sum(), t, create_graph=True)
        g2.sum().backward()
    close(x.grad, tx.grad, rtol=1e-3)


def test_differentiating_a_backward_op_without_a_rule_names_it():
    """max_pool2d's backward is GGML's pool_2d_back, whose own gradient is not there: an error that says
    so, not a wrong value."""
    x, _ = pair(r(1, 1, 4, 4))
    g, = ggrad.autograd.grad(F.max_pool2d(x * x, 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="max_pool2d: its backward .* cannot be differentiated again"):
        g.sum().backward()


def test_second_derivative_through_a_quantized_weight():
    """F.linear with a q8_0 weight: the gradient to x is GGML's out_prod on the quantized blocks;
    differentiated again it is the quantized matmul. torch runs on the dequantized weight."""
    wq = ggrad.quantize(ggrad.tensor(r(8, 32)), "q8_0")
    w = wq.dequantize().numpy()
    x, tx = pair(r(3, 32))
    for lib, t, weight in ((ggrad, x, wq), (torch, tx, torch.tensor(w))):
        nf = F if lib is ggrad else torch.nn.functional
        g, = lib.autograd.grad((nf.linear(t, weight) ** 2).sum(), t, create_graph=True)
        (g * g).sum().backward()
    ours, theirs = x.grad.numpy(), tx.grad.numpy()
    # GGML quantizes x to q8_0 too for the product: about 1% apart, elementwise
    assert np.linalg.norm(ours - theirs) < 0.02 * np.linalg.norm(theirs)


def test_a_primitive_without_a_gradient_rule_is_named():
    """A GGML-built op with no backward, reached by a second backward: RuntimeError naming it."""
    from ggrad.autograd.primitive import Primitive
    from ggrad.ggml import ops

    class HalfBack(Primitive):
        """y = x / 2, a stand-in backward op"""

        @staticmethod
        def build(ctx, graph, x):
            return ops.scale(graph.ctx, x, 0.5)

    class Half(Primitive):
        @staticmethod
        def build(ctx, graph, x):
            return ops.scale(graph.ctx, x, 0.5)

        @staticmethod
        def backward(ctx, g):
            return HalfBack.apply(g)

    x, _ = pair(r(3))
    g, = ggrad.autograd.grad((Half.apply(x) * x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"HalfBack has no gradient rule: it is a backward op \(y = x / 2"):
        g.sum().backward()


@pytest.mark.filterwarnings("ignore:Error detected")
def test_detect_anomaly_names_the_node_that_returned_nan():
    for lib in (ggrad, torch):
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        y = (x.sqrt() * 0.0).sum()   # d sqrt at 0 is inf, times 0: nan
        y.backward(retain_graph=True)   # without anomaly mode: nan in .grad, no error
        assert np.isnan(x.grad.numpy()[0])
        assert not lib.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match="Function 'SqrtBackward0?' returned nan values in its 0th output"):
            with lib.autograd.detect_anomaly():
                assert lib.is_anomaly_enabled()
                y.backward()
        assert not lib.is_anomaly_enabled()


def test_gradient_penalty_training_steps_match_torch():
    """Three SGD steps of loss + |d out / d x|^2 on a small MLP: the repeated step also goes through the
    graph cache, with the double-backward nodes in it."""
    x_values = [r(8, 4) for _ in range(3)]
    models = []
    for lib in (ggrad, torch):
        nn = ggrad.nn if lib is ggrad else torch.nn
        models.append(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)))
    with torch.no_grad():
        for p, tp in zip(models[0].parameters(), models[1].parameters()):
            tp.copy_(torch.tensor(p.numpy()))
    for lib, model in zip((ggrad, torch), models):
        opt = (ggrad.optim if lib is ggrad else torch.optim).SGD(model.parameters(), lr=0.05)
        for xv in x_values:
            x = lib.tensor(xv, requires_grad=True)
            out = model(x)
            g, = lib.autograd.grad(out.sum(), x, create_graph=True)
            loss = (out * out).mean() + ((g * g).sum(1) - 1.0).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    for p, tp in zip(models[0].parameters(), models[1].parameters()):
        close(p, tp, rtol=1e-3, atol=1e-5)
