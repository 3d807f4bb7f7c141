"""Optimizer steps against numpy, the model-specific builders, and custom (Python) operators."""

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import ops

R = np.random.default_rng(6)


def test_opt_step_adamw(runner):
    w = R.standard_normal((3, 4)).astype(np.float32)
    g = R.standard_normal((3, 4)).astype(np.float32)
    m = R.standard_normal((3, 4)).astype(np.float32) * 0.1
    v = np.abs(R.standard_normal((3, 4))).astype(np.float32) * 0.1
    alpha, beta1, beta2, eps, wd, t = 1e-2, 0.9, 0.999, 1e-8, 0.1, 3
    hp = np.array([alpha, beta1, beta2, eps, wd, 1 / (1 - beta1**t), 1 / (1 - beta2**t)], np.float32)

    def build(ctx, w_, g_, m_, v_, p_):
        w_.set_param()
        return ops.opt_step_adamw(ctx, w_, g_, m_, v_, p_)

    got, _ = runner.run(build, [w, g, m, v, hp])
    m_ref = beta1 * m + (1 - beta1) * g
    v_ref = beta2 * v + (1 - beta2) * g * g
    w_ref = w * (1 - alpha * wd) - alpha * (m_ref * hp[5]) / (np.sqrt(v_ref * hp[6]) + eps)
    np.testing.assert_allclose(got[0].reshape(3, 4), w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gg.get_data(runner.inputs[2]).reshape(3, 4), m_ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gg.get_data(runner.inputs[3]).reshape(3, 4), v_ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gg.get_data(runner.inputs[0]).reshape(3, 4), w_ref, rtol=1e-5, atol=1e-6)


def test_opt_step_sgd(check):
    w = R.standard_normal((5,)).astype(np.float32)
    g = R.standard_normal((5,)).astype(np.float32)
    hp = np.array([0.1, 0.01], np.float32)

    def build(ctx, w_, g_, p_):
        w_.set_param()
        return ops.opt_step_sgd(ctx, w_, g_, p_)

    check(build, [w, g, hp], lambda w_, g_, p_: w_ * (1 - p_[0] * p_[1]) - p_[0] * g_, atol=1e-6)


def test_ssm_conv(check):
    sx = R.standard_normal((2, 4, 8)).astype(np.float32)         # [d_conv - 1 + n_t = 8, d_inner = 4, n_s = 2]
    c = R.standard_normal((4, 4)).astype(np.float32)             # [d_conv = 4, d_inner = 4]

    def ref(sx, c):
        n_t = 8 - 4 + 1
        return np.stack([np.stack([(sx[s, :, t:t + 4] * c).sum(-1) for t in range(n_t)]) for s in range(2)])

    check(lambda ctx, a, b: ops.ssm_conv(ctx, a, b), [sx, c], ref, atol=1e-5)


def test_dsv4_hyper_connections(check):
    E, T, hc = 3, 2, 4
    x = R.standard_normal((T, hc, E)).astype(np.float32)         # [E, hc, T]
    w = R.standard_normal((T, hc)).astype(np.float32)            # [hc, T]
    check(lambda ctx, a, b: ops.dsv4_hc_pre(ctx, a, b), [x, w], lambda a, b: np.einsum("the,th->te", a, b), atol=1e-5)
    xx = R.standard_normal((T, E)).astype(np.float32)
    post = R.standard_normal((T, hc)).astype(np.float32)
    comb = R.standard_normal((T, hc, hc)).astype(np.float32)    # [dst (inner), src, T] -> numpy [T, src, dst]
    check(lambda ctx, a, r, p, c: ops.dsv4_hc_post(ctx, a, r, p, c), [xx, x, post, comb],
          lambda a, r, p, c: a[:, None, :] * p[:, :, None] + np.einsum("tse,tsd->tde", r, c), atol=1e-5)


def test_win_part_roundtrip(check):
    a = R.standard_normal((5, 7, 3)).astype(np.float32)          # [C=3, W=7, H=5]
    check(lambda ctx, x: ops.win_unpart(ctx, ops.win_part(ctx, x, 3), 7, 5, 3), [a], lambda x: x)


def test_special_builders_shapes(ctx):
    f = lambda *ne, t="f32": ctx.new_tensor(t, ne)
    # Mamba-2 selective scan
    s, x, dt, A = f(16, 2, 3, 2), f(2, 3, 4, 2), f(3, 4, 2), f(1, 3)
    B, Cm, ids = f(16, 1, 4, 2), f(16, 1, 4, 2), f(2, t="i32")
    assert ops.ssm_scan(ctx, s, x, dt, A, B, Cm, ids, 1).ne == (2 * 3 * 4 * 2 + 16 * 2 * 3 * 2, 1, 1, 1)
    S, H, T = 4, 2, 3
    k = f(S, H, T)
    st = f(S * S * H, 1)
    assert ops.rwkv_wkv6(ctx, k, k, k, f(S, H), k, st).ne == (S * H, T + S, 1, 1)
    assert ops.gated_linear_attn(ctx, k, k, k, k, st, 0.5).ne == (S * H, T + S, 1, 1)
    assert ops.rwkv_wkv7(ctx, k, k, k, k, k, k, st).ne == (S * H, T + S, 1, 1)
    q, v = f(S, 1, T, 1), f(S, H, T, 1)
    gdn = ops.gated_delta_net(ctx, q, q, v, f(1, H, T, 1), f(1, H, T, 1), f(S, S, H, 1), 1)
    assert gdn.ne == (S * H, T + S, 1, 1)
    li = ops.lightning_indexer(ctx, f(8, 2, 3, 1), f(8, 1, 5, 1), f(2, 3, 1, 1), f(5, 3, 1, 1, t="f16"))
    assert li.ne == (5, 3, 1, 1)
    assert ops.dsv4_hc_comb(ctx, f(24, 3), f(3), f(24), 1e-6, 2).ne == (4, 4, 3, 1)
    assert ops.get_rel_pos(ctx, f(6, 5, t="f16"), 3, 3).ne == (6, 3, 3, 1)
    a, pw = f(4, 6, 4), f(2, 2, 3, 4)
    assert ops.add_rel_pos(ctx, a, pw, pw).ne == a.ne
    assert ops.add_rel_pos_inplace(ctx, a, pw, pw).ne == a.ne


def _np(t):
    return gg.view(t)


def test_map_custom(check):
    a = R.standard_normal((3, 4)).astype(np.float32)
    b = R.standard_normal((3, 4)).astype(np.float32)
    c = R.standard_normal((3, 4)).astype(np.float32)

    def double(dst, x, ith, nth, scale):
        _np(dst)[...] = scale * _np(x)

    def add(dst, x, y, ith, nth, _):
        _np(dst)[...] = _np(x) + _np(y)

    def fma(dst, x, y, z, ith, nth, _):
        _np(dst)[...] = _np(x) * _np(y) + _np(z)

    check(lambda ctx, x, y, z: (ops.map_custom1(ctx, x, double, 1, 2.0),
                                ops.map_custom1_inplace(ctx, ops.dup(ctx, x), double, 1, 3.0),
                                ops.map_custom2(ctx, x, y, add, 1), ops.map_custom2_inplace(ctx, ops.dup(ctx, x), y, add, 1),
                                ops.map_custom3(ctx, x, y, z, fma, 1),
                                ops.map_custom3_inplace(ctx, ops.dup(ctx, x), y, z, fma, 1)),
          [a, b, c], lambda x, y, z: (2 * x, 3 * x, x + y, x + y, x * y + z, x * y + z))


def test_custom_4d_and_inplace(check):
    a = R.standard_normal((3, 4)).astype(np.float32)
    b = R.standard_normal((3, 4)).astype(np.float32)

    def total(dst, ith, nth, _):
        _np(dst)[...] = _np(dst.src(0)) + _np(dst.src(1))

    def negate(dst, ith, nth, _):
        _np(dst)[...] = -_np(dst.src(0)) + _np(dst.src(1))

    check(lambda ctx, x, y: (ops.custom_4d(ctx, "f32", 4, 3, 1, 1, [x, y], 2, total, 1),
                             ops.custom_inplace(ctx, ops.dup(ctx, x), [y], None, negate, 1)),
          [a, b], lambda x, y: (x + y, y - x))


def test_custom_python_exception_is_reraised(run):
    def boom(dst, x, ith, nth, _):
        raise KeyError("raised inside a custom op")

    with pytest.raises(KeyError, match="raised inside a custom op"):
        run(lambda ctx, x: ops.map_custom1(ctx, x, boom, 1), [np.ones(3, np.float32)])
