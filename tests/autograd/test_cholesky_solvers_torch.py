"""torch.cholesky_solve and torch.cholesky_inverse (triangular.py, on the composed Cholesky) against PyTorch:
values and gradients through the factor and the right-hand side, lower and upper factors, batches, errors."""
import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def _spd(*batch, n=4):
    m = RNG.standard_normal(batch + (n, n)).astype(np.float32)
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n, dtype=np.float32)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_gaussian_process_solve_and_inverse(upper, batch):
    a = _spd(*batch)
    b = RNG.standard_normal(batch + (4, 2)).astype(np.float32)
    results = []
    for lib in (ggrad, torch):
        at, bt = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        factor = lib.linalg.cholesky(at, upper=upper)
        x = lib.cholesky_solve(bt, factor, upper=upper)
        inverse = lib.cholesky_inverse(factor, upper=upper)
        (x.sum() + (inverse * inverse).sum()).backward()
        results.append((x.detach().numpy(), inverse.detach().numpy(), at.grad.numpy(), bt.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_errors_as_pytorchs():
    for call in (lambda lib: lib.cholesky_solve(lib.ones(3), lib.eye(3)),
                 lambda lib: lib.cholesky_inverse(lib.ones(2, 3))):
        with pytest.raises(Exception) as theirs:
            call(torch)
        with pytest.raises(type(theirs.value)):
            call(ggrad)
