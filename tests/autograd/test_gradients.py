"""A gradient check for every differentiable op: analytic (ggrad) vs central differences (float64 numpy)."""

import math

import numpy as np
import pytest

import ggrad
from gradcheck import check

rng = np.random.default_rng(1234)


def r(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape)


def pos(*shape):
    return rng.uniform(0.5, 2.0, size=shape)


def away_from_zero(*shape):
    x = rng.uniform(0.3, 2.0, size=shape)
    return x * rng.choice([-1.0, 1.0], size=shape)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def np_gelu(x):
    from math import erf
    return x * 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def np_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_rms_norm(x, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


UNARY = [
    ("neg", lambda x: -x, lambda x: -x, r(3, 4)),
    ("abs", ggrad.abs, np.abs, away_from_zero(3, 4)),
    ("exp", ggrad.exp, np.exp, r(3, 4)),
    ("log", ggrad.log, np.log, pos(3, 4)),
    ("sqrt", ggrad.sqrt, np.sqrt, pos(3, 4)),
    ("rsqrt", ggrad.rsqrt, lambda x: 1 / np.sqrt(x), pos(3, 4)),
    ("reciprocal", ggrad.reciprocal, lambda x: 1 / x, away_from_zero(3, 4)),
    ("square", ggrad.square, np.square, r(3, 4)),
    ("sin", ggrad.sin, np.sin, r(3, 4)),
    ("cos", ggrad.cos, np.cos, r(3, 4)),
    ("tanh", ggrad.tanh, np.tanh, r(3, 4)),
    ("sigmoid", ggrad.sigmoid, lambda x: 1 / (1 + np.exp(-x)), r(3, 4)),
    ("relu", ggrad.relu, lambda x: np.maximum(x, 0), away_from_zero(3, 4)),
    ("leaky_relu", lambda x: ggrad.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x), away_from_zero(3, 4)),
    ("elu", ggrad.elu, lambda x: np.where(x > 0, x, np.exp(x) - 1), away_from_zero(3, 4)),
    ("elu_alpha", lambda x: ggrad.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1)),
     away_from_zero(3, 4)),
    ("gelu", ggrad.gelu, np_gelu, r(3, 4)),
    ("gelu_tanh", lambda x: ggrad.gelu(x, approximate="tanh"), np_gelu_tanh, r(3, 4)),
    ("silu", ggrad.silu, lambda x: x / (1 + np.exp(-x)), r(3, 4)),
    ("softplus", ggrad.softplus, lambda x: np.log1p(np.exp(x)), r(3, 4)),
    ("clamp", lambda x: ggrad.clamp(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), away_from_zero(4, 5)),
    ("pow2", lambda x: x ** 2, lambda x: x ** 2, r(3, 4)),
    ("pow3_negative_base", lambda x: x ** 3, lambda x: x ** 3, away_from_zero(3, 4)),
    ("pow_frac", lambda x: x ** 1.7, lambda x: x ** 1.7, pos(3, 4)),
    ("pow_neg", lambda x: x ** -1.5, lambda x: x ** -1.5, pos(3, 4)),
    ("scalar_ops", lambda x: (2.0 - x) * 3.0 / 4.0 + 1.0, lambda x: (2.0 - x) * 3.0 / 4.0 + 1.0, r(3, 4)),
    ("rdiv", lambda x: 2.0 / x, lambda x: 2.0 / x, away_from_zero(3, 4)),
    ("rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x, r(3, 4)),
]


@pytest.mark.parametrize("name,fn,ref,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, ref, x):
    check(fn, ref, [x])


BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((2, 3, 4), (3, 1)), ((3, 1), (1, 4)),
                 ((2, 1, 4), (1, 3, 1)), ((), (2, 3)), ((2, 3, 4, 5), (5,))]
BINARY = [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
          ("div", lambda a, b: a / b)]


@pytest.mark.parametrize("sa,sb", BINARY_SHAPES)
@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcast(name, fn, sa, sb):
    a = r(*sa)
    b = away_from_zero(*sb) if name == "div" else r(*sb)
    check(fn, fn, [a, b])


def test_pow_tensor_tensor():
    check(lambda a, b: a ** b, lambda a, b: a ** b, [pos(3, 4), r(3, 4)])


def test_maximum_minimum():
    a, b = r(3, 4), r(3, 4)
    check(ggrad.maximum, np.maximum, [a, b])
    check(ggrad.minimum, np.minimum, [a, b])


REDUCE_CASES = [((3, 4, 5), None, False), ((3, 4, 5), 0, False), ((3, 4, 5), 1, True), ((3, 4, 5), -1, False),
                ((3, 4, 5), (0, 2), True), ((3, 4, 5), (0, 1), False), ((2, 3, 4, 5), (1, 3), False),
                ((6,), 0, True)]


@pytest.mark.parametrize("shape,dim,keepdim", REDUCE_CASES)
def test_sum_mean(shape, dim, keepdim):
    x = r(*shape)
    axis = dim if not isinstance(dim, list) else tuple(dim)
    check(lambda t: t.sum(dim, keepdim=keepdim), lambda a: a.sum(axis=axis, keepdims=keepdim), [x])
    check(lambda t: t.mean(dim, keepdim=keepdim), lambda a: a.mean(axis=axis, keepdims=keepdim), [x])


@pytest.mark.parametrize("shape,dim,keepdim", REDUCE_CASES[:5])
def test_var_std(shape, dim, keepdim):
    x = r(*shape)
    check(lambda t: t.var(dim, keepdim=keepdim), lambda a: a.var(axis=dim, keepdims=keepdim, ddof=1), [x])
    check(lambda t: t.std(dim, keepdim=keepdim, unbiased=False),
          lambda a: a.std(axis=dim, keepdims=keepdim), [x])


@pytest.mark.parametrize("shape,dim,keepdim", REDUCE_CASES)
def test_amax_amin(shape, dim, keepdim):
    x = rng.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape) * 0.1
    check(lambda t: ggrad.amax(t, dim, keepdim), lambda a: a.max(axis=dim, keepdims=keepdim), [x])
    check(lambda t: ggrad.amin(t, dim, keepdim), lambda a: a.min(axis=dim, keepdims=keepdim), [x])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logsumexp(dim):
    x = r(3, 4, 5)
    check(lambda t: ggrad.logsumexp(t, dim), lambda a: np.log(np.exp(a).sum(axis=dim)), [x])


MATMUL_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)),
                 ((2, 1, 3, 4), (1, 3, 4, 2)), ((4,), (4, 5)), ((3, 4), (4,))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb):
    check(lambda a, b: a @ b, np.matmul, [r(*sa), r(*sb)])


def test_linear():
    check(lambda x, w, b: ggrad.linear(x, w, b), lambda x, w, b: x @ w.T + b, [r(2, 3, 4), r(5, 4), r(5)])


SHAPE_OPS = [
    ("reshape", lambda t: t.reshape(4, 6), lambda a: a.reshape(4, 6), (2, 3, 4)),
    ("view_infer", lambda t: t.view(-1, 2), lambda a: a.reshape(-1, 2), (2, 3, 4)),
    ("permute", lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), (2, 3, 4)),
    ("permute4", lambda t: t.permute(3, 1, 0, 2), lambda a: a.transpose(3, 1, 0, 2), (2, 3, 4, 5)),
    ("transpose", lambda t: t.transpose(0, 2), lambda a: a.swapaxes(0, 2), (2, 3, 4)),
    ("T", lambda t: t.T, lambda a: a.T, (3, 4)),
    ("flatten", lambda t: t.flatten(1), lambda a: a.reshape(2, -1), (2, 3, 4)),
    ("squeeze", lambda t: t.squeeze(1), lambda a: a.squeeze(1), (3, 1, 4)),
    ("unsqueeze", lambda t: t.unsqueeze(-1), lambda a: a[..., None], (3, 4)),
    ("expand", lambda t: t.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), (3, 1)),
    ("contiguous_of_permute", lambda t: t.permute(1, 0).contiguous() * 1.0, lambda a: a.T, (3, 4)),
    ("slice", lambda t: t[:, 1:3], lambda a: a[:, 1:3], (3, 4)),
    ("slice3", lambda t: t[1:, :, 2:], lambda a: a[1:, :, 2:], (3, 4, 5)),
    ("int_index", lambda t: t[1], lambda a: a[1], (3, 4)),
    ("neg_index", lambda t: t[:, -1], lambda a: a[:, -1], (3, 4)),
    ("strided", lambda t: t[::2], lambda a: a[::2], (5, 3)),
    ("ellipsis_none", lambda t: t[..., None, 1], lambda a: a[..., None, 1], (2, 3, 4)),
    ("index_list", lambda t: t[[2, 0, 2]], lambda a: a[[2, 0, 2]], (3, 4)),
    ("narrow", lambda t: t.narrow(1, 1, 2), lambda a: a[:, 1:3], (3, 4)),
    ("slice_of_permute", lambda t: t.permute(1, 0)[1:3], lambda a: a.T[1:3], (3, 4)),
]


@pytest.mark.parametrize("name,fn,ref,shape", SHAPE_OPS, ids=[s[0] for s in SHAPE_OPS])
def test_shape_ops(name, fn, ref, shape):
    check(fn, ref, [r(*shape)])


def test_cat_stack_split_chunk():
    a, b, c = r(2, 3), r(2, 3), r(2, 5)
    check(lambda x, y: ggrad.cat([x, y], 0), lambda x, y: np.concatenate([x, y], 0), [a, b])
    check(lambda x, y: ggrad.cat([x, y], 1), lambda x, y: np.concatenate([x, y], 1), [a, c])
    check(lambda x, y: ggrad.stack([x, y], 1), lambda x, y: np.stack([x, y], 1), [a, b])
    check(lambda x: ggrad.split(x, 2, 1)[1] * 2.0, lambda x: x[:, 2:4] * 2.0, [c])
    check(lambda x: ggrad.chunk(x, 3, 1)[2] + ggrad.chunk(x, 3, 1)[0][:, :1],
          lambda x: x[:, 4:5] + x[:, 0:1], [c])


def test_cat_and_split_of_many_parts():
    """Five parts (joined pairwise, level by level, with one left over at a level) and back."""
    parts = [r(2, n) for n in (1, 3, 2, 4, 1)]
    check(lambda *xs: ggrad.cat(list(xs), 1) * ggrad.tensor(np.arange(11.0)),
          lambda *xs: np.concatenate(xs, 1) * np.arange(11.0), parts)
    w = np.arange(11.0)
    check(lambda x: sum((p * float(i + 1)).sum() for i, p in enumerate(ggrad.split(x, [1, 3, 2, 4, 1], 1))),
          lambda x: sum((p * float(i + 1)).sum() for i, p in enumerate(np.split(x, np.cumsum([1, 3, 2, 4])[:], 1))),
          [r(2, 11) + w])


def test_index_select_and_gather():
    x = r(4, 5)
    idx = np.array([3, 0, 3, 1])
    check(lambda t: ggrad.index_select(t, 0, ggrad.tensor(idx)), lambda a: a[idx], [x])
    check(lambda t: ggrad.index_select(t, 1, ggrad.tensor(idx)), lambda a: a[:, idx], [x])
    gidx = np.array([[0, 4], [1, 1], [3, 2], [0, 0]])
    check(lambda t: ggrad.gather(t, -1, ggrad.tensor(gidx)), lambda a: np.take_along_axis(a, gidx, -1), [x])
    x3 = r(2, 3, 4)
    check(lambda t: t.index_select(2, ggrad.tensor([1, 3])), lambda a: a[:, :, [1, 3]], [x3])


def test_masked_fill_where():
    x, y = r(3, 4), r(3, 4)
    m = rng.random((3, 4)) > 0.5
    check(lambda t: t.masked_fill(ggrad.tensor(m), 2.5), lambda a: np.where(m, 2.5, a), [x])
    check(lambda a, b: ggrad.where(ggrad.tensor(m), a, b), lambda a, b: np.where(m, a, b), [x, y])


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_log_softmax(dim):
    x = r(3, 4, 5)
    check(lambda t: ggrad.softmax(t, dim), lambda a: np_softmax(a, dim), [x])
    check(lambda t: ggrad.log_softmax(t, dim), lambda a: np_log_softmax(a, dim), [x])


def test_softmax_ext_scale_mask_alibi():
    x = r(2, 3, 4)   # heads, rows, cols
    mask = np.where(rng.random((3, 4)) > 0.3, 0.0, -np.inf)
    mask[:, 0] = 0.0

    def slopes(n_head, max_bias):
        n_floor = 2 ** math.floor(math.log2(n_head))
        m0 = 2 ** (-max_bias / n_floor)
        m1 = 2 ** (-(max_bias / 2) / n_floor)
        return np.array([m0 ** (h + 1) if h < n_floor else m1 ** (2 * (h - n_floor) + 1) for h in range(n_head)])

    def ref(a, scale=0.5, max_bias=0.0):
        bias = mask[None] * 1.0
        if max_bias:
            s = slopes(a.shape[0], max_bias)[:, None, None]
            bias = s * mask[None]
        return np_softmax(a * scale + bias, -1)

    m = ggrad.tensor(mask)
    check(lambda t: ggrad.softmax_ext(t, m, 0.5, 0.0), ref, [x])
    m_alibi = np.where(np.isinf(mask), -np.inf, rng.uniform(-1, 0, (3, 4)))
    mask[:] = m_alibi
    check(lambda t: ggrad.softmax_ext(t, ggrad.tensor(m_alibi), 0.5, 8.0), lambda a: ref(a, 0.5, 8.0), [x])


def test_softmax_masked_rows_have_no_nan():
    x = ggrad.tensor(r(2, 4), requires_grad=True)
    mask = ggrad.tensor(np.array([[0, 0, -np.inf, -np.inf], [0, -np.inf, 0, -np.inf]]))
    y = ggrad.softmax_ext(x, mask)
    y.sum().backward()
    assert np.isfinite(y.numpy()).all() and np.isfinite(x.grad.numpy()).all()
    assert (y.numpy()[mask.numpy() < 0] == 0).all()


def test_layer_norm_rms_norm():
    x, w, b = r(3, 6), r(6), r(6)
    check(lambda t, wt, bt: ggrad.layer_norm(t, 6, wt, bt), np_layer_norm, [x, w, b])
    check(lambda t: ggrad.layer_norm(t, (2, 3)), lambda a: np_layer_norm(a.reshape(3, 6), 1, 0).reshape(3, 2, 3),
          [x.reshape(3, 2, 3)])
    check(lambda t: ggrad.rms_norm(t, 6), np_rms_norm, [x])


def test_embedding():
    w = r(5, 3)
    idx = np.array([[1, 4], [1, 0]])
    check(lambda t: ggrad.embedding(ggrad.tensor(idx), t), lambda a: a[idx], [w])


def np_cross_entropy(logits, target, ignore_index=-100, smoothing=0.0):
    ls = np_log_softmax(logits)
    c = logits.shape[1]
    valid = target != ignore_index
    onehot = np.zeros_like(logits)
    onehot[np.arange(len(target))[valid], target[valid]] = 1
    soft = onehot * (1 - smoothing) + smoothing / c
    per_row = -(soft * ls).sum(1) * valid
    return per_row.sum() / valid.sum()


def test_cross_entropy():
    x = r(5, 4)
    t = np.array([0, 3, 1, 1, 2])
    check(lambda a: ggrad.cross_entropy(a, ggrad.tensor(t)), lambda a: np_cross_entropy(a, t), [x])
    t2 = np.array([0, -100, 1, 3, -100])
    check(lambda a: ggrad.cross_entropy(a, ggrad.tensor(t2)), lambda a: np_cross_entropy(a, t2), [x])
    check(lambda a: ggrad.cross_entropy(a, ggrad.tensor(t2), ignore_index=-100, label_smoothing=0.1),
          lambda a: np_cross_entropy(a, t2, smoothing=0.1), [x])
    check(lambda a: ggrad.cross_entropy(a, ggrad.tensor(t), reduction="sum"),
          lambda a: np_cross_entropy(a, t) * 5, [x])


def test_cross_entropy_spatial_and_probabilities():
    x = r(2, 3, 4)  # N, C, L
    t = np.array([[0, 1, 2, 1], [2, 2, 0, 1]])

    def ref(a):
        return np_cross_entropy(a.transpose(0, 2, 1).reshape(-1, 3), t.reshape(-1))
    check(lambda a: ggrad.cross_entropy(a, ggrad.tensor(t)), ref, [x])
    p = np_softmax(r(4, 3))
    check(lambda a: ggrad.cross_entropy(a, ggrad.tensor(p)), lambda a: -(p * np_log_softmax(a)).sum(1).mean(),
          [r(4, 3)])


def test_nll_mse_l1_huber_bce():
    x, y = r(4, 3), r(4, 3)
    t = np.array([2, 0, 1, 1])
    check(lambda a: ggrad.nll_loss(a, ggrad.tensor(t)), lambda a: -a[np.arange(4), t].mean(), [x])
    check(lambda a, b: ggrad.mse_loss(a, b), lambda a, b: ((a - b) ** 2).mean(), [x, y])
    check(lambda a, b: ggrad.l1_loss(a, b), lambda a, b: np.abs(a - b).mean(), [x, y + 0.05])

    def huber(a, b, d=0.5):
        e = np.abs(a - b)
        return np.where(e < d, 0.5 * e ** 2, d * (e - 0.5 * d)).mean()
    check(lambda a, b: ggrad.huber_loss(a, b, delta=0.5), huber, [x, y + 0.01])
    z = (rng.random((4, 3)) > 0.5).astype(np.float64)

    def bce_logits(a):
        return (np.maximum(a, 0) - a * z + np.log1p(np.exp(-np.abs(a)))).mean()
    check(lambda a: ggrad.binary_cross_entropy_with_logits(a, ggrad.tensor(z)), bce_logits, [x])
    p = rng.uniform(0.1, 0.9, (4, 3))
    check(lambda a: ggrad.binary_cross_entropy(a, ggrad.tensor(z)),
          lambda a: -(z * np.log(a) + (1 - z) * np.log(1 - a)).mean(), [p])


def np_conv2d(x, w, b, stride=1, padding=0, dilation=1):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + dilation * (kh - 1) + 1:dilation,
                       j * stride:j * stride + dilation * (kw - 1) + 1:dilation]
            out[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w)
    return out + b[None, :, None, None]


@pytest.mark.parametrize("stride,padding,dilation", [(1, 0, 1), (2, 1, 1), (1, 1, 2)])
def test_conv2d(stride, padding, dilation):
    check(lambda x, w, b: ggrad.conv2d(x, w, b, stride, padding, dilation),
          lambda x, w, b: np_conv2d(x, w, b, stride, padding, dilation),
          [r(2, 2, 5, 5), r(3, 2, 3, 3), r(3)], grad_atol=5e-3)


def test_conv1d():
    def ref(x, w, b):
        return np_conv2d(x[:, :, None, :], w[:, :, None, :], b, 1, 0)[:, :, 0, :]
    check(lambda x, w, b: ggrad.conv1d(x, w, b), ref, [r(2, 3, 7), r(4, 3, 3), r(4)])

    def ref_strided(x, w, b):
        return ref(np.pad(x, ((0, 0), (0, 0), (1, 1))), w, b)[:, :, ::2]
    check(lambda x, w, b: ggrad.conv1d(x, w, b, stride=2, padding=1), ref_strided, [r(2, 3, 8), r(4, 3, 3), r(4)])


def test_pools():
    x = rng.permutation(np.arange(2 * 2 * 4 * 4, dtype=np.float64)).reshape(2, 2, 4, 4) * 0.1

    def max_ref(a):
        return a.reshape(2, 2, 2, 2, 2, 2).max(axis=(3, 5))

    def avg_ref(a):
        return a.reshape(2, 2, 2, 2, 2, 2).mean(axis=(3, 5))
    check(lambda t: ggrad.max_pool2d(t, 2), max_ref, [x])
    check(lambda t: ggrad.avg_pool2d(t, 2), avg_ref, [x])


def test_dropout_scales_and_masks():
    ggrad.manual_seed(0)
    x = ggrad.ones(1000, requires_grad=True)
    y = ggrad.dropout(x, 0.25, training=True)
    v = y.numpy()
    assert set(np.unique(v)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.65 < (v > 0).mean() < 0.85
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), v)
    assert ggrad.dropout(x, 0.25, training=False) is x


def test_gradients_accumulate_and_tensor_used_twice():
    x = ggrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1, 2, 3.0]) + 3)


def test_retain_graph_and_second_backward_error():
    x = ggrad.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (np.exp([1, 2.0]) * (1 + np.array([1, 2.0]))), rtol=1e-5)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_custom_function():
    class Cube(ggrad.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3.0 * x * x

    check(lambda t: Cube.apply(t), lambda a: a ** 3, [r(3, 2)])


def test_no_grad_and_detach():
    x = ggrad.tensor([1.0, 2.0], requires_grad=True)
    with ggrad.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    z = x.detach() * 2
    assert not z.requires_grad
    with ggrad.no_grad():
        with ggrad.enable_grad():
            w = x * 2
    assert w.requires_grad
    ggrad.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        ggrad.set_grad_enabled(True)


def test_float16_parameters_get_float16_gradients():
    w = ggrad.tensor(r(3, 4), dtype=ggrad.float16, requires_grad=True)
    x = ggrad.tensor(r(2, 4))
    y = ggrad.linear(x, w).sum()
    y.backward()
    assert w.grad.dtype is ggrad.float16
    expected = np.ones((2, 3)).T @ x.numpy()
    np.testing.assert_allclose(w.grad.numpy().astype(np.float64), expected, rtol=1e-2, atol=1e-2)
    h = ggrad.tensor(r(3, 4), dtype=ggrad.float16)
    assert (h + h).dtype is ggrad.float16 and (h * 2.0).dtype is ggrad.float16
    np.testing.assert_allclose((h + h).numpy(), 2 * h.numpy(), rtol=1e-3)


def test_setitem_writes_region_and_passes_gradients():
    def ref(a, v):
        out = a.copy()
        out[1:3, 2] = v
        return out

    def fn(a, v):
        out = a * 1.0
        out[1:3, 2] = v
        return out
    check(fn, ref, [r(4, 5), r(2)])
    x = ggrad.zeros(2, 3)
    x[0] = 5.0
    x[:, -1] = ggrad.tensor([1.0, 2.0])
    assert x.tolist() == [[5, 5, 1], [0, 0, 2]]
