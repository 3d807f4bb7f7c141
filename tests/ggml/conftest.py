"""Helpers for the op-builder tests: build a graph from numpy inputs, compute it on the CPU, compare.

`check(build, inputs, ref)` is the one-line oracle test (after tinygrad's helper_test_op): `inputs`
are numpy arrays in numpy order (or (array, dtype) pairs), `build(ctx, *tensors)` makes the op(s)
with ggrad's builders, `ref(*arrays)` computes the same with numpy. The result's shape is checked
exactly (GGML's ne reversed, leading 1s allowed), then its values.
"""

import math
import types

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import kernels


class Runner:
    """Builds, allocates and computes small graphs on one shared CPU scheduler."""

    def __init__(self):
        self.sched = gg.Scheduler("cpu", graph_size=256)

    def run(self, build, inputs, setup=None):
        """Outputs (numpy, 4-D numpy order, plus their GTensors) of `build(ctx, *input_tensors)`."""
        ctx = gg.Context(n_tensors=256)
        arrays, tensors = [], []
        for item in inputs:
            arr, dtype = item if isinstance(item, tuple) else (item, None)
            arr = np.asarray(arr)
            if dtype is None:
                dtype = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.float16): "f16"}.get(
                    arr.dtype, "f32")
            shape = arr.shape if arr.ndim else (1,)
            tensors.append(ctx.new_tensor(dtype, tuple(reversed(shape))))
            arrays.append(arr)
        out = build(ctx, *tensors)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        outs = [o if o.is_contiguous else gg.ops.cont(ctx, o) for o in outs]
        self.keep = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)
        for t, arr in zip(tensors, arrays):
            gg.set_data(t, arr)
        if setup is not None:
            setup(tensors)
        graph = gg.Graph(256)
        for o in outs:
            graph.build_forward_expand(o)
        self.sched.alloc(graph)
        self.sched.compute(graph)
        self.ctx = ctx
        self.inputs = tensors
        return [gg.get_data(o) for o in outs], outs

    def check(self, build, inputs, ref, atol=1e-5, rtol=1e-5, setup=None):
        got, outs = self.run(build, inputs, setup)
        arrays = [np.asarray(i[0] if isinstance(i, tuple) else i) for i in inputs]
        want = ref(*arrays)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        assert len(want) == len(got), f"{len(got)} outputs, reference gives {len(want)}"
        for i, (g, w, o) in enumerate(zip(got, want, outs)):
            w = np.asarray(w)
            ne_shape = tuple(reversed(o.ne))
            lead = len(ne_shape) - w.ndim
            assert lead >= 0 and ne_shape[lead:] == w.shape and all(n == 1 for n in ne_shape[:lead]), \
                f"output {i}: ggrad ne={list(o.ne)} (numpy {ne_shape}) vs reference shape {w.shape}"
            np.testing.assert_allclose(g.reshape(w.shape).astype(np.float64), w.astype(np.float64),
                                       atol=atol, rtol=rtol, err_msg=f"output {i} of {o!r}")
        return got


@pytest.fixture(scope="session")
def runner():
    return Runner()


@pytest.fixture
def check(runner):
    return runner.check


@pytest.fixture
def run(runner):
    return runner.run


@pytest.fixture
def ctx():
    """A metadata-only Context for build-only tests."""
    c = gg.Context(n_tensors=256)
    yield c
    c.close()


# ---------------------------------------------------------------------------------------------------
# numpy references shared by several test files

def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def rope_ref(x, pos, n_dims, neox, base=10000.0):
    """x numpy [n_tokens, n_head, head_dim]."""
    out = x.copy()
    half = n_dims // 2
    for t, p in enumerate(pos):
        for i in range(half):
            theta = p * base ** (-2 * i / n_dims)
            c, s = math.cos(theta), math.sin(theta)
            j0, j1 = (i, i + half) if neox else (2 * i, 2 * i + 1)
            x0, x1 = x[t, :, j0], x[t, :, j1]
            out[t, :, j0] = x0 * c - x1 * s
            out[t, :, j1] = x0 * s + x1 * c
    return out


def conv2d_ref(x, w, s=(1, 1), p=(0, 0), d=(1, 1)):
    """x (N, IC, H, W), w (OC, IC, KH, KW) -> (N, OC, OH, OW); s, p, d as (height, width)."""
    n, ic, h, wd = x.shape
    oc, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((n, oc, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * s[0]:i * s[0] + d[0] * (kh - 1) + 1:d[0], j * s[1]:j * s[1] + d[1] * (kw - 1) + 1:d[1]]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


def im2col_ref(x, kh, kw, s, p, d):
    """x (N, IC, H, W) -> (N, OH, OW, IC*KH*KW)."""
    n, ic, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((n, oh, ow, ic, kh, kw), np.float32)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j] = xp[:, :, i * s[0]:i * s[0] + d[0] * (kh - 1) + 1:d[0],
                              j * s[1]:j * s[1] + d[1] * (kw - 1) + 1:d[1]]
    return out.reshape(n, oh, ow, ic * kh * kw)


@pytest.fixture(scope="session")
def refs():
    """softmax, rope_ref, conv2d_ref and im2col_ref."""
    return types.SimpleNamespace(softmax=softmax, rope_ref=rope_ref, conv2d_ref=conv2d_ref, im2col_ref=im2col_ref)


@pytest.fixture(params=["avx512", "avx2", "generic"])
def isa(request):
    """Each microkernel this CPU can run (the best one is restored after)."""
    if kernels.isa(request.param) != request.param:
        kernels.isa("best")
        pytest.skip(f"this CPU has no {request.param}")
    yield request.param
    kernels.isa("best")
