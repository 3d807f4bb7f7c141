"""Views, reshapes, permutations, copies, casts and the builders that rearrange data, against numpy."""

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import ops

R = np.random.default_rng(2)
X = R.standard_normal((2, 3, 4)).astype(np.float32)        # GGML ne [4, 3, 2]
F = 4  # bytes per f32


def ggml_order(x):
    """numpy-order 4-D array -> array indexed [i0, i1, i2, i3]."""
    return x.reshape((1,) * (4 - x.ndim) + x.shape).transpose(3, 2, 1, 0)


def numpy_order(e):
    return e.transpose(3, 2, 1, 0)


def test_reshapes(check):
    check(lambda ctx, a: (ops.reshape_1d(ctx, a, 24), ops.reshape_2d(ctx, a, 6, 4), ops.reshape_3d(ctx, a, 2, 3, 4),
                          ops.reshape_4d(ctx, a, 2, 2, 3, 2)),
          [X], lambda x: (x.reshape(24), x.reshape(4, 6), x.reshape(4, 3, 2), x.reshape(2, 3, 2, 2)))
    shape_of = np.zeros((6, 4), np.float32)
    check(lambda ctx, a, b: ops.reshape(ctx, a, b), [X, shape_of], lambda x, b: x.reshape(6, 4))


def test_views(check):
    flat = np.arange(24, dtype=np.float32)
    check(lambda ctx, a: ops.view_1d(ctx, a, 5, 3 * F), [flat], lambda x: x[3:8])
    m = np.arange(30, dtype=np.float32).reshape(5, 6)       # ne [6, 5], nb1 = 24
    check(lambda ctx, a: ops.view_2d(ctx, a, 3, 4, 6 * F, 2 * F), [m], lambda x: x[0:4, 2:5])
    check(lambda ctx, a: ops.view_2d(ctx, a, 2, 2, 12 * F, 6 * F), [m], lambda x: x[1::2, :2])
    check(lambda ctx, a: ops.view_3d(ctx, a, 2, 2, 2, 4 * F, 12 * F, F), [X], lambda x: x[:, :2, 1:3])
    check(lambda ctx, a: ops.view_4d(ctx, a, 4, 3, 1, 2, 4 * F, 12 * F, 12 * F, 0), [X],
          lambda x: x.reshape(2, 1, 3, 4))
    check(lambda ctx, a: ops.view_tensor(ctx, a), [X], lambda x: x)


@pytest.mark.parametrize("axes", [(1, 0, 2, 3), (0, 2, 1, 3), (2, 0, 1, 3), (3, 2, 1, 0), (1, 2, 3, 0)])
def test_permute(check, axes):
    x = R.standard_normal((2, 3, 4, 5)).astype(np.float32)

    def ref(x):
        e = ggml_order(x)
        inv = [0] * 4
        for i, ax in enumerate(axes):
            inv[ax] = i       # result dim axes[i] is a's dim i
        return numpy_order(e.transpose(inv))

    check(lambda ctx, a: ops.permute(ctx, a, *axes), [x], ref)


def test_transpose_cont(check):
    m = R.standard_normal((3, 5)).astype(np.float32)
    check(lambda ctx, a: (ops.transpose(ctx, a), ops.cont(ctx, ops.transpose(ctx, a))), [m], lambda x: (x.T, x.T))
    t = lambda ctx, a: ops.transpose(ctx, a)
    check(lambda ctx, a: (ops.cont_1d(ctx, t(ctx, a), 15), ops.cont_2d(ctx, t(ctx, a), 5, 3),
                          ops.cont_3d(ctx, t(ctx, a), 5, 1, 3), ops.cont_4d(ctx, t(ctx, a), 1, 5, 3, 1)),
          [m], lambda x: (x.T.reshape(15), x.T.reshape(3, 5), x.T.reshape(3, 1, 5), x.T.reshape(1, 3, 5, 1)))


def test_dup_tensor(ctx):
    a = ctx.new_tensor("f16", (5, 3, 2))
    t = ops.dup_tensor(ctx, a)
    assert t.ne == a.ne and t.dtype.name == "f16" and t.op == "NONE" and t.ptr.view_src == gg.ffi.NULL


def test_cpy_and_cast(check):
    x = (X * 10).astype(np.float32)
    check(lambda ctx, a: ops.cast(ctx, ops.cast(ctx, a, "f16"), "f32"), [x], lambda v: v.astype(np.float16), atol=0)
    check(lambda ctx, a: ops.cast(ctx, ops.cast(ctx, a, "bf16"), "f32"), [x], lambda v: v, rtol=1e-2)
    check(lambda ctx, a: ops.cast(ctx, a, "i32"), [x], lambda v: np.trunc(v).astype(np.int32))
    check(lambda ctx, a: ops.cast(ctx, a, "f32"), [np.arange(-3, 9, dtype=np.int32)],
          lambda v: v.astype(np.float32))
    check(lambda ctx, a, b: ops.cpy(ctx, a, b), [x, (np.zeros((4, 6), np.float32), "f16")],
          lambda v, b: v.reshape(4, 6).astype(np.float16), atol=0)
    q = R.standard_normal((2, 32)).astype(np.float32)
    check(lambda ctx, a: ops.cast(ctx, ops.cast(ctx, a, "q8_0"), "f32"), [q], lambda v: v, atol=0.03)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_concat(check, dim):
    axis = 2 - dim
    shape_b = list(X.shape)
    shape_b[axis] = 2
    b = R.standard_normal(shape_b).astype(np.float32)
    check(lambda ctx, x, y: ops.concat(ctx, x, y, dim), [X, b], lambda x, y: np.concatenate([x, y], axis))


def test_concat_reads_transposed_views(check):
    a = R.standard_normal((5, 4)).astype(np.float32)
    b = R.standard_normal((3, 4)).astype(np.float32)
    # GGML ne: a^T is [5, 4] with dimension 0 strided; joined along dimension 0 with b^T
    check(lambda ctx, x, y: ops.concat(ctx, ops.transpose(ctx, x), ops.transpose(ctx, y), 0), [a, b],
          lambda x, y: np.concatenate([x, y], 0).T)


def test_repeat(check):
    tile = R.standard_normal((1, 3, 2)).astype(np.float32)
    check(lambda ctx, a, b: ops.repeat(ctx, a, b), [tile, np.zeros((2, 3, 4), np.float32)],
          lambda a, b: np.tile(a, (2, 1, 2)))
    check(lambda ctx, a: ops.repeat_4d(ctx, a, 6, 3, 2, 2), [tile], lambda a: np.tile(a, (2, 2, 1, 3)))


def test_pads_and_roll(check):
    check(lambda ctx, a: (ops.pad(ctx, a, 2, 1, 0, 1), ops.pad_ext(ctx, a, 1, 2, 0, 1, 1, 0, 0, 0)),
          [X], lambda x: (np.pad(x.reshape(1, 2, 3, 4), ((0, 1), (0, 0), (0, 1), (0, 2))),
                          np.pad(x, ((1, 0), (0, 1), (1, 2)))))
    check(lambda ctx, a: (ops.pad_circular(ctx, a, 2, 1, 0, 0), ops.pad_ext_circular(ctx, a, 1, 2, 1, 0, 0, 0, 0, 0)),
          [X], lambda x: (np.pad(x, ((0, 0), (0, 1), (0, 2)), mode="wrap"),
                          np.pad(x, ((0, 0), (1, 0), (1, 2)), mode="wrap")))
    check(lambda ctx, a: ops.pad_reflect_1d(ctx, a, 2, 3), [X], lambda x: np.pad(x, ((0, 0), (0, 0), (2, 3)), "reflect"))
    check(lambda ctx, a: ops.roll(ctx, a, 1, -1, 1, 0), [X], lambda x: np.roll(x, (1, -1, 1), axis=(2, 1, 0)))


def test_acc_and_set(check):
    a = R.standard_normal((3, 4)).astype(np.float32)     # nb1 = 16 bytes
    b = R.standard_normal((2, 2)).astype(np.float32)

    def acc(x, y):
        out = x.copy()
        out[0:2, 1:3] += y
        return out

    def put(x, y):
        out = x.copy()
        out[0:2, 1:3] = y
        return out

    check(lambda ctx, x, y: (ops.acc(ctx, x, y, 4 * F, 12 * F, 12 * F, F),
                             ops.acc_inplace(ctx, ops.dup(ctx, x), y, 4 * F, 12 * F, 12 * F, F)),
          [a, b], lambda x, y: (acc(x, y), acc(x, y)))
    check(lambda ctx, x, y: (ops.set(ctx, x, y, 4 * F, 12 * F, 12 * F, F),
                             ops.set_inplace(ctx, ops.dup(ctx, x), y, 4 * F, 12 * F, 12 * F, F),
                             ops.set_2d(ctx, x, y, 4 * F, F), ops.set_2d_inplace(ctx, ops.dup(ctx, x), y, 4 * F, F)),
          [a, b], lambda x, y: (put(x, y),) * 4)
    v = np.arange(3, dtype=np.float32)

    def put1(x, y):
        out = x.copy().reshape(-1)
        out[5:8] = y
        return out.reshape(x.shape)

    check(lambda ctx, x, y: (ops.set_1d(ctx, x, y, 5 * F), ops.set_1d_inplace(ctx, ops.dup(ctx, x), y, 5 * F)),
          [a, v], lambda x, y: (put1(x, y), put1(x, y)))


def test_get_rows(check):
    table = R.standard_normal((7, 4)).astype(np.float32)
    idx = np.array([3, 0, 6, 3], np.int32)
    check(lambda ctx, a, b: ops.get_rows(ctx, a, b), [table, idx], lambda a, b: a[b])
    batched = R.standard_normal((2, 5, 3)).astype(np.float32)          # ne [3, 5, 2]
    bidx = R.integers(0, 5, (2, 4)).astype(np.int32)                   # ne [4, 2]
    check(lambda ctx, a, b: ops.get_rows(ctx, a, b), [batched, bidx],
          lambda a, b: np.stack([a[i][b[i]] for i in range(2)]))
    check(lambda ctx, a, b: ops.get_rows(ctx, a, b), [(table, "f16"), idx], lambda a, b: a[b], atol=1e-2)


def test_set_rows(check):
    dst = np.zeros((6, 4), np.float32)
    src = R.standard_normal((3, 4)).astype(np.float32)

    def ref(d, s, i):
        out = d.copy()
        out[i] = s
        return out

    check(lambda ctx, a, b, c: ops.set_rows(ctx, a, b, c), [dst, src, np.array([4, 0, 2], np.int64)], ref)
    check(lambda ctx, a, b, c: ops.set_rows(ctx, a, b, c), [dst, src, np.array([5, 1, 3], np.int32)], ref)


def test_diag_masks(check):
    s = R.standard_normal((2, 4, 4)).astype(np.float32)

    def mask(x, n_past, value):
        out = x.copy()
        i, j = np.indices(x.shape[-2:])
        out[..., j > n_past + i] = value
        return out

    check(lambda ctx, a: (ops.diag_mask_inf(ctx, a, 0), ops.diag_mask_zero(ctx, a, 1),
                          ops.diag_mask_inf_inplace(ctx, ops.dup(ctx, a), 1),
                          ops.diag_mask_zero_inplace(ctx, ops.dup(ctx, a), 0)),
          [s], lambda x: (mask(x, 0, -np.inf), mask(x, 1, 0), mask(x, 1, -np.inf), mask(x, 0, 0)))
