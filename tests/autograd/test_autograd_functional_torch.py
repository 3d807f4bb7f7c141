"""ggrad.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) against torch.autograd.functional."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

rng = np.random.default_rng(4)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(ours, theirs, rtol=1e-4):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            close(o, t, rtol)
        return
    assert ours.shape == tuple(theirs.shape), (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-5)


def f_vector(lib, x):
    return (x.tanh() * x).exp()


def f_two(lib, x, w):
    return (x @ w).sigmoid(), (x * x).sum()


def f_scalar(lib, x):
    return (x.sin() * x.exp()).sum() + (x * x).sum() * x.sum()


def run(name, f, arrays, **kwargs):
    results = []
    for lib in (ggrad, torch):
        inputs = tuple(lib.tensor(a) for a in arrays)
        inputs = inputs if len(inputs) > 1 else inputs[0]
        extra = {k: (tuple(lib.tensor(x) for x in v) if isinstance(v, tuple) else lib.tensor(v))
                 for k, v in kwargs.items()}
        fn = getattr(lib.autograd.functional, name)
        results.append(fn(lambda *a: f(lib, *a), inputs, **extra))
    return results


def test_vjp_and_jvp():
    x, v = r(4), r(4)
    ours, theirs = run("vjp", f_vector, [x], v=v)
    close(ours, theirs)
    ours, theirs = run("jvp", f_vector, [x], v=v)
    close(ours, theirs)
    a, w = r(2, 3), r(3, 2)
    ours, theirs = run("vjp", f_two, [a, w], v=(r(2, 2), np.float32(1.5)))
    close(ours, theirs)
    ours, theirs = run("jvp", f_two, [a, w], v=(r(2, 3), r(3, 2)))
    close(ours, theirs)


def test_jacobian_shapes_and_values():
    close(*run("jacobian", f_vector, [r(3)]))
    close(*run("jacobian", f_two, [r(2, 3), r(3, 2)]))
    close(*run("jacobian", lambda lib, x: x * 2.0, [r(2, 2)]))


def test_hessian_vhp_hvp():
    x, v = r(3), r(3)
    close(*run("hessian", f_scalar, [x]))
    close(*run("vhp", f_scalar, [x], v=v))
    close(*run("hvp", f_scalar, [x], v=v))
    close(*run("hessian", lambda lib, a, b: (a * b * b).sum() + (a.exp() * b).sum(), [r(2), r(2)]))


def test_inputs_grad_untouched_and_create_graph():
    x = ggrad.tensor(r(3), requires_grad=True)
    _, g = ggrad.autograd.functional.vjp(lambda t: (t * t).sum(), x)
    assert x.grad is None and not g.requires_grad
    _, g = ggrad.autograd.functional.vjp(lambda t: (t * t * t).sum(), x, create_graph=True)
    assert g.requires_grad
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * x.numpy(), rtol=1e-5)


def test_independent_outputs_zero_or_strict_error():
    for lib in (ggrad, torch):
        x, w = lib.tensor(r(2)), lib.tensor(r(2))
        jac = lib.autograd.functional.jacobian(lambda a, b: a * 2.0, (x, w))
        np.testing.assert_array_equal(jac[1].numpy(), np.zeros((2, 2)))
        with pytest.raises(RuntimeError, match="independent of input 1"):
            lib.autograd.functional.jacobian(lambda a, b: a * 2.0, (x, w), strict=True)
        with pytest.raises(RuntimeError, match="The vector v can only be None"):
            lib.autograd.functional.vjp(lambda a: a * 2.0, x)
        with pytest.raises(RuntimeError, match="v has invalid size"):
            lib.autograd.functional.vjp(lambda a: a * 2.0, x, lib.ones(3))
        with pytest.raises(RuntimeError, match="should contain a single element"):
            lib.autograd.functional.hessian(lambda a: a * 2.0, x)
