"""im2col, convolutions, pooling and resampling against naive numpy references."""

import numpy as np
import pytest

from ggrad.ggml import ops

R = np.random.default_rng(4)


def test_im2col_2d_and_1d(check, refs):
    x = R.standard_normal((2, 3, 5, 6)).astype(np.float32)       # [W=6, H=5, IC=3, N=2]
    w = np.zeros((4, 3, 2, 3), np.float32)                        # [KW=3, KH=2, IC=3, OC=4]
    check(lambda ctx, k, b: ops.im2col(ctx, k, b, 2, 1, 1, 0, 1, 2, True, "f32"), [w, x],
          lambda k, b: refs.im2col_ref(b, 2, 3, (1, 2), (0, 1), (2, 1)))
    x1 = R.standard_normal((2, 3, 7)).astype(np.float32)          # [L=7, IC=3, N=2]
    w1 = np.zeros((4, 3, 3), np.float32)                          # [K=3, IC=3, OC=4]
    check(lambda ctx, k, b: ops.im2col(ctx, k, b, 2, 0, 1, 0, 1, 0, False, "f16"), [w1, x1],
          lambda k, b: refs.im2col_ref(b[:, :, None], 1, 3, (1, 2), (0, 1), (1, 1))[:, 0], atol=1e-2)


@pytest.mark.parametrize("s, p, d", [((1, 1), (0, 0), (1, 1)), ((2, 1), (1, 2), (1, 2))])
def test_conv_2d(check, s, p, d, refs):
    x = R.standard_normal((2, 3, 7, 8)).astype(np.float32)
    w = R.standard_normal((4, 3, 3, 3)).astype(np.float32)
    # GGML's parameter order is (width, height): s0 = width stride
    check(lambda ctx, k, b: (ops.conv_2d(ctx, k, b, s[1], s[0], p[1], p[0], d[1], d[0]),
                             ops.conv_2d_direct(ctx, k, b, s[1], s[0], p[1], p[0], d[1], d[0])),
          [w, x], lambda k, b: (refs.conv2d_ref(b, k, s, p, d),) * 2, atol=2e-2, rtol=2e-2)


def test_conv_2d_shortcuts(check, refs):
    x = R.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = R.standard_normal((3, 2, 3, 3)).astype(np.float32)
    w2 = R.standard_normal((3, 2, 2, 2)).astype(np.float32)
    check(lambda ctx, k, b: ops.conv_2d_s1_ph(ctx, k, b), [w, x], lambda k, b: refs.conv2d_ref(b, k, p=(1, 1)),
          atol=2e-2, rtol=2e-2)
    check(lambda ctx, k, b: ops.conv_2d_sk_p0(ctx, k, b), [w2, x], lambda k, b: refs.conv2d_ref(b, k, s=(2, 2)),
          atol=2e-2, rtol=2e-2)


def test_conv_2d_depthwise(check, refs):
    x = R.standard_normal((2, 3, 6, 5)).astype(np.float32)        # [W=5, H=6, C=3, N=2]
    w = R.standard_normal((3, 1, 3, 3)).astype(np.float32)        # [KW, KH, 1, C]

    def ref(k, b):
        return np.concatenate([refs.conv2d_ref(b[:, c:c + 1], k[c:c + 1], p=(1, 1)) for c in range(3)], axis=1)

    check(lambda ctx, k, k16, b: (ops.conv_2d_dw(ctx, k16, b, 1, 1, 1, 1, 1, 1),
                                  ops.conv_2d_dw_direct(ctx, k, b, 1, 1, 1, 1, 1, 1)),
          [w, (w, "f16"), x], lambda k, k16, b: (ref(k, b), ref(k, b)), atol=2e-2, rtol=2e-2)


def test_conv_1d(check, refs):
    x = R.standard_normal((1, 3, 9)).astype(np.float32)           # [L=9, IC=3, N=1]
    w = R.standard_normal((4, 3, 3)).astype(np.float32)           # [K=3, IC=3, OC=4]
    ref = lambda k, b, s, p, d: refs.conv2d_ref(b[:, :, None], k[:, :, None], (1, s), (0, p), (1, d))[:, :, 0]
    check(lambda ctx, k, b: (ops.conv_1d(ctx, k, b, 2, 1, 1), ops.conv_1d_ph(ctx, k, b, 1, 2)),
          [w, x], lambda k, b: (ref(k, b, 2, 1, 1), ref(k, b, 1, 1, 2)), atol=2e-2, rtol=2e-2)


def test_conv_1d_batch_layout_of_ggml(check, refs):
    """GGML 0.20.2's conv_1d labels its result [OL, OC, N] but, for N > 1, lays the data out as [OL, N, OC]
    (it reshapes mul_mat's [N*OL, OC] result without a permute). This pins that documented behaviour."""
    x = R.standard_normal((2, 3, 9)).astype(np.float32)
    w = R.standard_normal((4, 3, 3)).astype(np.float32)
    ref = lambda k, b: refs.conv2d_ref(b[:, :, None], k[:, :, None])[:, :, 0].transpose(1, 0, 2).reshape(2, 4, 7)
    check(lambda ctx, k, b: ops.conv_1d(ctx, k, b, 1, 0, 1), [w, x], ref, atol=2e-2, rtol=2e-2)


def test_conv_1d_depthwise(check):
    x = R.standard_normal((3, 9)).astype(np.float32)               # [L=9, C=3]
    w = R.standard_normal((3, 1, 3)).astype(np.float32)            # [K=3, 1, C=3]

    def ref(k, b, p):
        return np.stack([np.convolve(np.pad(b[c], p), k[c, 0][::-1], "valid") for c in range(3)])

    check(lambda ctx, k, b: (ops.conv_1d_dw(ctx, k, b, 1, 1, 1), ops.conv_1d_dw_ph(ctx, k, b, 1, 1)),
          [w, x], lambda k, b: (ref(k, b, 1), ref(k, b, 1)), atol=2e-2, rtol=2e-2)


def test_conv_transpose(check):
    b = R.standard_normal((3, 5)).astype(np.float32)               # [L=5, IC=3]
    a = R.standard_normal((3, 2, 4)).astype(np.float32)            # [K=4, OC=2, IC=3]

    def ref1(a, b, s=2):
        ic, oc, k = a.shape
        out = np.zeros((oc, (b.shape[1] - 1) * s + k))
        for l in range(b.shape[1]):
            out[:, l * s:l * s + k] += np.einsum("i,iok->ok", b[:, l], a)
        return out

    check(lambda ctx, k, x: ops.conv_transpose_1d(ctx, k, x, 2, 0, 1), [a, b], ref1, atol=1e-4)
    x2 = R.standard_normal((1, 3, 3, 4)).astype(np.float32)        # [W=4, H=3, IC=3, N=1]
    a2 = R.standard_normal((3, 2, 2, 2)).astype(np.float32)        # [KW=2, KH=2, OC=2, IC=3]

    def ref2(a, x, s=2):
        ic, oc, kh, kw = a.shape
        n, _, h, w = x.shape
        out = np.zeros((n, oc, (h - 1) * s + kh, (w - 1) * s + kw))
        for i in range(h):
            for j in range(w):
                out[:, :, i * s:i * s + kh, j * s:j * s + kw] += np.einsum("ni,iokl->nokl", x[:, :, i, j], a)
        return out

    check(lambda ctx, k, x: ops.conv_transpose_2d_p0(ctx, k, x, 2), [a2, x2], ref2, atol=2e-2, rtol=2e-2)


def test_col2im_1d(check):
    K, oc, T, s = 3, 2, 4, 2
    cols = R.standard_normal((T, K * oc)).astype(np.float32)       # [K*OC, T_in]

    def ref(c):
        out = np.zeros((oc, (T - 1) * s + K))
        blocks = c.reshape(T, oc, K)     # GGML: a.ne[0] = K*OC with K innermost
        for t in range(T):
            out[:, t * s:t * s + K] += blocks[t]
        return out

    check(lambda ctx, a: ops.col2im_1d(ctx, a, s, oc, 0), [cols], ref, atol=1e-5)


def test_conv_3d_builds(ctx):
    a = ctx.new_tensor("f16", (2, 2, 2, 3 * 4))           # KW KH KD, OC*IC with IC = 3, OC = 4
    b = ctx.new_tensor("f32", (5, 5, 5, 3 * 2))           # N = 2
    t = ops.conv_3d(ctx, a, b, 3, 1, 1, 1, 0, 0, 0, 1, 1, 1)
    assert t.ne == (4, 4, 4, 8)
    u = ops.conv_3d_direct(ctx, a, b, 1, 1, 1, 0, 0, 0, 1, 1, 1, 3, 2, 4)
    assert u.ne == (4, 4, 4, 8)
    v = ops.im2col_3d(ctx, a, b, 3, 1, 1, 1, 0, 0, 0, 1, 1, 1, "f32")
    assert v.ne == (2 * 2 * 2 * 3, 4, 4, 4 * 2)


def test_pool(check):
    x = R.standard_normal((2, 3, 6, 7)).astype(np.float32)       # [W=7, H=6, C=3, N=2]

    def pool2d(x, k, s, op):
        oh, ow = (x.shape[2] - k[0]) // s[0] + 1, (x.shape[3] - k[1]) // s[1] + 1
        out = np.zeros(x.shape[:2] + (oh, ow), np.float32)
        for i in range(oh):
            for j in range(ow):
                patch = x[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]]
                out[:, :, i, j] = patch.max((2, 3)) if op == "max" else patch.mean((2, 3))
        return out

    check(lambda ctx, a: (ops.pool_2d(ctx, a, "max", 3, 2, 2, 2, 0, 0), ops.pool_2d(ctx, a, "avg", 2, 2, 2, 2, 0, 0)),
          [x], lambda a: (pool2d(a, (2, 3), (2, 2), "max"), pool2d(a, (2, 2), (2, 2), "avg")), atol=1e-5)
    y = R.standard_normal((3, 8)).astype(np.float32)
    check(lambda ctx, a: (ops.pool_1d(ctx, a, "max", 2, 2, 0), ops.pool_1d(ctx, a, "avg", 4, 2, 0)),
          [y], lambda a: (a.reshape(3, 4, 2).max(-1), np.stack([a[:, i:i + 4].mean(-1) for i in (0, 2, 4)], -1)),
          atol=1e-5)


def test_upscale_interpolate(check):
    x = R.standard_normal((1, 2, 3, 4)).astype(np.float32)
    nearest2 = lambda a: a.repeat(2, axis=2).repeat(2, axis=3)
    check(lambda ctx, a: (ops.upscale(ctx, a, 2, "nearest"), ops.interpolate(ctx, a, 8, 6, 2, 1, "nearest"),
                          ops.upscale_ext(ctx, a, 8, 6, 2, 1, "nearest")),
          [x], lambda a: (nearest2(a),) * 3)


def test_interpolate_bilinear_builds(ctx):
    a = ctx.new_tensor("f32", (4, 3, 2))
    for mode in ("bilinear", "bicubic", "bilinear|align_corners", "bilinear|antialias",
                 2 | ops.pool.SCALE_FLAGS["align_corners"]):
        assert ops.interpolate(ctx, a, 7, 5, 2, 1, mode).ne == (7, 5, 2, 1)
