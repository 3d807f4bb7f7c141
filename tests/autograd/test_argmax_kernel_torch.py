"""argmax and argmin by ggrad's CPU kernel (lowering.argmax "kernel") and by GGML's composed ops ("ggml")
against PyTorch: the first of ties, the first nan, rows of -inf, any dimension."""

import dataclasses

import numpy as np
import pytest

import ggrad
from ggrad.autograd import execution, lowering
from ggrad.ggml import kernels
from ggrad.ggml.errors import DTypeError

torch = pytest.importorskip("torch")
CPU = ggrad.device("cpu")


def _values():
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, size=(5, 7, 9)).astype(np.float32)   # small integers: many ties
    x[0, 1, 4] = x[0, 1, 6] = np.nan
    x[1, 2] = -np.inf
    x[2, 3, 0] = np.nan
    x[3, :, 2] = np.inf
    return x


@pytest.mark.parametrize("argmax", ["kernel", "ggml"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_argmax_and_argmin_match_torch(argmax, dim):
    x = _values()
    with execution.forced_lowering(CPU, dataclasses.replace(lowering.CPU, argmax=argmax)):
        for op in ("argmax", "argmin"):
            got = getattr(ggrad.tensor(x), op)(dim).numpy()
            want = getattr(torch.tensor(x), op)(dim).numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{op} over dim {dim} by {argmax}")


def test_the_kernel_takes_strided_rows_and_is_one_node():
    x = _values()
    with execution.forced_lowering(CPU, dataclasses.replace(lowering.CPU, argmax="kernel")):
        got = ggrad.tensor(x).permute(2, 0, 1).argmax(-1, keepdim=True)
        np.testing.assert_array_equal(got.numpy(), torch.tensor(x).permute(2, 0, 1).argmax(-1, keepdim=True).numpy())
        before = ggrad.stats()["nodes"]
        ggrad.tensor(x[0]).argmax(-1).numpy()
        assert ggrad.stats()["nodes"] - before <= 3   # the upload's view, the kernel, the result's view


def test_the_kernel_refuses_other_dtypes():
    ctx = ggrad.ggml.Context(8)
    with pytest.raises(DTypeError, match="argmax_f32"):
        kernels.argmax_f32(ctx, ctx.new_tensor(ggrad.ggml.i32, (4, 2)))
