"""PyTorch parity of the ops of issue 15: each row runs one op in ggrad and in PyTorch on the same data and
fails when a value, a shape or a gradient (for random output weights) differs.

Rows are (name, torch_fn, ggrad_fn, inputs); inputs are numpy arrays (float32 ones require grad, integer
ones are indices: int64 for both; some built as int32) or shapes (uniform in [-2, 2]).
"""

import math

import numpy as np
import pytest

import ggrad
import ggrad.nn.functional as GF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

rng = np.random.default_rng(15)


def u(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape).astype(np.float32)


def ints(high, *shape):
    return rng.integers(0, high, size=shape)


def _inputs(spec):
    return [s if isinstance(s, np.ndarray) else u(*s) for s in spec]


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def helper_test_op(torch_fn, ggrad_fn, inputs, atol=1e-5, rtol=1e-4, grad_atol=1e-4, grad_rtol=1e-3, grad=True):
    """Values and shapes of every output, then the gradients of every float input, against PyTorch."""
    arrays = _inputs(inputs)
    wants_grad = [grad and a.dtype.kind == "f" for a in arrays]
    tt = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, wants_grad)]
    gt = [ggrad.tensor(a, dtype=None if a.dtype.kind == "f" else ggrad.int32, requires_grad=g)
          for a, g in zip(arrays, wants_grad)]
    t_out, g_out = _outputs(torch_fn(*tt)), _outputs(ggrad_fn(*gt))
    assert len(t_out) == len(g_out), f"{len(g_out)} outputs, PyTorch gives {len(t_out)}"
    weights = [rng.standard_normal(tuple(o.shape)).astype(np.float32) for o in t_out]
    t_loss = g_loss = None
    for i, (t, g, w) in enumerate(zip(t_out, g_out, weights)):
        want, got = t.detach().numpy(), g.numpy()
        assert got.shape == want.shape, f"output {i}: ggrad shape {got.shape}, PyTorch {want.shape}"
        np.testing.assert_allclose(got, want, atol=atol, rtol=rtol, equal_nan=True, err_msg=f"output {i} values")
        if t.requires_grad and t.dtype.is_floating_point:
            t_loss = (t * torch.tensor(w)).sum() if t_loss is None else t_loss + (t * torch.tensor(w)).sum()
            g_loss = (g * ggrad.tensor(w)).sum() if g_loss is None else g_loss + (g * ggrad.tensor(w)).sum()
    if t_loss is None:
        return
    t_loss.backward()
    g_loss.backward()
    for i, (t, g) in enumerate(zip(tt, gt)):
        if t.requires_grad:
            want = t.grad.numpy() if t.grad is not None else np.zeros(t.shape, np.float32)
            assert g.grad is not None, f"input {i} got no gradient"
            np.testing.assert_allclose(g.grad.numpy(), want, atol=grad_atol, rtol=grad_rtol,
                                       err_msg=f"gradient of input {i}")


def halves(*shape):
    return (rng.integers(-8, 8, size=shape) + 0.5).astype(np.float32)


def unit(*shape):
    return u(*shape, low=-0.95, high=0.95)


MATH = [
    ("floor", torch.floor, ggrad.floor, [(3, 4)]),
    ("ceil", torch.ceil, ggrad.ceil, [(3, 4)]),
    ("trunc", torch.trunc, ggrad.trunc, [(3, 4)]),
    ("round", torch.round, ggrad.round, [(3, 4)]),
    ("round_halves_to_even", torch.round, ggrad.round, [halves(4, 5)]),
    ("round_decimals", lambda x: torch.round(x, decimals=2), lambda x: ggrad.round(x, 2), [(3, 4)]),
    ("frac", torch.frac, ggrad.frac, [(3, 4)]),
    ("expm1", torch.expm1, ggrad.expm1, [(3, 4)]),
    ("log1p", torch.log1p, ggrad.log1p, [u(3, 4, low=-0.9, high=3.0)]),
    ("log1p_tiny", torch.log1p, ggrad.log1p, [u(3, 4, low=-1e-6, high=1e-6)]),
    ("log2", torch.log2, ggrad.log2, [u(3, 4, low=0.1, high=4.0)]),
    ("log10", torch.log10, ggrad.log10, [u(3, 4, low=0.1, high=4.0)]),
    ("exp2", torch.exp2, ggrad.exp2, [(3, 4)]),
    ("tan", torch.tan, ggrad.tan, [u(3, 4, low=-1.2, high=1.2)]),
    ("sinh", torch.sinh, ggrad.sinh, [(3, 4)]),
    ("cosh", torch.cosh, ggrad.cosh, [(3, 4)]),
    ("atan", torch.atan, ggrad.atan, [u(4, 5, low=-6.0, high=6.0)]),
    ("asin", torch.asin, ggrad.asin, [unit(3, 4)]),
    ("acos", torch.acos, ggrad.acos, [unit(3, 4)]),
    ("asinh", torch.asinh, ggrad.asinh, [u(3, 4, low=-5.0, high=5.0)]),
    ("acosh", torch.acosh, ggrad.acosh, [u(3, 4, low=1.05, high=6.0)]),
    ("atanh", torch.atanh, ggrad.atanh, [unit(3, 4)]),
    ("erf", torch.erf, ggrad.erf, [u(4, 6, low=-3.0, high=3.0)]),
    ("erfc", torch.erfc, ggrad.erfc, [u(3, 4, low=-2.0, high=2.0)]),
    ("sign", torch.sign, ggrad.sign, [(3, 4)]),
]


@pytest.mark.parametrize("name,torch_fn,ggrad_fn,inputs", MATH, ids=[r[0] for r in MATH])
def test_math(name, torch_fn, ggrad_fn, inputs):
    helper_test_op(torch_fn, ggrad_fn, inputs)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, 1e-20, 3e38, -7.0, 1e20],
                   dtype=np.float32)
SPECIAL_OPS = ["floor", "ceil", "trunc", "round", "expm1", "log1p", "sinh", "cosh", "atan", "asin", "acos",
               "asinh", "acosh", "atanh", "erf", "erfc", "isnan", "isinf", "isposinf", "isneginf", "isfinite",
               "nan_to_num"]


@pytest.mark.parametrize("name", SPECIAL_OPS)
def test_math_at_special_values(name):
    """nan, +-inf, signed zeros, huge and tiny values give PyTorch's results (float 0/1 for the tests)."""
    want = getattr(torch, name)(torch.tensor(SPECIAL)).float().numpy()
    got = getattr(ggrad, name)(ggrad.tensor(SPECIAL)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7, equal_nan=True)


def test_nan_to_num_values_and_gradient():
    x = SPECIAL[:8]
    helper_test_op(lambda t: torch.nan_to_num(t, nan=1.5, posinf=9.0, neginf=-9.0),
                   lambda t: ggrad.nan_to_num(t, nan=1.5, posinf=9.0, neginf=-9.0), [x])


def kinks(*extra):
    return np.array([-3.5, -3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 3.5, 25.0, -25.0] + list(extra),
                    dtype=np.float32)


ACTIVATIONS = [
    ("elu", TF.elu, GF.elu, [kinks()]),
    ("elu_alpha", lambda x: TF.elu(x, 0.3), lambda x: GF.elu(x, 0.3), [kinks(100.0)]),
    ("selu", TF.selu, GF.selu, [kinks()]),
    ("celu", lambda x: TF.celu(x, 0.7), lambda x: GF.celu(x, 0.7), [kinks()]),
    ("softplus", TF.softplus, GF.softplus, [kinks()]),
    ("softplus_beta", lambda x: TF.softplus(x, 2.0, 5.0), lambda x: GF.softplus(x, 2.0, 5.0), [kinks()]),
    ("logsigmoid", TF.logsigmoid, GF.logsigmoid, [kinks()]),
    ("mish", TF.mish, GF.mish, [kinks()]),
    ("hardswish", TF.hardswish, GF.hardswish, [kinks()]),
    ("hardsigmoid", TF.hardsigmoid, GF.hardsigmoid, [kinks()]),
    ("hardtanh", TF.hardtanh, GF.hardtanh, [kinks()]),
    ("hardtanh_bounds", lambda x: TF.hardtanh(x, -2.0, 0.5), lambda x: GF.hardtanh(x, -2.0, 0.5), [kinks()]),
    ("relu6", TF.relu6, GF.relu6, [kinks(6.0, 7.0)]),
    ("softsign", TF.softsign, GF.softsign, [kinks()]),
    ("tanhshrink", TF.tanhshrink, GF.tanhshrink, [kinks()]),
    ("glu", TF.glu, GF.glu, [(3, 8)]),
    ("glu_dim0", lambda x: TF.glu(x, 0), lambda x: GF.glu(x, 0), [(4, 3)]),
    ("prelu", TF.prelu, GF.prelu, [(2, 3, 4), u(3)]),
    ("prelu_one", TF.prelu, GF.prelu, [(2, 3), u(1)]),
    ("prelu_at_zero", TF.prelu, GF.prelu, [np.array([[0.0, -1.0, 2.0]], np.float32), u(1)]),
]


@pytest.mark.parametrize("name,torch_fn,ggrad_fn,inputs", ACTIVATIONS, ids=[r[0] for r in ACTIVATIONS])
def test_activations(name, torch_fn, ggrad_fn, inputs):
    helper_test_op(torch_fn, ggrad_fn, inputs)


x345 = u(3, 4, 5)
ties = rng.integers(0, 3, size=(3, 4, 6)).astype(np.float32)

SHAPE = [
    ("flip", lambda x: x.flip((0, 2)), lambda x: x.flip((0, 2)), [x345]),
    ("fliplr", torch.fliplr, ggrad.fliplr, [(3, 4)]),
    ("roll", lambda x: x.roll((1, -2), (1, 2)), lambda x: x.roll((1, -2), (1, 2)), [x345]),
    ("roll_flat", lambda x: x.roll(7), lambda x: x.roll(7), [x345]),
    ("roll_big_shift", lambda x: x.roll(-9, 0), lambda x: x.roll(-9, 0), [x345]),
    ("repeat", lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3), [(4, 5)]),
    ("repeat_interleave", lambda x: x.repeat_interleave(3, dim=1), lambda x: x.repeat_interleave(3, dim=1), [x345]),
    ("repeat_interleave_flat", lambda x: x.repeat_interleave(2), lambda x: x.repeat_interleave(2), [(2, 3)]),
    ("repeat_interleave_counts", lambda x: x.repeat_interleave(torch.tensor([2, 0, 1]), dim=0),
     lambda x: x.repeat_interleave([2, 0, 1], dim=0), [(3, 4)]),
    ("pad_constant", lambda x: TF.pad(x, (1, 2, 0, 1)), lambda x: GF.pad(x, (1, 2, 0, 1)), [x345]),
    ("pad_value_inf", lambda x: TF.pad(x, (2, 0, 1, 1, 1, 0), value=-math.inf),
     lambda x: GF.pad(x, (2, 0, 1, 1, 1, 0), value=-math.inf), [x345]),
    ("pad_crop", lambda x: TF.pad(x, (-1, 2, 1, -2)), lambda x: GF.pad(x, (-1, 2, 1, -2)), [x345]),
    ("pad_reflect", lambda x: TF.pad(x, (3, 2, 1, 2), mode="reflect"),
     lambda x: GF.pad(x, (3, 2, 1, 2), mode="reflect"), [x345]),
    ("pad_replicate", lambda x: TF.pad(x, (2, 3, 1, 0), mode="replicate"),
     lambda x: GF.pad(x, (2, 3, 1, 0), mode="replicate"), [x345]),
    ("pad_circular", lambda x: TF.pad(x, (2, 1, 1, 3), mode="circular"),
     lambda x: GF.pad(x, (2, 1, 1, 3), mode="circular"), [x345]),
    ("pad_constant_5d", lambda x: TF.pad(x, (1, 0, 0, 1, 1, 1, 2, 0), value=2.0),
     lambda x: GF.pad(x, (1, 0, 0, 1, 1, 1, 2, 0), value=2.0), [(1, 2, 2, 3, 2)]),
    ("pad_replicate_5d", lambda x: TF.pad(x, (1, 0, 0, 1, 1, 1), mode="replicate"),
     lambda x: GF.pad(x, (1, 0, 0, 1, 1, 1), mode="replicate"), [(1, 2, 2, 3, 2)]),
    ("pad_reflect_1d", lambda x: TF.pad(x, (2, 1), mode="reflect"), lambda x: GF.pad(x, (2, 1), mode="reflect"),
     [(2, 3, 5)]),
]
for _k in (-4, -1, 0, 1, 3, 7):
    _x = u(2, 4, 6)
    _x[0, 2, 1], _x[1, 0, 5] = -np.inf, np.inf   # infinities outside the triangle become 0, as PyTorch
    SHAPE.append((f"tril_{_k}", lambda x, k=_k: x.tril(k), lambda x, k=_k: x.tril(k), [_x]))
    SHAPE.append((f"triu_{_k}", lambda x, k=_k: torch.triu(x, k), lambda x, k=_k: ggrad.triu(x, k), [_x]))


@pytest.mark.parametrize("name,torch_fn,ggrad_fn,inputs", SHAPE, ids=[r[0] for r in SHAPE])
def test_shape_ops(name, torch_fn, ggrad_fn, inputs):
    helper_test_op(torch_fn, ggrad_fn, inputs, grad_atol=1e-5)


RESAMPLE = [dict(scale_factor=2), dict(size=(3, 11)), dict(size=(8, 4), mode="nearest-exact"),
            dict(scale_factor=1.7, mode="bilinear"), dict(size=(9, 3), mode="bilinear", align_corners=True),
            dict(scale_factor=(0.6, 2.5), mode="bilinear"), dict(scale_factor=0.5, mode="linear"),
            dict(size=11, mode="linear", align_corners=True), dict(scale_factor=3),
            dict(size=(8, 4), mode="bicubic"), dict(scale_factor=1.7, mode="bicubic", align_corners=True),
            dict(scale_factor=(0.6, 2.5), mode="bicubic"), dict(size=(3, 4), mode="area"),
            dict(size=(7, 11), mode="area"), dict(scale_factor=0.5, mode="area"),
            dict(size=(4, 3, 7), mode="trilinear"), dict(scale_factor=2, mode="trilinear", align_corners=True),
            dict(size=(2, 2, 2), mode="area", volume=True), dict(scale_factor=2, volume=True)]


@pytest.mark.parametrize("kwargs", RESAMPLE, ids=[str(k) for k in RESAMPLE])
def test_interpolate(kwargs):
    kwargs = dict(kwargs)
    volume = kwargs.pop("volume", False) or kwargs.get("mode") == "trilinear"
    shape = (2, 3, 6) if kwargs.get("mode") == "linear" or kwargs.get("scale_factor") == 3 else (2, 3, 5, 7)
    shape = (1, 2, 3, 4, 5) if volume else shape
    helper_test_op(lambda x: TF.interpolate(x, **kwargs), lambda x: GF.interpolate(x, **kwargs), [shape],
                   grad_atol=1e-5)


def test_one_hot():
    labels = ints(5, 3, 4)
    for classes in (-1, 7):
        want = TF.one_hot(torch.tensor(labels), classes).numpy()
        got = GF.one_hot(ggrad.tensor(labels), classes)
        assert got.dtype is ggrad.int64
        np.testing.assert_array_equal(got.numpy(), want)
    computed = ggrad.tensor(labels) * 1   # values computed on the device: checked by the compute
    np.testing.assert_array_equal(GF.one_hot(computed, 5).numpy(), TF.one_hot(torch.tensor(labels), 5).numpy())
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        GF.one_hot(ggrad.tensor(labels), 3)
    with pytest.raises(RuntimeError, match="non-negative"):
        GF.one_hot(ggrad.tensor([1, -1]))
    with pytest.raises(RuntimeError):
        GF.one_hot(ggrad.tensor(labels) * 2, 5).numpy()


SCAN_SORT = [
    ("cumsum_last", lambda x: x.cumsum(-1), lambda x: x.cumsum(-1), [x345]),
    ("cumsum_first", lambda x: torch.cumsum(x, 0), lambda x: ggrad.cumsum(x, 0), [x345]),
    ("cumprod", lambda x: x.cumprod(2), lambda x: x.cumprod(2), [x345]),
    ("cumprod_dim1", lambda x: x.cumprod(1), lambda x: x.cumprod(1), [u(2, 9, 3)]),
    ("cumprod_zeros", lambda x: x.cumprod(1), lambda x: x.cumprod(1),
     [np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 0.0, 3.0, 2.0]], np.float32)]),
    ("logcumsumexp", lambda x: x.logcumsumexp(1), lambda x: x.logcumsumexp(1), [x345]),
    ("sort", lambda x: x.sort(1), lambda x: x.sort(1), [x345]),
    ("sort_descending", lambda x: torch.sort(x, 0, descending=True), lambda x: ggrad.sort(x, 0, descending=True),
     [x345]),
    ("sort_stable_ties", lambda x: x.sort(stable=True, dim=-1), lambda x: x.sort(-1, stable=True), [ties]),
    ("sort_stable_desc_ties", lambda x: x.sort(stable=True, dim=1, descending=True),
     lambda x: x.sort(1, descending=True, stable=True), [ties]),
    ("argsort", lambda x: x.argsort(-1), lambda x: x.argsort(-1), [x345]),
    ("topk", lambda x: x.topk(3), lambda x: x.topk(3), [x345]),
    ("topk_smallest_dim0", lambda x: x.topk(2, 0, largest=False), lambda x: x.topk(2, 0, largest=False), [x345]),
    ("topk_all", lambda x: x.topk(5), lambda x: x.topk(5), [(2, 5)]),
    ("max_dim_ties", lambda x: x.max(-1), lambda x: x.max(-1), [ties]),
    ("min_dim_ties_keepdim", lambda x: x.min(1, keepdim=True), lambda x: x.min(1, keepdim=True), [ties]),
    ("argmax_ties", lambda x: x.argmax(2), lambda x: x.argmax(2), [ties]),
    ("argmax_flat_ties", lambda x: x.argmax(), lambda x: x.argmax(), [ties]),
    ("argmin_ties", lambda x: x.argmin(0), lambda x: x.argmin(0), [ties]),
    ("amax_ties", lambda x: x.amax(-1), lambda x: x.amax(-1), [ties]),
    ("max_all_ties", lambda x: x.max(), lambda x: x.max(), [ties]),
    ("logsumexp", lambda x: x.logsumexp(1), lambda x: x.logsumexp(1), [x345]),
]


@pytest.mark.parametrize("name,torch_fn,ggrad_fn,inputs", SCAN_SORT, ids=[r[0] for r in SCAN_SORT])
def test_scan_sort_select(name, torch_fn, ggrad_fn, inputs):
    helper_test_op(torch_fn, ggrad_fn, inputs)


def _distinct_along(shape, dim, count):
    """Indices along dim without repeats in any line (scatter's written value is then unique)."""
    order = np.argsort(rng.random(shape), axis=dim)
    return np.take(order, np.arange(count), axis=dim)


SCATTER = [
    ("scatter_add_dim0", lambda x, i, s: x.scatter_add(0, i, s), lambda x, i, s: x.scatter_add(0, i, s),
     [x345, ints(3, 4, 2, 5), u(4, 2, 5)]),
    ("scatter_add_dim2", lambda x, i, s: torch.scatter_add(x, 2, i, s), lambda x, i, s: ggrad.scatter_add(x, 2, i, s),
     [x345, ints(5, 2, 4, 7), u(2, 4, 7)]),
    ("scatter_dim1", lambda x, i, s: x.scatter(1, i, s), lambda x, i, s: x.scatter(1, i, s),
     [x345, _distinct_along((3, 4, 5), 1, 2), u(3, 2, 5)]),
    ("scatter_value", lambda x, i: x.scatter(2, i, 2.5), lambda x, i: x.scatter(2, i, value=2.5),
     [x345, _distinct_along((3, 4, 5), 2, 3)]),
    ("index_add_dim1", lambda x, i, s: x.index_add(1, i, s, alpha=-2.0),
     lambda x, i, s: x.index_add(1, i, s, alpha=-2.0), [x345, ints(4, 6), u(3, 6, 5)]),
    ("index_add_dim0", lambda x, i, s: torch.index_add(x, 0, i, s), lambda x, i, s: ggrad.index_add(x, 0, i, s),
     [u(4, 3), np.array([0, 3, 3, 1]), u(4, 3)]),
]


@pytest.mark.parametrize("name,torch_fn,ggrad_fn,inputs", SCATTER, ids=[r[0] for r in SCATTER])
def test_scatter(name, torch_fn, ggrad_fn, inputs):
    helper_test_op(torch_fn, ggrad_fn, inputs)


bounds_x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 0.5, 3.0, -3.0], np.float32)
ARITH = [
    ("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"),
     lambda a, b: ggrad.div(a, b, rounding_mode="trunc"), [u(3, 4, low=-9, high=9), u(3, 4, low=0.5, high=3)]),
    ("div_floor", lambda a, b: a.div(b, rounding_mode="floor"), lambda a, b: a.div(b, rounding_mode="floor"),
     [u(3, 4, low=-9, high=9), u(4, low=-3, high=-0.5)]),
    ("floor_divide_int", lambda a, b: torch.div(a, b, rounding_mode="floor"),
     lambda a, b: ggrad.div(a, b, rounding_mode="floor"), [np.array([7, -7, 9, -1]), np.array([2, 2, -4, 3])]),
    ("remainder", torch.remainder, ggrad.remainder, [u(3, 4, low=-9, high=9), u(3, 4, low=0.5, high=3)]),
    ("fmod", torch.fmod, ggrad.fmod, [u(3, 4, low=-9, high=9), u(3, 4, low=0.5, high=3)]),
    ("clamp_tensor_bounds", torch.clamp, ggrad.clamp,
     [bounds_x, np.array([-1, -1, 1, 0, 3, 0.5, 1, -4], np.float32), np.array([1, 1, 0, 1, 1, 0.5, 2, -3.5],
                                                                              np.float32)]),
    ("clamp_tensor_min_broadcast", lambda x, lo: x.clamp(min=lo), lambda x, lo: x.clamp(min=lo), [(3, 4), (4,)]),
    ("clamp_min_above_max", lambda x: x.clamp(1.0, -1.0), lambda x: x.clamp(1.0, -1.0), [bounds_x]),
    ("clamp_ends_inclusive", lambda x: x.clamp(-1.0, 1.0), lambda x: x.clamp(-1.0, 1.0), [bounds_x]),
    ("atan2", torch.atan2, ggrad.atan2, [(3, 4), (3, 4)]),
    ("atan2_axes_and_broadcast", lambda y, x: y.atan2(x), lambda y, x: y.atan2(x),
     [np.array([[1.0, -1.0, 0.0, 2.0, -3.0, 0.5]], np.float32).T, np.array([1.0, -2.0, 0.0, -1.0], np.float32)]),
    ("pow_zero", lambda x: x ** 0.0, lambda x: x ** 0.0, [np.array([0.0, -2.0, 3.0, np.inf], np.float32)]),
    ("pow_fractional_negative", lambda x: x ** 0.5, lambda x: x ** 0.5, [np.array([-2.0, 4.0, 0.25], np.float32)]),
    ("pow_cube", lambda x: x ** 3, lambda x: x ** 3, [(3, 4)]),
    ("pow_tensor_edges", torch.pow, ggrad.pow,   # 0**0, negative bases, nan and inf on either side
     [np.array([0, 0, -2, -2, -8, 2, 3, 0, -1.5, np.inf, np.nan, 2, np.nan, 1, -2, 0.5, -0.5], np.float32),
      np.array([0, 2, 2, 3, 1 / 3, 0.5, -1, -1, 0, 0, 1, np.nan, 0, np.nan, np.inf, np.inf, -np.inf], np.float32)]),
    ("pow_tensor_broadcast", lambda x, p: x ** p, lambda x, p: x ** p, [u(3, 4, low=0.2, high=2), (4,)]),
    ("pow_number_base", lambda p: 2.5 ** p, lambda p: 2.5 ** p, [(3, 4)]),
    ("pow_negative_number_base", lambda p: (-2.0) ** p, lambda p: (-2.0) ** p,
     [np.array([2.0, 3.0, 0.5, 0.0], np.float32)]),
    ("norm_fro", torch.norm, ggrad.norm, [(3, 4)]),
    ("norm_dim", lambda x: x.norm(dim=1, keepdim=True), lambda x: x.norm(dim=1, keepdim=True), [x345]),
    ("norm_zero_vector", torch.norm, ggrad.norm, [np.zeros(4, np.float32)]),
    ("norm_1", lambda x: torch.norm(x, 1, 0), lambda x: ggrad.norm(x, 1, 0), [(3, 4)]),
    ("norm_inf", lambda x: torch.norm(x, math.inf, 1), lambda x: ggrad.norm(x, math.inf, 1), [(3, 4)]),
    ("norm_3", lambda x: torch.norm(x, 3, -1), lambda x: ggrad.norm(x, 3, -1), [(3, 4)]),
    ("var_correction0", lambda x: x.var(1, correction=0), lambda x: x.var(1, correction=0), [x345]),
    ("std_correction2", lambda x: x.std((0, 2), correction=2), lambda x: x.std((0, 2), correction=2), [x345]),
]


@pytest.mark.parametrize("name,torch_fn,ggrad_fn,inputs", ARITH, ids=[r[0] for r in ARITH])
def test_arith_clamp_norm(name, torch_fn, ggrad_fn, inputs):
    helper_test_op(torch_fn, ggrad_fn, inputs)


EINSUM = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
          ("bij,bjk", [(2, 3, 4), (2, 4, 5)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
          ("ij->ji", [(3, 4)]), ("ijk->j", [(2, 3, 4)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
          ("bi,bi->b", [(3, 4), (3, 4)]), ("ij,ij->ij", [(3, 4), (3, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
          ("bn,anm->bam", [(2, 3), (4, 3, 5)]), ("ij,jk", [(1, 4), (4, 5)]), ("ii->i", [(3, 3)]),
          ("ii", [(3, 3)]), ("bii->b", [(2, 3, 3)]), ("iji->ij", [(3, 2, 3)]), ("ii,ij->j", [(3, 3), (3, 4)]),
          ("iii->i", [(2, 2, 2)]), ("bij,bjj->bi", [(2, 3, 4), (2, 4, 4)])]


@pytest.mark.parametrize("equation,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(equation, shapes):
    helper_test_op(lambda *t: torch.einsum(equation, *t), lambda *t: ggrad.einsum(equation, *t), list(shapes))


ERRORS = [
    (RuntimeError, "out of range", lambda: ggrad.randn(3, 4).topk(5)),
    (RuntimeError, "less than the input", lambda: GF.pad(ggrad.randn(2, 3), (3, 0), mode="reflect")),
    (RuntimeError, "repeated label", lambda: ggrad.einsum("ii->i", ggrad.randn(3, 4))),
    (ValueError, "operands", lambda: ggrad.einsum("ij,jk->ik", ggrad.randn(3, 3))),
    (RuntimeError, "at least 2", lambda: ggrad.tril(ggrad.randn(3))),
    (ValueError, "rounding_mode", lambda: ggrad.div(ggrad.randn(3), 2.0, rounding_mode="round")),
    (ggrad.ShapeError, "even", lambda: GF.glu(ggrad.randn(3, 5))),
    (RuntimeError, "without replacement", lambda: ggrad.multinomial(ggrad.ones(3), 4)),
    (RuntimeError, "inf", lambda: ggrad.multinomial(ggrad.tensor([0.5, -0.1]), 1)),
    (RuntimeError, "sum of probabilities", lambda: ggrad.multinomial(ggrad.zeros(2, 3), 1)),
    (RuntimeError, "Expected p_in", lambda: ggrad.bernoulli(ggrad.tensor([0.5, 1.5]))),
    (IndexError, "out of bounds", lambda: ggrad.scatter_add(ggrad.zeros(2, 3), 1, ggrad.tensor([[3]]),
                                                            ggrad.ones(1, 1))),
    (RuntimeError, "exceeds", lambda: ggrad.scatter(ggrad.zeros(2, 3), 1, ggrad.tensor([[0], [1], [2]]),
                                                    ggrad.ones(3, 1))),
]


@pytest.mark.parametrize("error,match,call", ERRORS, ids=[m for _, m, _ in ERRORS])
def test_errors_as_pytorch(error, match, call):
    with pytest.raises(error, match=match):
        call()


def test_factories_and_sampling():
    for args in ((0, 1, 10), (-3.3, 1e4, 1001), (2.5, -7.1, 13), (4, 5, 1)):
        np.testing.assert_array_equal(ggrad.linspace(*args).numpy(), torch.linspace(*args).numpy())
    np.testing.assert_array_equal(ggrad.eye(3, 4).numpy(), torch.eye(3, 4).numpy())
    ggrad.manual_seed(3)
    perm = ggrad.randperm(50).numpy()
    np.testing.assert_array_equal(np.sort(perm), np.arange(50))
    weights = np.array([[0.1, 0.0, 0.6, 0.3], [2.0, 1.0, 0.0, 1.0]], np.float32)
    drawn = ggrad.multinomial(ggrad.tensor(weights), 20000, replacement=True).numpy()
    assert drawn.shape == (2, 20000) and drawn.dtype == np.int64
    for row, w in zip(drawn, weights):
        np.testing.assert_allclose(np.bincount(row, minlength=4) / row.size, w / w.sum(), atol=0.015)
    firsts = np.array([ggrad.multinomial(ggrad.tensor(weights), 3).numpy() for _ in range(400)])
    assert all(len(set(r)) == 3 for r in firsts.reshape(-1, 3))   # without replacement: no repeats
    assert (firsts[:, 0, :] != 1).all() and (firsts[:, 1, :2] != 2).all()   # weight 0 never drawn while others remain
    np.testing.assert_allclose(np.bincount(firsts[:, 0, 0], minlength=4) / 400, weights[0] / weights[0].sum(),
                               atol=0.07)
    one = ggrad.multinomial(ggrad.tensor([0.0, 0.0, 5.0]), 1).numpy()
    np.testing.assert_array_equal(one, [2])
    p = ggrad.full((20000,), 0.3)
    sample = ggrad.bernoulli(p).numpy()
    assert set(np.unique(sample)) <= {0.0, 1.0} and abs(sample.mean() - 0.3) < 0.015


@pytest.mark.parametrize("call", ["std_one_element", "var_correction_equal_n", "var_correction_past_n",
                                  "std_rows_of_one"])
def test_var_std_without_degrees_of_freedom_as_torch(call):
    """N - correction <= 0: PyTorch divides by 0 (nan for a zero sum of squares, inf otherwise) and warns."""
    calls = {"std_one_element": lambda T: T.tensor([2.0]).std(),
             "var_correction_equal_n": lambda T: T.tensor([2.0, 3.0]).var(correction=2),
             "var_correction_past_n": lambda T: T.tensor([2.0, 3.0]).var(correction=3),
             "std_rows_of_one": lambda T: T.tensor([[1.0], [4.0]]).std(1)}
    with pytest.warns(UserWarning):
        theirs = calls[call](torch).numpy()
    with pytest.warns(UserWarning, match="degrees of freedom"):
        ours = calls[call](ggrad).numpy()
    np.testing.assert_array_equal(ours, theirs)
