"""GGML's backward ops against numpy vector-Jacobian products. In every one the gradient comes first.

These tests also pin the true argument orders where ggml.h's comments are wrong (rms_norm_back,
cross_entropy_loss_back, im2col_back): the builders pass the arguments through unchanged, so a wrong
order would show up as a wrong gradient here.
"""


import numpy as np
import pytest

from ggrad.ggml import errors, ops

R = np.random.default_rng(5)


def test_get_rows_back(check):
    data = np.zeros((6, 4), np.float32)
    idx = np.array([1, 4, 1, 0, 4], np.int32)
    grad = R.standard_normal((5, 4)).astype(np.float32)

    def ref(g, i, c):
        out = np.zeros_like(c)
        np.add.at(out, i, g)
        return out

    check(lambda ctx, g, i, c: ops.get_rows_back(ctx, g, i, c), [grad, idx, data], ref, atol=1e-6)


@pytest.mark.parametrize("inplace", [False, True])
def test_soft_max_ext_back(check, inplace, refs):
    x = R.standard_normal((2, 3, 6)).astype(np.float32)
    dy = R.standard_normal((2, 3, 6)).astype(np.float32)
    scale = 0.6
    y = refs.softmax(x * scale).astype(np.float32)
    fn = ops.soft_max_ext_back_inplace if inplace else ops.soft_max_ext_back
    build = (lambda ctx, g, s: fn(ctx, ops.dup(ctx, g), s, scale, 0.0)) if inplace else \
        (lambda ctx, g, s: fn(ctx, g, s, scale, 0.0))
    # the Jacobian-vector product of y = refs.softmax(scale * x), dy first
    check(build, [dy, y], lambda g, s: scale * s * (g - (g * s).sum(-1, keepdims=True)), atol=1e-5)


def test_soft_max_ext_back_matches_finite_differences(check, refs):
    x = R.standard_normal((1, 5)).astype(np.float64)
    dy = R.standard_normal((1, 5)).astype(np.float64)
    scale, h = 1.3, 1e-6
    num = np.array([((dy * refs.softmax((x + h * e) * scale)).sum() - (dy * refs.softmax((x - h * e) * scale)).sum()) / (2 * h)
                    for e in np.eye(5)]).reshape(1, 5)
    y = refs.softmax(x * scale)
    check(lambda ctx, g, s: ops.soft_max_ext_back(ctx, g, s, scale, 0.0),
          [dy.astype(np.float32), y.astype(np.float32)], lambda g, s: num, atol=1e-4)


def test_rms_norm_back_takes_gradient_first(check, run):
    eps = 1e-5
    x = R.standard_normal((3, 8)).astype(np.float32)
    dy = R.standard_normal((3, 8)).astype(np.float32)

    def vjp(g, x):
        rms = np.sqrt((x * x).mean(-1, keepdims=True) + eps)
        y = x / rms
        return (g - y * (g * y).mean(-1, keepdims=True)) / rms

    check(lambda ctx, g, x_: ops.rms_norm_back(ctx, g, x_, eps), [dy, x], vjp, atol=1e-5)
    # ggml.h's documented order (x, dy) gives something else
    got, _ = run(lambda ctx, g, x_: ops.rms_norm_back(ctx, x_, g, eps), [dy, x])
    assert not np.allclose(got[0].reshape(3, 8), vjp(dy, x), atol=1e-3)


def test_silu_back(check):
    x = R.standard_normal((3, 7)).astype(np.float32)
    dy = R.standard_normal((3, 7)).astype(np.float32)
    sig = lambda v: 1 / (1 + np.exp(-v))
    check(lambda ctx, g, x_: ops.silu_back(ctx, g, x_), [dy, x],
          lambda g, v: g * sig(v) * (1 + v * (1 - sig(v))), atol=1e-5)


def test_rope_ext_back(check, refs):
    dy = R.standard_normal((4, 2, 8)).astype(np.float32)
    pos = np.array([0, 3, 5, 11], np.int32)
    ext = (0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    for mode, neox in (("normal", False), ("neox", True)):
        # rope is a rotation, so its VJP is the inverse rotation
        check(lambda ctx, g, p: ops.rope_ext_back(ctx, g, p, None, 8, mode, *ext), [dy, pos],
              lambda g, p: refs.rope_ref(g, -p, 8, neox), atol=1e-4)


def test_rope_multi_back_builds(ctx):
    g = ctx.new_tensor("f32", (16, 2, 3))
    pos = ctx.new_tensor("i32", (12,))
    t = ops.rope_multi_back(ctx, g, pos, None, 16, [4, 2, 2, 0], "mrope", 0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    assert t.ne == g.ne and t.op == "ROPE_BACK"


def test_im2col_back_takes_gradient_first(check, refs):
    x_shape = (2, 3, 5, 6)                                       # data [W=6, H=5, IC=3, N=2]
    kernel = np.zeros((4, 3, 2, 3), np.float32)                  # [KW=3, KH=2, IC=3, OC=4]
    s, p, d = (1, 2), (0, 1), (2, 1)                             # (height, width)
    cols_shape = refs.im2col_ref(np.zeros(x_shape, np.float32), 2, 3, s, p, d).shape
    grad = R.standard_normal(cols_shape).astype(np.float32)

    def vjp(g, k):
        # im2col is linear: its VJP is <g, im2col(e_i)> for every input element e_i
        out = np.zeros(x_shape, np.float64)
        flat = out.reshape(-1)
        for i in range(flat.size):
            e = np.zeros(flat.size, np.float32)
            e[i] = 1
            flat[i] = (g * refs.im2col_ref(e.reshape(x_shape), 2, 3, s, p, d)).sum()
        return out

    ne = list(reversed(x_shape))
    check(lambda ctx, g, k: ops.im2col_back(ctx, g, k, ne, s[1], s[0], p[1], p[0], d[1], d[0], True),
          [grad, kernel], vjp, atol=1e-4)


@pytest.mark.parametrize("op", ["max", "avg"])
def test_pool_2d_back(check, op):
    x = R.standard_normal((1, 2, 4, 6)).astype(np.float32)       # [W=6, H=4, C=2, N=1]
    grad = R.standard_normal((1, 2, 2, 3)).astype(np.float32)    # 2x2 kernel, stride 2

    def vjp(g, x):
        out = np.zeros_like(x)
        for i in range(2):
            for j in range(3):
                patch = x[:, :, 2 * i:2 * i + 2, 2 * j:2 * j + 2]
                if op == "avg":
                    out[:, :, 2 * i:2 * i + 2, 2 * j:2 * j + 2] += g[:, :, i:i + 1, j:j + 1] / 4
                else:
                    for c in range(2):
                        r, q = np.unravel_index(np.argmax(patch[0, c]), (2, 2))
                        out[0, c, 2 * i + r, 2 * j + q] += g[0, c, i, j]
        return out

    check(lambda ctx, g, a: ops.pool_2d_back(ctx, g, a, op, 2, 2, 2, 2, 0, 0), [grad, x], vjp, atol=1e-6)


def test_cross_entropy_loss_back_takes_gradient_first(check, refs):
    logits = R.standard_normal((4, 5)).astype(np.float32)
    labels = refs.softmax(R.standard_normal((4, 5))).astype(np.float32)
    g = np.array([0.7], np.float32)
    check(lambda ctx, g_, a, b: ops.cross_entropy_loss_back(ctx, g_, a, b), [g, logits, labels],
          lambda g_, a, b: g_[0] * (refs.softmax(a) - b) / a.shape[0], atol=1e-6)


def test_cross_entropy_loss_back_rejects_the_header_order(ctx):
    logits = ctx.new_tensor("f32", (5, 4))
    labels = ctx.new_tensor("f32", (5, 4))
    g = ctx.new_tensor("f32", (1,))
    with pytest.raises(errors.ShapeError, match="cross_entropy_loss_back.*scalar"):
        ops.cross_entropy_loss_back(ctx, logits, labels, g)


def test_repeat_back(check):
    g = R.standard_normal((2, 3, 4)).astype(np.float32)
    check(lambda ctx, a, b: ops.repeat_back(ctx, a, b), [g, np.zeros((1, 3, 2), np.float32)],
          lambda a, b: a.reshape(2, 3, 2, 2).sum(axis=(0, 2)).reshape(1, 3, 2), atol=1e-5)


def test_out_prod_is_mul_mat_gradient(check):
    a = R.standard_normal((4, 6)).astype(np.float32)    # mul_mat(a, b) = b @ a.T, b (3, 6)
    b = R.standard_normal((3, 6)).astype(np.float32)
    dy = R.standard_normal((3, 4)).astype(np.float32)   # gradient of b @ a.T
    # d/da = dy.T @ b = out_prod(b, dy) in GGML terms
    check(lambda ctx, b_, g: ops.out_prod(ctx, b_, g), [b, dy], lambda b_, g: g.T @ b_, atol=1e-5)


def test_flash_attn_back_refuses(ctx):
    q = ctx.new_tensor("f32", (8, 3, 2))
    with pytest.raises(errors.GGMLError, match="flash_attn_back"):
        ops.flash_attn_back(ctx, q, q, q, q, False)
