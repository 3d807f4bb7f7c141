"""ggrad.autograd.Function against torch.autograd.Function: the same subclass body, written once and
run on both, gives the same values, gradients, ctx flags and errors."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

rng = np.random.default_rng(2)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(ours, theirs, rtol=1e-5):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-6)


def define(lib, forward, backward, name="Fn", **extra):
    """A Function subclass of `lib` (ggrad.autograd or torch.autograd) with the given static methods."""
    body = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    body.update({k: staticmethod(v) for k, v in extra.items()})
    return type(name, (lib.autograd.Function,), body)


def test_save_for_backward_needs_input_grad_and_non_tensor_arguments():
    flags = {}

    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return (x * w).exp() * scale

    def backward(ctx, g):
        x, w = ctx.saved_tensors
        flags.setdefault(type(x).__module__.split(".")[0], tuple(ctx.needs_input_grad))
        y = (x * w).exp() * ctx.scale
        return g * y * w, g * y * x if ctx.needs_input_grad[1] else None, None

    a, b = r(3), r(3)
    results = []
    for lib in (ggrad, torch):
        Fn = define(lib, forward, backward)
        x = lib.tensor(a, requires_grad=True)
        w = lib.tensor(b)
        y = Fn.apply(x, w, 0.5)
        y.sum().backward()
        results.append((y, x.grad))
    close(results[0][0], results[1][0])
    close(results[0][1], results[1][1])
    assert flags["ggrad"] == flags["torch"] == (True, False, False)


def test_setup_context_form():
    def forward(x):
        return x.sin()

    def setup_context(ctx, inputs, output):
        x, = inputs
        ctx.save_for_backward(x)

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.cos()

    a = r(4)
    out = []
    for lib in (ggrad, torch):
        x = lib.tensor(a, requires_grad=True)
        y = define(lib, forward, backward, setup_context=setup_context).apply(x)
        y.sum().backward()
        out.append((y, x.grad))
    close(out[0][0], out[1][0])
    close(out[0][1], out[1][1])


def test_saved_output_differentiates_twice():
    """A Function that saves its output: with create_graph its backward is differentiated through it."""
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y

    a = r(3)
    grads = []
    for lib in (ggrad, torch):
        x = lib.tensor(a, requires_grad=True)
        y = define(lib, forward, backward, "Exp").apply(x * x)
        g, = lib.autograd.grad(y.sum(), x, create_graph=True)
        g.sum().backward()
        grads.append(x.grad)
    close(grads[0], grads[1], rtol=1e-4)


def test_returning_an_input_keeps_the_input_a_leaf():
    def forward(ctx, x):
        return x

    def backward(ctx, g):
        return g * 5.0

    for lib in (ggrad, torch):
        x = lib.tensor(r(2), requires_grad=True)
        y = define(lib, forward, backward).apply(x)
        assert y is not x and x.is_leaf and y.grad_fn is not None
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [5.0, 5.0])


def test_mark_non_differentiable_and_materialized_gradients():
    seen = {}

    def forward(ctx, x):
        index = x.argmax().float()
        ctx.mark_non_differentiable(index)
        return x * 2.0, index

    def backward(ctx, g, g_index):
        seen.setdefault(type(g).__module__.split(".")[0], g_index.numpy().tolist())
        return g * 2.0

    for lib in (ggrad, torch):
        x = lib.tensor(r(3), requires_grad=True)
        y, index = define(lib, forward, backward).apply(x)
        assert not index.requires_grad and y.requires_grad
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0] * 3)
    assert seen["ggrad"] == seen["torch"] == 0.0


def test_set_materialize_grads_false_passes_none():
    seen = []

    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2.0, x * 3.0

    def backward(ctx, g, h):
        seen.append(h)
        return g * 2.0

    for lib in (ggrad, torch):
        x = lib.tensor(r(2), requires_grad=True)
        a, _ = define(lib, forward, backward).apply(x)
        a.sum().backward()
    assert seen == [None, None]


def test_non_tensor_outputs_pass_through():
    def forward(ctx, x):
        return x * 2.0, 3

    def backward(ctx, g, h):
        assert h is None
        return g

    for lib in (ggrad, torch):
        x = lib.tensor(r(2), requires_grad=True)
        y, three = define(lib, forward, backward).apply(x)
        assert three == 3
        y.sum().backward()


def test_broadcast_gradient_is_summed_down_as_torch():
    def forward(ctx, x):
        return x * 2.0

    def backward(ctx, g):
        return g.new_ones((3, 2))

    grads = []
    for lib in (ggrad, torch):
        x = lib.tensor(r(2), requires_grad=True)
        define(lib, forward, backward).apply(x).sum().backward()
        grads.append(x.grad)
    close(grads[0], grads[1])


def test_errors_as_torch():
    def forward(ctx, x, y):
        return x * y

    def too_few(ctx, g):
        return g

    def too_many(ctx, g):
        return g, g, g

    def wrong_shape(ctx, g):
        return g.new_ones((3,)), None

    a, b = r(2), r(2)
    for lib in (ggrad, torch):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b)
        with pytest.raises(RuntimeError, match=r"function FewBackward returned an incorrect number of gradients "
                                               r"\(expected 2, got 1\)"):
            define(lib, forward, too_few, "Few").apply(x, y).sum().backward()
        with pytest.raises(RuntimeError, match=r"function ManyBackward returned an incorrect number of gradients "
                                               r"\(expected 2, got 3\)"):
            define(lib, forward, too_many, "Many").apply(x, y).sum().backward()
        with pytest.raises(RuntimeError, match=r"Function ShapeBackward returned an invalid gradient at index 0 - "
                                               r"got \[3\] but expected shape compatible with \[2\]"):
            define(lib, forward, wrong_shape, "Shape").apply(x, y).sum().backward()

        class NoBackward(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

        with pytest.raises(NotImplementedError):
            NoBackward.apply(x).sum().backward()


def test_saved_tensors_after_backward_and_after_inplace_change_raise():
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2.0

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2.0

    for lib in (ggrad, torch):
        x = lib.tensor(r(2), requires_grad=True)
        y = define(lib, forward, backward).apply(x)
        y.sum().backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.sum().backward()
        leaf = lib.tensor(r(2))
        w = lib.tensor(r(2), requires_grad=True)
        out = define(lib, forward, backward).apply(leaf * w)
        z = leaf * w
        out2 = define(lib, forward, backward).apply(z)
        z.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out2.sum().backward()
        out.sum().backward()
