"""ggrad.fft against torch.fft: values and gradients of every transform (real and complex inputs, n trimming
and padding, dims, norms), the frequency helpers, shifts and errors."""
import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
REAL = RNG.standard_normal((3, 8, 10)).astype(np.float32)
PAIRS = RNG.standard_normal((3, 8, 10, 2)).astype(np.float32)

CASES = {
    "fft": (lambda L, t: L.fft.fft(t), False), "fft_complex": (lambda L, t: L.fft.fft(t), True),
    "fft_padded_dim0_ortho": (lambda L, t: L.fft.fft(t, n=5, dim=0, norm="ortho"), True),
    "fft_trimmed": (lambda L, t: L.fft.fft(t, n=5), False),
    "ifft_forward": (lambda L, t: L.fft.ifft(t, norm="forward"), True), "ifft_real": (lambda L, t: L.fft.ifft(t), False),
    "rfft": (lambda L, t: L.fft.rfft(t), False), "rfft_odd_dim1": (lambda L, t: L.fft.rfft(t, n=7, dim=1), False),
    "irfft": (lambda L, t: L.fft.irfft(t), True), "irfft_odd_ortho": (lambda L, t: L.fft.irfft(t, n=9, dim=1, norm="ortho"), True),
    "irfft_real_input": (lambda L, t: L.fft.irfft(t, n=6), False),
    "fft2": (lambda L, t: L.fft.fft2(t), False), "ifft2": (lambda L, t: L.fft.ifft2(t, s=(4, 12)), True),
    "fftn": (lambda L, t: L.fft.fftn(t), True), "ifftn_dims": (lambda L, t: L.fft.ifftn(t, dim=(0, 2)), True),
    "rfft2": (lambda L, t: L.fft.rfft2(t), False), "rfftn": (lambda L, t: L.fft.rfftn(t, dim=(0, 2)), False),
    "irfft2": (lambda L, t: L.fft.irfft2(t), True), "irfftn": (lambda L, t: L.fft.irfftn(t, s=(6, 8)), True),
    "fftshift": (lambda L, t: L.fft.fftshift(L.fft.fft(t), dim=-1), False),
    "ifftshift": (lambda L, t: L.fft.ifftshift(t, dim=(0, 1)), True),
    "round_trip": (lambda L, t: L.fft.irfft(L.fft.rfft(t), n=10), False),
    "spectral_loss": (lambda L, t: L.fft.rfft(t, norm="ortho").abs(), False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_transform_against_pytorch(name):
    fn, complex_input = CASES[name]
    results = []
    for lib in (ggrad, torch):
        leaf = lib.tensor(PAIRS if complex_input else REAL, requires_grad=True)
        out = fn(lib, lib.view_as_complex(leaf) if complex_input else leaf)
        values = lib.view_as_real(out.resolve_conj()) if out.is_complex() else out
        weights = lib.tensor(np.linspace(-1, 1, int(np.prod(values.shape)), dtype=np.float32).reshape(values.shape))
        (values * weights).sum().backward()
        results.append((values.detach().numpy(), leaf.grad.numpy()))
    for ours, theirs in zip(*results):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=2e-5)


def test_frequencies():
    for n, d in ((5, 0.5), (8, 1.0), (1, 2.0)):
        np.testing.assert_allclose(ggrad.fft.fftfreq(n, d).numpy(), torch.fft.fftfreq(n, d).numpy(), rtol=1e-6)
        np.testing.assert_allclose(ggrad.fft.rfftfreq(n, d).numpy(), torch.fft.rfftfreq(n, d).numpy(), rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda lib: lib.fft.fft(lib.ones(4), norm="bad"), lambda lib: lib.fft.fft(lib.ones(4), dim=1),
    lambda lib: lib.fft.fft(lib.ones(4), n=0), lambda lib: lib.fft.rfft(lib.fft.fft(lib.ones(4))),
    lambda lib: lib.fft.fftn(lib.ones(4, 4), s=(2, 2), dim=(0,)), lambda lib: lib.fft.fft([1.0, 2.0])])
def test_errors_as_pytorchs(call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)):
        call(ggrad)
