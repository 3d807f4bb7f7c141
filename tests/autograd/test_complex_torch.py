"""Complex tensors (complex64 over float32 pairs: complex_tensor.py) against PyTorch: arithmetic with
complex, real and number operands, the shape ops, real/imag/abs/angle/conj/exp/sum/mean/matmul, polar and
complex, their gradients, dtype, printing and PyTorch's errors."""
import warnings

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def _pairs(*shape):
    return RNG.standard_normal(shape + (2,)).astype(np.float32)


def _both(pairs):
    """The same complex values as a (ggrad, torch) pair of complex tensors over leaf float pairs."""
    ours, theirs = ggrad.tensor(pairs, requires_grad=True), torch.tensor(pairs, requires_grad=True)
    return (ours, theirs), (ggrad.view_as_complex(ours), torch.view_as_complex(theirs))


def _check(fn, *pair_shapes, real_shapes=(), rtol=1e-5, atol=1e-5):
    """fn(lib, *complex inputs, *real inputs) with ggrad and with torch: values, and the gradients of a real
    loss (a weighted sum of view_as_real's values) reaching every input."""
    pairs = [_pairs(*s) for s in pair_shapes]
    reals = [RNG.standard_normal(s).astype(np.float32) for s in real_shapes]
    results = {}
    for lib in (ggrad, torch):
        leaves = [lib.tensor(p, requires_grad=True) for p in pairs] + [lib.tensor(r, requires_grad=True) for r in reals]
        inputs = [lib.view_as_complex(t) for t in leaves[:len(pairs)]] + leaves[len(pairs):]
        out = fn(lib, *inputs)
        values = lib.view_as_real(out) if out.is_complex() else out
        weights = lib.tensor(np.linspace(-1, 2, int(np.prod(values.shape)), dtype=np.float32).reshape(values.shape))
        (values * weights).sum().backward()
        results[lib] = [values.detach().numpy()] + [None if t.grad is None else t.grad.numpy() for t in leaves]
    for ours, theirs in zip(results[ggrad], results[torch]):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", [lambda a, b: a * b, lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a / b,
                                lambda a, b: b / a, lambda a, b: b - a])
def test_complex_with_complex_broadcast(op):
    _check(lambda lib, a, b: op(a, b), (3, 1, 4), (5, 1))


@pytest.mark.parametrize("op", [lambda a, x: a * x, lambda a, x: x * a, lambda a, x: a + x, lambda a, x: x - a,
                                lambda a, x: a / x, lambda a, x: x / a])
def test_complex_with_real_tensor(op):
    _check(lambda lib, a, x: op(a, x.abs() + 0.5), (2, 3), real_shapes=[(3,)])


@pytest.mark.parametrize("number", [2.5, -3, 1j, 0.5 - 2j])
def test_numbers_on_either_side(number):
    _check(lambda lib, a: (a * number - number) / (number + 3.5) + number * a, (4,))


def test_python_complex_times_real_tensor_makes_a_complex_tensor():
    _check(lambda lib, x: (1j * x).exp() * 2 + x, real_shapes=[(5,)])


@pytest.mark.parametrize("name", ["abs", "angle", "real", "imag", "conj", "exp", "neg"])
def test_unary(name):
    def fn(lib, a):
        if name in ("real", "imag"):
            return getattr(a, name) * 1.0
        if name == "conj":   # PyTorch's conj is lazy: resolved before view_as_real (ggrad's computes it)
            return a.conj().resolve_conj()
        return -a if name == "neg" else getattr(a, name)()
    _check(fn, (3, 4))


def test_abs_and_angle_at_zero_have_pytorchs_gradients():
    pairs = np.array([[0.0, 0.0], [3.0, -4.0], [0.0, 2.0], [-1.0, 0.0]], np.float32)
    grads = {}
    for lib in (ggrad, torch):
        x = lib.tensor(pairs, requires_grad=True)
        z = lib.view_as_complex(x)
        (z.abs().sum() + z.angle().sum() * 2).backward()
        grads[lib] = (z.abs().detach().numpy(), z.angle().detach().numpy(), x.grad.numpy())
    for ours, theirs in zip(grads[ggrad], grads[torch]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dims", [dict(), dict(dim=1), dict(dim=(0, 2), keepdim=True), dict(dim=-1)])
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_reductions(name, dims):
    _check(lambda lib, a: getattr(a, name)(**dims), (2, 3, 4))


@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((2, 3, 4), (4, 5))])
def test_matmul(shapes):
    _check(lambda lib, a, b: a @ b + (b.transpose(-1, -2) @ a.transpose(-1, -2)).transpose(-1, -2), *shapes)


def test_matmul_of_complex_and_real_is_refused_as_pytorchs():
    for lib in (ggrad, torch):
        with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
            lib.view_as_complex(lib.ones(2, 2, 2)) @ lib.ones(2, 2)


@pytest.mark.parametrize("fn", [
    lambda a: a.view(4, 3), lambda a: a.reshape(-1), lambda a: a.view(2, -1).flatten(), lambda a: a[1:, ::2],
    lambda a: a[..., 0], lambda a: a[None, 1], lambda a: a.unsqueeze(-1).squeeze(), lambda a: a.t(),
    lambda a: a.transpose(0, 1).contiguous(), lambda a: a.permute(1, 0).reshape(2, 6),
    lambda a: a[:1].expand(5, 4), lambda a: a.clone().flatten(0, 1), lambda a: a.view(3, 1, 4).squeeze(1)])
def test_shape_ops(fn):
    _check(lambda lib, a: fn(a), (3, 4))


def test_polar_and_complex_broadcast_with_gradients():
    _check(lambda lib, r, t: lib.polar(r.abs() + 0.1, t), real_shapes=[(3, 1), (4,)])
    _check(lambda lib, re, im: lib.complex(re, im) * lib.complex(im, re), real_shapes=[(2, 3), (3,)])


def test_view_as_complex_shares_a_transposed_layout_and_the_gradient():
    base = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    _check(lambda lib, x: lib.view_as_complex(x.transpose(0, 1)) * (1 + 2j), real_shapes=[(3, 4, 2)])
    ours = ggrad.view_as_complex(ggrad.tensor(base))
    assert ours.shape == (3, 4) and ours.dim() == 2 and ours.numel() == 12 and ours.size(-1) == 4
    np.testing.assert_array_equal(ggrad.view_as_real(ours).numpy(), base)


def test_complex_leaf_gradient_is_pytorchs():
    pairs = _pairs(3)
    grads = {}
    for lib in (ggrad, torch):
        z = lib.view_as_complex(lib.tensor(pairs)).detach().requires_grad_()
        assert z.is_leaf and z.requires_grad
        (z * z.conj()).real.sum().backward()
        grads[lib] = lib.view_as_real(z.grad).numpy()
    np.testing.assert_allclose(grads[ggrad], grads[torch], rtol=1e-6)


def test_backward_from_a_complex_output():
    pairs, g = _pairs(4), _pairs(4)
    grads = {}
    for lib in (ggrad, torch):
        x = lib.tensor(pairs, requires_grad=True)
        (lib.view_as_complex(x) * (2 - 1j)).backward(lib.view_as_complex(lib.tensor(g)))
        grads[lib] = x.grad.numpy()
    np.testing.assert_allclose(grads[ggrad], grads[torch], rtol=1e-6)
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        ggrad.view_as_complex(ggrad.tensor(pairs, requires_grad=True)).sum().backward()


def test_dtype_reads_and_printing():
    z = ggrad.complex(ggrad.tensor([1.0, -0.5, 3.0]), ggrad.tensor([2.0, 0.25, 0.0]))
    ref = torch.complex(torch.tensor([1.0, -0.5, 3.0]), torch.tensor([2.0, 0.25, 0.0]))
    assert z.dtype is ggrad.complex64 is ggrad.cfloat and repr(ggrad.complex64) == "ggrad.complex64"
    assert ggrad.complex64.is_complex and not ggrad.complex64.is_floating_point and ggrad.complex64.itemsize == 8
    assert ggrad.complex64.to_real() is ggrad.float32
    assert ggrad.is_tensor(z) and z.is_complex() and not z.is_floating_point() and not z.is_conj()
    assert z.tolist() == ref.tolist() and z[0].item() == ref[0].item() == 1 + 2j and len(z) == 3
    assert repr(z).startswith("tensor([") and np.array_equal(eval(repr(z)[7:-1]), ref.numpy())
    assert "requires_grad=True" in repr(z.detach().requires_grad_())
    assert "grad_fn=" in repr(ggrad.view_as_complex(ggrad.ones(2, 2, requires_grad=True)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        real = z.to(ggrad.float32)
    assert "discards the imaginary part" in str(caught[0].message)
    np.testing.assert_array_equal(real.numpy(), ref.real.numpy())
    assert z.to("cpu").dtype is ggrad.complex64 and z.to(ggrad.complex64) is z


def test_real_tensors_complex_views_are_pytorchs():
    values = [-2.0, 0.0, 3.0, float("nan"), float("inf"), -float("inf")]
    ours, theirs = ggrad.tensor(values), torch.tensor(values)
    np.testing.assert_array_equal(ggrad.angle(ours).numpy(), torch.angle(theirs).numpy())
    np.testing.assert_array_equal(ours.angle().numpy(), theirs.angle().numpy())
    for fn in (lambda t: t.real, lambda t: t.conj(), lambda t: t.resolve_conj(), lambda t: t.conj_physical()):
        np.testing.assert_array_equal(fn(ours).numpy(), fn(theirs).numpy())
    assert ggrad.real(ours) is ours and ggrad.conj(ours) is ours and not ours.is_conj()
    assert not ggrad.is_complex(ours) and not ours.is_complex()
    for fn in (lambda lib, t: t.imag, lambda lib, t: lib.imag(t)):
        for lib, t in ((ggrad, ours), (torch, theirs)):
            with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
                fn(lib, t)


@pytest.mark.parametrize("make", [
    lambda lib: lib.view_as_complex(lib.ones(3, 3)),
    lambda lib: lib.view_as_complex(lib.ones(3, 2, dtype=lib.int32)),
    lambda lib: lib.view_as_complex(lib.ones(2, 3).t()),
    lambda lib: lib.view_as_complex(lib.ones(3, 4)[:, 1:3]),
    lambda lib: lib.view_as_complex(lib.ones(3, 3)[:, :2]),
    lambda lib: lib.view_as_complex(lib.ones(())),
    lambda lib: lib.view_as_real(lib.ones(3)),
    lambda lib: lib.polar(lib.ones(3), lib.ones(3, dtype=lib.int32)),
    lambda lib: lib.complex(lib.ones(3, dtype=lib.int32), lib.ones(3, dtype=lib.int32)),
])
def test_errors_as_pytorchs(make):
    with pytest.raises(Exception) as theirs:
        make(torch)
    with pytest.raises(type(theirs.value)) as ours:
        make(ggrad)
    if type(theirs.value) is RuntimeError:
        assert str(ours.value) == str(theirs.value)


def test_real_ops_refuse_a_complex_tensor_with_a_type_error():
    z = ggrad.view_as_complex(ggrad.ones(3, 2))
    with pytest.raises(TypeError):
        ggrad.tanh(z)
    with pytest.raises(TypeError):
        ggrad.ones(3) ** z


@pytest.mark.parametrize("fn", [
    lambda lib, a, b: lib.matmul(a, b.transpose(0, 1)), lambda lib, a, b: lib.mul(a, b) + lib.add(a, 2.0),
    lambda lib, a, b: lib.cat([a, b], 1), lambda lib, a, b: lib.stack([a, b], -1).sum(0),
    lambda lib, a, b: lib.exp(a) - lib.reshape(b, (-1,)).reshape(3, 4), lambda lib, a, b: lib.abs(a) * 1.0 + lib.angle(b),
    lambda lib, a, b: lib.cat([a, b.real], 0), lambda lib, a, b: lib.flatten(lib.transpose(a, 0, 1)) + lib.flatten(b.t())])
def test_ggrad_functions_take_complex_tensors(fn):
    """torch.matmul(z, w), torch.cat([z, w]), torch.exp(z), ...: the functions hand a complex call to the
    complex op of their name."""
    _check(fn, (3, 4), (3, 4))


@pytest.mark.parametrize("fn", [
    lambda lib, x, z: lib.mul(x, 1j), lambda lib, x, z: lib.add(x, 0.5 - 2j), lambda lib, x, z: lib.sub(x, 3j, alpha=2),
    lambda lib, x, z: lib.div(x, 2j) + lib.true_divide(x, 1 + 1j), lambda lib, x, z: lib.add(x, z),
    lambda lib, x, z: lib.sub(x, z) * lib.multiply(x, z), lambda lib, x, z: x.mul(2j) + x.add(z, alpha=3),
    lambda lib, x, z: lib.divide(x, z) - x.div(1j), lambda lib, x, z: x.sub(1j).mul(x)])
def test_real_tensor_functions_with_a_complex_operand(fn):
    """torch.mul(x, 1j), torch.add(x, z), x.div(1j): a real tensor's binary functions and methods give the
    complex result, with gradients, as PyTorch's."""
    _check(lambda lib, z, x: fn(lib, x.abs() + 0.5, z), (2, 3), real_shapes=[(3,)])


def test_integer_tensor_with_a_complex_number():
    assert ggrad.allclose(ggrad.view_as_real(ggrad.arange(4) * (1 + 2j)),
                          ggrad.tensor(torch.view_as_real(torch.arange(4) * (1 + 2j)).numpy()))


def test_real_ops_without_a_complex_form_refuse_before_computing():
    z = ggrad.view_as_complex(ggrad.tensor([[1.5, 2.0], [0.5, -1.0]]))
    for call in (lambda: ggrad.round(z), lambda: ggrad.isnan(z), lambda: ggrad.sigmoid(z), lambda: ggrad.floor(z)):
        with pytest.raises(TypeError):
            call()
    assert not ggrad.is_floating_point(z) and ggrad.is_floating_point(ggrad.ones(1))


def test_complex_buffer_of_a_module():
    """A complex buffer (torchtitan registers freqs_cis as one): registered, moved by .to(), copied by
    load_state_dict, left alone by .float()/.half()."""
    class Rotary(ggrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("freqs_cis", ggrad.polar(ggrad.ones(4, 2), ggrad.arange(8.).reshape(4, 2)))

    model = Rotary()
    assert model.to("cpu").freqs_cis.dtype is ggrad.complex64
    model.half()
    assert model.freqs_cis.dtype is ggrad.complex64
    state = model.state_dict()
    other = Rotary()
    other.freqs_cis.copy_(ggrad.view_as_complex(ggrad.zeros(4, 2, 2)))
    assert np.abs(other.freqs_cis.numpy()).max() == 0
    other.load_state_dict(state)
    np.testing.assert_allclose(other.freqs_cis.numpy(), model.freqs_cis.numpy(), rtol=1e-6)


def test_a_real_tensor_to_complex64_and_complex_checkpoints(tmp_path):
    x = ggrad.tensor([1.5, -2.0], requires_grad=True)
    z = x.to(ggrad.complex64)
    assert z.dtype is ggrad.complex64 and z.tolist() == torch.tensor([1.5, -2.0]).to(torch.complex64).tolist()
    (z * 1j).imag.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
    buffers = {"freqs_cis": ggrad.polar(ggrad.ones(3), ggrad.arange(3.)), "plain": ggrad.ones(2)}
    ggrad.save(buffers, tmp_path / "c.pt")
    loaded = ggrad.load(tmp_path / "c.pt")
    assert loaded["freqs_cis"].dtype is ggrad.complex64
    np.testing.assert_array_equal(loaded["freqs_cis"].numpy(), buffers["freqs_cis"].numpy())
    module = ggrad.nn.Module()
    module.register_buffer("freqs_cis", buffers["freqs_cis"])
    ggrad.save(module, tmp_path / "m.pt")
    again = ggrad.load(tmp_path / "m.pt", weights_only=False)
    np.testing.assert_array_equal(again.freqs_cis.numpy(), buffers["freqs_cis"].numpy())


@pytest.mark.parametrize("make", [
    lambda lib: lib.tensor([1 + 2j, 3, -0.5j]),
    lambda lib: lib.tensor(np.array([[1j, 2], [3, 4 - 1j]], dtype=np.complex64)),
    lambda lib: lib.tensor([1.0, 2.0], dtype=lib.cfloat), lambda lib: lib.tensor(2 - 3j),
    lambda lib: lib.zeros(2, 3, dtype=lib.cfloat), lambda lib: lib.ones((4,), dtype=lib.complex64),
    lambda lib: lib.full((2, 2), 1 - 2j), lambda lib: lib.full((3,), 2.5, dtype=lib.cfloat),
    lambda lib: lib.empty(0, 2, dtype=lib.cfloat), lambda lib: lib.zeros_like(lib.tensor([1j, 2j])),
    lambda lib: lib.ones_like(lib.ones(2), dtype=lib.cfloat), lambda lib: lib.as_tensor([[1j]]),
    lambda lib: lib.from_numpy(np.array([1 + 1j], dtype=np.complex64)), lambda lib: lib.eye(2, dtype=lib.cfloat),
    lambda lib: lib.ones(3).new_zeros((2,), dtype=lib.cfloat), lambda lib: lib.tensor(lib.tensor([1j, 1]))])
def test_factories_make_complex_tensors_as_pytorchs(make):
    ours, theirs = make(ggrad), make(torch)
    assert ours.is_complex() and theirs.is_complex()
    assert ours.dtype == ggrad.complex64 and theirs.dtype == torch.complex64
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_array_equal(np.asarray(ours), theirs.numpy())


@pytest.mark.parametrize("name", ["randn", "rand"])
def test_random_complex_factories_draw_both_parts_as_pytorchs(name):
    """randn(dtype=cfloat): each part of variance 1/2 (E|z|^2 = 1); rand: each part uniform in [0, 1)."""
    ggrad.manual_seed(0)
    ours = getattr(ggrad, name)(200, 100, dtype=ggrad.cfloat)
    theirs = getattr(torch, name)(200, 100, dtype=torch.cfloat)
    assert ours.dtype == ggrad.complex64 and ours.shape == (200, 100)
    for part in ("real", "imag"):
        a, b = getattr(ours, part).numpy(), getattr(theirs, part).numpy()
        assert abs(a.mean() - b.mean()) < 0.02 and abs(a.var() - b.var()) < 0.02
        assert a.min() < a.max()   # both parts drawn, not one copied into the other
    assert not np.allclose(ours.real.numpy(), ours.imag.numpy())


def test_complex_leaf_from_a_factory_gets_pytorchs_gradient():
    values = [1 + 2j, -0.5 + 0.25j, 3j]
    grads = []
    for lib in (ggrad, torch):
        z = lib.tensor(values, dtype=lib.cfloat, requires_grad=True)
        w = lib.full((3,), 0.5 - 1j)
        (z * w * z).abs().sum().backward()
        assert z.is_leaf and z.requires_grad
        grads.append(lib.view_as_real(z.grad).numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)
