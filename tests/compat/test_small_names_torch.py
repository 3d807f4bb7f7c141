"""The smaller names training code uses, checked against PyTorch: constants, isin, normal, as_tensor, concat,
the random state, the default dtype, deterministic and inter-op switches, torch.nn.attention.sdpa_kernel."""

import math

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


def test_constants():
    for name in ("pi", "e", "inf"):
        assert getattr(ggrad, name) == getattr(torch, name)
    assert math.isnan(ggrad.nan) and ggrad.newaxis is torch.newaxis is None


@pytest.mark.parametrize("elements, test, kwargs", [
    ([1, 2, 3, 4], [2, 4, 9], {}), ([[1, 2], [3, 4]], [4, 1], {}), ([1, 2, 3], [2], dict(invert=True)),
    ([1.5, 2.0, -0.0], [0.0, 2.0], {}), ([1, 2], [], {}), ([[5]], [5, 5, 5], dict(assume_unique=False)),
])
def test_isin_as_pytorch(elements, test, kwargs):
    theirs = torch.isin(torch.tensor(elements), torch.tensor(test, dtype=torch.tensor(elements).dtype), **kwargs)
    test_array = np.asarray(test, dtype=np.asarray(elements).dtype)
    ours = ggrad.isin(ggrad.tensor(elements), ggrad.tensor(test_array), **kwargs)
    assert ours.dtype == ggrad.bool and ours.tolist() == theirs.tolist()
    assert ggrad.isin(ggrad.tensor([1, 2, 3]), 2).tolist() == torch.isin(torch.tensor([1, 2, 3]), 2).tolist()
    assert ggrad.isin(2, ggrad.tensor([1, 2])).tolist() == torch.isin(2, torch.tensor([1, 2])).tolist()


def test_normal_shapes_and_errors_as_pytorch():
    for args, kwargs in [((ggrad.zeros(2, 3), 1.0), {}), ((0.0, ggrad.ones(4)), {}), ((0.0, 1.0), dict(size=(2, 5))),
                         ((ggrad.zeros(3, 1), ggrad.ones(1, 2)), {})]:
        targs = [torch.tensor(a.numpy()) if isinstance(a, ggrad.Tensor) else a for a in args]
        assert ggrad.normal(*args, **kwargs).shape == tuple(torch.normal(*targs, **kwargs).shape)
    with pytest.raises(TypeError):
        torch.normal(0.0, 1.0)
    with pytest.raises(TypeError, match="size"):
        ggrad.normal(0.0, 1.0)
    ggrad.manual_seed(0)
    samples = ggrad.normal(2.0, 3.0, size=(20000,)).numpy()
    assert abs(samples.mean() - 2.0) < 0.1 and abs(samples.std() - 3.0) < 0.1
    assert not ggrad.normal(ggrad.zeros(2, requires_grad=True), 1.0).requires_grad


def test_as_tensor_and_concat_as_pytorch():
    t = ggrad.ones(2)
    assert ggrad.as_tensor(t) is t and ggrad.as_tensor(t, dtype=ggrad.int64).dtype == ggrad.int64
    for data in ([1, 2], 3.0, [True], np.arange(3, dtype=np.int32)):
        assert ggrad.as_tensor(data).dtype.torch_name == str(torch.as_tensor(data).dtype).removeprefix("torch.")
    pieces = [ggrad.ones(1, 2), ggrad.zeros(2, 2)]
    assert ggrad.concat(pieces).tolist() == ggrad.concatenate(pieces).tolist() == ggrad.cat(pieces).tolist()
    assert ggrad.concat(pieces, dim=0).shape == tuple(torch.concat([torch.ones(1, 2), torch.zeros(2, 2)]).shape)


def test_rng_state_round_trips_as_pytorchs_does():
    state = ggrad.get_rng_state()
    assert state.dtype == ggrad.uint8 and torch.get_rng_state().dtype == torch.uint8
    first = ggrad.rand(4).tolist()
    ggrad.set_rng_state(state)
    assert ggrad.rand(4).tolist() == first
    with pytest.raises(ValueError, match="set_rng_state"):
        ggrad.set_rng_state(ggrad.tensor([1, 2, 3], dtype=ggrad.uint8))
    s = ggrad.seed()
    assert ggrad.initial_seed() == s


def test_default_dtype_as_pytorch_where_ggrad_can():
    assert ggrad.get_default_dtype() == ggrad.float32 and torch.get_default_dtype() == torch.float32
    ggrad.set_default_dtype(ggrad.float32)
    with pytest.raises(TypeError, match="floating-point"):
        torch.set_default_dtype(torch.int64)
    with pytest.raises(TypeError, match="floating-point"):
        ggrad.set_default_dtype(ggrad.int64)
    with pytest.raises(TypeError, match="float64"):
        ggrad.set_default_dtype(ggrad.float64)
    with pytest.raises(TypeError, match="stays float32"):
        ggrad.set_default_dtype(ggrad.float16)


def test_deterministic_and_interop_switches():
    assert ggrad.are_deterministic_algorithms_enabled() is torch.are_deterministic_algorithms_enabled() is False
    try:
        ggrad.use_deterministic_algorithms(True, warn_only=True)
        assert ggrad.are_deterministic_algorithms_enabled() and ggrad.is_deterministic_algorithms_warn_only_enabled()
    finally:
        ggrad.use_deterministic_algorithms(False)
    ggrad.set_num_interop_threads(3)
    assert ggrad.get_num_interop_threads() == 3
    with pytest.raises(RuntimeError):
        ggrad.set_num_interop_threads(0)


def test_sdpa_kernel_sets_the_backend_flags_for_its_block_as_pytorch():
    from ggrad.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention import SDPBackend as TorchBackend
    assert {b.name: b.value for b in SDPBackend} == {n: getattr(TorchBackend, n).value
                                                     for n in dir(TorchBackend) if n.isupper()}
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]):
        assert not ggrad.backends.cuda.flash_sdp_enabled() and ggrad.backends.cuda.math_sdp_enabled()
        assert ggrad.backends.cuda.mem_efficient_sdp_enabled()
        q = ggrad.ones(1, 2, 3, 4)
        assert ggrad.nn.functional.scaled_dot_product_attention(q, q, q).shape == (1, 2, 3, 4)
    assert ggrad.backends.cuda.flash_sdp_enabled()
    with pytest.raises(TypeError, match="SDPBackend"):
        with sdpa_kernel("math"):
            pass


def test_erfinv_values_edges_and_gradient_as_pytorch():
    x = np.concatenate([np.linspace(-1, 1, 4001), [0.9999, -0.99999, 1e-7, 1.5, -2.0, np.nan]]).astype(np.float32)
    ours, theirs = ggrad.erfinv(ggrad.tensor(x)).numpy(), torch.erfinv(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=5e-7, atol=1e-30)       # inf, -inf and nan where PyTorch's are
    t, u = ggrad.tensor([0.3, -0.7, 0.95], requires_grad=True), torch.tensor([0.3, -0.7, 0.95], requires_grad=True)
    t.erfinv().sum().backward()
    torch.erfinv(u).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), u.grad.numpy(), rtol=1e-5)
    assert ggrad.erfinv(ggrad.tensor([0, 1])).dtype == ggrad.float32     # integers give float32, as PyTorch


@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_enable_gqa_as_pytorch(is_causal):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 6, 5, 4), (2, 2, 5, 4), (2, 2, 5, 3)))
    gq, gk, gv = (ggrad.tensor(a, requires_grad=True) for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ours = ggrad.nn.functional.scaled_dot_product_attention(gq, gk, gv, is_causal=is_causal, enable_gqa=True)
    theirs = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal, enable_gqa=True)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-4, atol=1e-5)
    ours.sum().backward()
    theirs.sum().backward()
    for g, t in ((gq, tq), (gk, tk), (gv, tv)):
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError):
        ggrad.nn.functional.scaled_dot_product_attention(gq, gk[:, :1].repeat(1, 4, 1, 1), gv[:, :1].repeat(1, 4, 1, 1),
                                                         enable_gqa=True)
