"""ggrad.special (torch.special) and the top-level logit / xlogy / sinc against PyTorch: values over wide
ranges (tails relatively: erfc, ndtr, log_ndtr), edge values, gradients, PyTorch's errors."""
import math

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

_WIDE = np.concatenate([np.linspace(-40, 40, 4001), [0.0, -0.0, 1e-30, -1e-30]]).astype(np.float32)


def _values(name, x, rtol, atol=0.0, **kwargs):
    ours = getattr(ggrad.special, name)(ggrad.tensor(x), **kwargs).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(x), **kwargs).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


def test_erfc_keeps_its_relative_accuracy_in_the_tail():
    x = np.linspace(-6, 13, 20001).astype(np.float32)
    exact = np.array([math.erfc(v) for v in x.astype(np.float64)])
    ours = ggrad.erfc(ggrad.tensor(x)).numpy()
    kept = exact > 1e-37
    assert np.max(np.abs(ours[kept] - exact[kept]) / exact[kept]) < 1e-6
    assert np.array_equal(ggrad.erfc(ggrad.tensor([np.inf, -np.inf, np.nan])).numpy()[:2], [0.0, 2.0])


@pytest.mark.parametrize("name", ["ndtr", "log_ndtr", "erfc"])
def test_tails_within_float32_of_the_float64_values(name):
    """Against math.erfc in float64 (PyTorch's ndtr, 1 + erf, stops at 2**-54 even in float64; its float32
    ndtr flushes values below ~1e-37 to 0), and PyTorch's float64 log_ndtr."""
    ours = getattr(ggrad.special, name)(ggrad.tensor(_WIDE)).numpy()
    wide = _WIDE.astype(np.float64)
    if name == "log_ndtr":
        exact = torch.special.log_ndtr(torch.tensor(wide)).numpy()
    else:
        exact = np.array([math.erfc(v) if name == "erfc" else 0.5 * math.erfc(-v / math.sqrt(2)) for v in wide])
    kept = np.abs(exact) > 1e-37
    # ndtr rounds x / sqrt(2) to float32 first: a relative change u of z moves erfc(z) by 2 z^2 u (~1e-5 at z=9)
    rtol = 2e-5 if name == "ndtr" else 2e-6
    np.testing.assert_allclose(ours[kept], exact[kept], rtol=rtol, atol=1e-6 if name == "log_ndtr" else 0)
    assert np.all(ours[~kept] < 2e-37)


@pytest.mark.parametrize("name, rtol, atol", [("expit", 1e-6, 1e-7), ("entr", 1e-6, 1e-6), ("sinc", 1e-5, 1e-6),
                                              ("gammaln", 1e-5, 1e-5), ("psi", 1e-5, 1e-5)])
def test_unary_values(name, rtol, atol):
    x = _WIDE if name not in ("sinc", "gammaln", "psi") else _WIDE[np.abs(_WIDE) < 30]
    if name in ("gammaln", "psi"):
        x = x[(x > 0) | (np.abs(x - np.round(x)) > 1e-3)]
    _values(name, x, rtol, atol)


def test_logit_with_and_without_eps():
    p = np.array([0.0, 1e-6, 0.3, 0.5, 0.999, 1.0, -0.1, 1.2], np.float32)
    _values("logit", p, 1e-6)
    _values("logit", p, 1e-6, eps=1e-3)
    np.testing.assert_allclose(ggrad.tensor(p).logit(eps=0.01).numpy(), torch.tensor(p).logit(eps=0.01).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_family_edges_and_numbers(name):
    x = np.array([0.0, 0.0, 0.0, 2.0, -1.5, 3.0, 0.0, np.nan, 0.0, 2.0], np.float32)
    y = np.array([0.0, np.inf, np.nan, 0.5, 4.0, 0.0, -1.0, 2.0, 1.25, -1.0], np.float32)
    results = []
    for lib in (ggrad, torch):   # values and both gradients at the edges (inf, nan and 0 included)
        tx, ty = lib.tensor(x, requires_grad=True), lib.tensor(y, requires_grad=True)
        out = getattr(lib.special, name)(tx, ty)
        out.sum().backward()
        results.append([out.detach().numpy(), tx.grad.numpy(), ty.grad.numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, equal_nan=True)
    for args in ((2.0, ggrad.tensor(y)), (ggrad.tensor(x), 3.0)):
        t_args = tuple(torch.tensor(a.numpy()) if isinstance(a, ggrad.Tensor) else a for a in args)
        np.testing.assert_allclose(getattr(ggrad.special, name)(*args).numpy(),
                                   getattr(torch.special, name)(*t_args).numpy(), rtol=1e-6, equal_nan=True)


def test_multigammaln_and_its_domain():
    a = np.array([[1.6, 2.0, 7.5], [3.0, 40.0, 1.51]], np.float32)
    for p in (1, 2, 3, 4):
        _values("multigammaln", a, 1e-5, 1e-5, p=p)
    for lib in (ggrad, torch):
        with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
            lib.special.multigammaln(lib.tensor([1.0]), 0)


@pytest.mark.parametrize("name", ["ndtr", "log_ndtr", "logit", "entr", "sinc", "xlogy", "xlog1py", "erfc", "expit",
                                  "gammainc", "multigammaln"])
def test_gradients(name):
    x = np.array([-12.0, -3.0, -0.5, 0.0, 0.4, 2.0, 7.0], np.float32)
    if name in ("logit",):
        x = np.array([0.01, 0.3, 0.5, 0.9], np.float32)
    if name in ("entr", "gammainc", "multigammaln"):
        x = np.array([0.0, 0.2, 1.0, 3.5], np.float32) + (1.1 if name == "multigammaln" else 0.0)
    other = np.linspace(0.5, 2.0, len(x)).astype(np.float32)
    grads = []
    for lib in (ggrad, torch):
        t = lib.tensor(x, requires_grad=True)
        fn = getattr(lib.special, name)
        if name in ("xlogy", "xlog1py"):
            y = fn(t, lib.tensor(other))
        elif name == "gammainc":
            y = fn(lib.tensor(other), t + 0.1)
        elif name == "multigammaln":
            y = fn(t, 2)
        else:
            y = fn(t)
        (y * lib.tensor(np.linspace(1, 2, len(x)).astype(np.float32))).sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=2e-5, atol=1e-6, err_msg=name)


def test_namespace_and_top_level_names():
    for name in ggrad.special.__all__:
        assert hasattr(torch.special, name), name
    for name in ("logit", "xlogy", "sinc", "igamma", "igammac"):
        assert hasattr(ggrad, name) and hasattr(ggrad.Tensor, name)
    with pytest.raises(TypeError, match="special.ndtr"):
        ggrad.special.ndtr([1.0])
