"""The oracle for autograd tests: ggrad.autograd.gradcheck against a float64 numpy version of each op.

`check(ggrad_fn, numpy_fn, inputs)` compares ggrad's forward with numpy's, then ggrad's analytic
gradients (for random output weights) with central finite differences of the numpy function.
"""

import numpy as np

import ggrad
from ggrad.autograd import gradcheck


def check(ggrad_fn, numpy_fn, arrays, atol=1e-4, rtol=1e-3, grad_atol=2e-3, grad_rtol=2e-2, grad=True, seed=0):
    """Forward and (optionally) backward agreement of ggrad_fn with numpy_fn on float64 inputs."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    tensors = [ggrad.tensor(a.astype(np.float32), requires_grad=grad) for a in arrays]
    if not grad:
        got = ggrad_fn(*tensors).numpy()
        expected = np.asarray(numpy_fn(*arrays), dtype=np.float64)
        assert got.shape == expected.shape, f"forward shape: ggrad {got.shape} vs numpy {expected.shape}"
        np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, err_msg="forward values differ")
        return
    assert gradcheck(ggrad_fn, tensors, reference=numpy_fn, atol=grad_atol, rtol=grad_rtol, forward_atol=atol,
                     forward_rtol=rtol, seed=seed)
