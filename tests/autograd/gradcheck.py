"""The oracle for autograd tests: the same op in ggrad and in float64 numpy, forward and gradient.

`check(ggrad_fn, numpy_fn, inputs)` compares ggrad's forward with numpy's, then ggrad's analytic
gradients (for a random upstream gradient) with central finite differences of the numpy function.
"""

import numpy as np

import ggrad


def numeric_grads(numpy_fn, arrays, upstream, eps=1e-6):
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a, dtype=np.float64)
        flat = g.reshape(-1)
        for j in range(a.size):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[i].reshape(-1)[j] += eps
            minus[i].reshape(-1)[j] -= eps
            f_plus = np.sum(np.asarray(numpy_fn(*plus), dtype=np.float64) * upstream)
            f_minus = np.sum(np.asarray(numpy_fn(*minus), dtype=np.float64) * upstream)
            flat[j] = (f_plus - f_minus) / (2 * eps)
        grads.append(g)
    return grads


def check(ggrad_fn, numpy_fn, arrays, atol=1e-4, rtol=1e-3, grad_atol=2e-3, grad_rtol=2e-2, grad=True, seed=0):
    """Forward and (optionally) backward agreement of ggrad_fn with numpy_fn on float64 inputs."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    tensors = [ggrad.tensor(a.astype(np.float32), requires_grad=grad) for a in arrays]
    out = ggrad_fn(*tensors)
    expected = np.asarray(numpy_fn(*arrays), dtype=np.float64)
    got = out.numpy()
    assert got.shape == expected.shape, f"forward shape: ggrad {got.shape} vs numpy {expected.shape}"
    np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, err_msg="forward values differ")
    if not grad:
        return
    upstream = np.random.default_rng(seed).standard_normal(expected.shape)
    out.backward(ggrad.tensor(upstream.astype(np.float32)))
    expected_grads = numeric_grads(numpy_fn, arrays, upstream)
    for i, (t, g) in enumerate(zip(tensors, expected_grads)):
        assert t.grad is not None, f"input {i} got no gradient"
        assert t.grad.shape == g.shape, f"input {i}: gradient shape {t.grad.shape} vs {g.shape}"
        np.testing.assert_allclose(t.grad.numpy(), g, atol=grad_atol, rtol=grad_rtol,
                                   err_msg=f"gradient of input {i} differs")
