"""Forward-mode AD (ggrad.autograd.forward_ad, ggrad.func.jvp) against PyTorch's: tangents of ops
and small models, the API's rules and errors."""

import numpy as np
import pytest

import ggrad
from ggrad.autograd import forward_ad as gfw

torch = pytest.importorskip("torch")
tfw = torch.autograd.forward_ad

RNG = np.random.default_rng(0)


def arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


X, T, Y, U = arr(3, 4), arr(3, 4), arr(3, 4), arr(3, 4)

UNARY = {
    "sin_exp": lambda m, x: (x.sin() * x).exp(),
    "tanh": lambda m, x: x.tanh(),
    "sigmoid": lambda m, x: x.sigmoid(),
    "relu": lambda m, x: m.nn.functional.relu(x) * x,
    "gelu": lambda m, x: m.nn.functional.gelu(x),
    "silu": lambda m, x: m.nn.functional.silu(x),
    "softplus": lambda m, x: m.nn.functional.softplus(x),
    "log_abs": lambda m, x: (x.abs() + 1).log(),
    "sqrt_pow": lambda m, x: (x * x + 1).sqrt() ** 3,
    "div": lambda m, x: x / (x * x + 1),
    "softmax": lambda m, x: x.softmax(-1),
    "log_softmax": lambda m, x: m.nn.functional.log_softmax(x, dim=0),
    "layer_norm": lambda m, x: m.nn.functional.layer_norm(x, (4,)),
    "sum_mean": lambda m, x: x.sum(0) * x.mean(),
    "max": lambda m, x: x.max(-1).values,
    "reshape_t": lambda m, x: x.reshape(4, 3).t() @ x.T,
    "cat_index": lambda m, x: m.cat([x[1:], x[:1] * 2], 0),
}


def torch_jvp(fn, x, t):
    return torch.func.jvp(lambda a: fn(torch, a), (torch.tensor(x),), (torch.tensor(t),))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_tangent_of_op_matches_torch(name):
    fn = UNARY[name]
    with gfw.dual_level():
        y = fn(ggrad, gfw.make_dual(ggrad.tensor(X), ggrad.tensor(T)))
        primal, tangent = gfw.unpack_dual(y)
    expected_y, expected_t = torch_jvp(fn, X, T)
    np.testing.assert_allclose(primal.numpy(), expected_y.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tangent.numpy(), expected_t.numpy(), rtol=1e-4, atol=1e-5)


def test_two_duals_sum_their_tangents():
    fn = lambda m, a, b: (a * b).tanh() + a / (b * b + 1)   # noqa: E731
    with gfw.dual_level():
        a = gfw.make_dual(ggrad.tensor(X), ggrad.tensor(T))
        b = gfw.make_dual(ggrad.tensor(Y), ggrad.tensor(U))
        got = gfw.unpack_dual(fn(ggrad, a, b)).tangent
    with tfw.dual_level():
        a = tfw.make_dual(torch.tensor(X), torch.tensor(T))
        b = tfw.make_dual(torch.tensor(Y), torch.tensor(U))
        expected = tfw.unpack_dual(fn(torch, a, b)).tangent
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def model_pair():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3), torch.nn.LayerNorm(3))
    gm = ggrad.nn.Sequential(ggrad.nn.Linear(4, 8), ggrad.nn.Tanh(), ggrad.nn.Linear(8, 3), ggrad.nn.LayerNorm(3))
    gm.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return gm, tm


def test_jvp_of_a_small_model_in_its_input():
    gm, tm = model_pair()
    got = ggrad.func.jvp(gm, (ggrad.tensor(X),), (ggrad.tensor(T),))
    expected = torch.func.jvp(tm, (torch.tensor(X),), (torch.tensor(T),))
    for g, t in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_jvp_of_a_loss_in_the_weights():
    """A directional derivative of the loss along a parameter direction, as torch.func.functional_call
    users take it: the first layer's weight made dual inside the model's forward."""
    gm, tm = model_pair()
    direction = arr(8, 4)
    target = arr(3, 3)

    def g_loss(w):
        h = ggrad.nn.functional.linear(ggrad.tensor(X), w, gm[0].bias).tanh()
        return ggrad.nn.functional.mse_loss(gm[3](gm[2](h)), ggrad.tensor(target))

    def t_loss(w):
        h = torch.nn.functional.linear(torch.tensor(X), w, tm[0].bias).tanh()
        return torch.nn.functional.mse_loss(tm[3](tm[2](h)), torch.tensor(target))

    got = ggrad.func.jvp(g_loss, (ggrad.tensor(tm[0].weight.detach().numpy()),), (ggrad.tensor(direction),))
    expected = torch.func.jvp(t_loss, (tm[0].weight.detach(),), (torch.tensor(direction),))
    for g, t in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_func_jvp_tuples_zeros_and_aux_as_torch():
    fns = lambda m: (lambda a, b: (a.sin(), b * 0 + 1))   # noqa: E731
    got = ggrad.func.jvp(fns(ggrad), (ggrad.tensor(X), ggrad.tensor(Y)), (ggrad.tensor(T), ggrad.tensor(U)))
    expected = torch.func.jvp(fns(torch), (torch.tensor(X), torch.tensor(Y)), (torch.tensor(T), torch.tensor(U)))
    for g_group, t_group in zip(got, expected):
        for g, t in zip(g_group, t_group):
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
    out, tangent, aux = ggrad.func.jvp(lambda a: (a.exp(), a.detach() * 2), (ggrad.tensor(X),), (ggrad.tensor(T),),
                                       has_aux=True)
    np.testing.assert_allclose(tangent.numpy(), np.exp(X) * T, rtol=1e-5)
    np.testing.assert_allclose(aux.numpy(), X * 2)
    assert not out.requires_grad and not tangent.requires_grad


def test_func_jvp_argument_errors_as_torch():
    p, t = (ggrad.tensor(X),), (ggrad.tensor(T),)
    for lib, prim, tan in ((torch, torch.tensor(X), torch.tensor(T)), (ggrad, p[0], t[0])):
        with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
            lib.func.jvp(lambda a: a, prim, (tan,))
        with pytest.raises(RuntimeError, match="Expected primals and tangents to have the same python structure"):
            lib.func.jvp(lambda a: a, (prim,), (tan, tan))
        with pytest.raises(RuntimeError, match="different size"):
            lib.func.jvp(lambda a: a, (prim,), (tan[:2],))


def test_tangent_of_unrelated_and_after_exit_is_none():
    p, t = ggrad.tensor(X), ggrad.tensor(T)
    tp, tt = torch.tensor(X), torch.tensor(T)
    for lib, fw, prim, tan in ((ggrad, gfw, p, t), (torch, tfw, tp, tt)):
        assert fw.unpack_dual(prim).tangent is None
        with fw.dual_level() as level:
            assert level == 0
            d = fw.make_dual(prim, tan)
            assert fw.unpack_dual(d).tangent is tan
            assert fw.unpack_dual(prim * 3).tangent is None
            np.testing.assert_array_equal(fw.unpack_dual(d * 0).tangent.numpy(), np.zeros_like(X))
            y = d.exp()
        assert fw.unpack_dual(y).tangent is None
        assert fw.unpack_dual(d).tangent is None


def test_make_dual_errors_as_torch():
    for lib, fw in ((torch, tfw), (ggrad, gfw)):
        prim = lib.tensor(X)
        with pytest.raises(RuntimeError, match="no level exists"):
            fw.make_dual(prim, lib.tensor(T))
        with fw.dual_level():
            with pytest.raises(RuntimeError, match=r"Tensor is of size \[3, 4\] while the given forward gradient "
                                                   r"is of size \[4\]"):
                fw.make_dual(prim, lib.tensor(T[0]))
            with pytest.raises(ValueError, match="Expected primal to be floating point"):
                fw.make_dual(lib.arange(3), lib.tensor(T[0, :3]))
            with pytest.raises(ValueError, match="Expected tangent to be floating point"):
                fw.make_dual(lib.tensor(X[0, :3]), lib.arange(3))
            with pytest.raises(RuntimeError, match="already has a forward gradient"):
                fw.make_dual(fw.make_dual(prim, lib.tensor(T)), lib.tensor(T))
            with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
                with fw.dual_level():
                    pass


def test_dual_of_a_tensor_requiring_grad_is_differentiable_in_reverse_too():
    results = []
    for lib, fw in ((torch, tfw), (ggrad, gfw)):
        w = lib.tensor(X, requires_grad=True)
        with fw.dual_level():
            y = fw.make_dual(w, lib.tensor(T)).sin()
            tangent = fw.unpack_dual(y).tangent
            y.sum().backward()
        results.append((tangent.detach().numpy(), w.grad.numpy()))
    for got, expected in zip(results[1], results[0]):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
