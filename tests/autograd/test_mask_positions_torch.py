"""A bool mask after other index entries (`x[:, mask]`, `x[..., mask]`, `x[mask, :]`, masks over several
dims), read and assigned, with gradients, against PyTorch."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
A = RNG.standard_normal((3, 4, 5)).astype(np.float32)
M4 = np.array([True, False, True, True])
M5 = np.array([False, True, True, False, True])
M45 = RNG.random((4, 5)) > 0.5
M34 = RNG.random((3, 4)) > 0.5

KEYS = {
    "dim1": lambda M: (slice(None), M(M4)),
    "ellipsis": lambda M: (Ellipsis, M(M5)),
    "two_dims": lambda M: (slice(None), M(M45)),
    "first_then_slice": lambda M: (M(M34), slice(1, 4)),
    "sliced_around": lambda M: (slice(1, 3), M(M4), slice(0, 2)),
    "mask_then_ellipsis": lambda M: (M(M4[:3]), Ellipsis, slice(None, None)),
}


@pytest.mark.parametrize("name", sorted(KEYS))
def test_read_and_gradient(name):
    key = KEYS[name]
    xt, xg = torch.tensor(A, requires_grad=True), ggrad.tensor(A, requires_grad=True)
    rt, rg = xt[key(torch.tensor)], xg[key(ggrad.tensor)]
    assert rg.shape == tuple(rt.shape)
    np.testing.assert_allclose(rg.numpy(), rt.detach().numpy())
    w = RNG.standard_normal(tuple(rt.shape)).astype(np.float32)
    (rt * torch.tensor(w)).sum().backward()
    (rg * ggrad.tensor(w)).sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("name", sorted(KEYS))
@pytest.mark.parametrize("value", ["number", "row", "full"])
def test_assignment_with_gradients(name, value):
    key = KEYS[name]
    shape = tuple(torch.tensor(A)[key(torch.tensor)].shape)
    v = {"number": None, "row": RNG.standard_normal(shape[-1:]), "full": RNG.standard_normal(shape)}[value]
    bt, bg = torch.tensor(A, requires_grad=True), ggrad.tensor(A, requires_grad=True)
    xt, xg = bt * 1.0, bg * 1.0
    if v is None:
        xt[key(torch.tensor)] = 7.0
        xg[key(ggrad.tensor)] = 7.0
        vt = vg = None
    else:
        vt = torch.tensor(v.astype(np.float32), requires_grad=True)
        vg = ggrad.tensor(v.astype(np.float32), requires_grad=True)
        xt[key(torch.tensor)] = vt
        xg[key(ggrad.tensor)] = vg
    np.testing.assert_allclose(xg.numpy(), xt.detach().numpy())
    w = RNG.standard_normal(A.shape).astype(np.float32)
    (xt * torch.tensor(w)).sum().backward()
    (xg * ggrad.tensor(w)).sum().backward()
    np.testing.assert_allclose(bg.grad.numpy(), bt.grad.numpy())
    if vt is not None:
        np.testing.assert_allclose(vg.grad.numpy(), vt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_shape_mismatch_is_an_index_error_as_torch():
    bad = np.ones(3, dtype=bool)
    with pytest.raises(IndexError):
        torch.tensor(A)[:, torch.tensor(bad)]
    with pytest.raises(IndexError, match="shape of the mask"):
        ggrad.tensor(A)[:, ggrad.tensor(bad)]
    with pytest.raises(IndexError):
        ggrad.tensor(A)[:, :, :, ggrad.tensor(M4)]   # too many indices
    with pytest.raises(IndexError):
        x = ggrad.tensor(A)
        x[:, ggrad.tensor(bad)] = 1.0
