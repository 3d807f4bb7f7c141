"""Elementwise builders against numpy: unary, binary with broadcasting, scale, clamp, fill, GLUs."""

import math

import numpy as np
import pytest

from ggrad.ggml import ops

R = np.random.default_rng(0)
X = R.standard_normal((3, 5)).astype(np.float32)
POS = (np.abs(X) + 0.5).astype(np.float32)
_erf = np.vectorize(math.erf)


def _sig(x):
    return 1 / (1 + np.exp(-x))


UNARY_REF = {
    "abs": np.abs, "sgn": np.sign, "neg": np.negative, "step": lambda x: (x > 0).astype(np.float32),
    "tanh": np.tanh, "elu": lambda x: np.where(x > 0, x, np.expm1(x)), "relu": lambda x: np.maximum(x, 0),
    "sigmoid": _sig,
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "gelu_erf": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_quick": lambda x: x * _sig(1.702 * x), "silu": lambda x: x * _sig(x),
    "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6, "hardsigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "exp": np.exp, "expm1": np.expm1, "softplus": lambda x: np.log1p(np.exp(x)),
    "floor": np.floor, "ceil": np.ceil, "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
    "trunc": np.trunc, "sqr": np.square, "sqrt": np.sqrt, "log": np.log, "sin": np.sin, "cos": np.cos,
}
POSITIVE = {"sqrt", "log"}


@pytest.mark.parametrize("name", sorted(UNARY_REF))
def test_unary(check, name):
    x = POS if name in POSITIVE else X * 2.3
    tol = 2e-3 if name in ("gelu", "gelu_erf", "gelu_quick") else 1e-5
    check(lambda ctx, a: getattr(ops, name)(ctx, a), [x], UNARY_REF[name], atol=tol, rtol=tol)


@pytest.mark.parametrize("name", sorted(n for n in UNARY_REF if hasattr(ops, n + "_inplace")))
def test_unary_inplace(check, name):
    x = POS if name in POSITIVE else X * 2.3
    tol = 2e-3 if name.startswith("gelu") else 1e-5
    check(lambda ctx, a: getattr(ops, name + "_inplace")(ctx, a), [x], UNARY_REF[name], atol=tol, rtol=tol)


def test_unary_by_enum_and_name(check):
    check(lambda ctx, a: (ops.unary(ctx, a, "tanh"), ops.unary_inplace(ctx, ops.dup(ctx, a), "neg")),
          [X], lambda x: (np.tanh(x), -x))


def test_unary_f16(check):
    check(lambda ctx, a: ops.cast(ctx, ops.exp(ctx, a), "f32"), [(X, "f16")], lambda x: np.exp(x), atol=1e-2, rtol=1e-2)


def test_leaky_relu_xielu(check):
    def xielu(x, an=0.8, ap=0.8, beta=0.5, eps=-1e-6):
        sp_n, sp_p = np.log1p(np.exp(an)), np.log1p(np.exp(ap))
        # GGML: x > 0: alpha_p x^2 + beta x; else (expm1(min(x, eps)) - x) alpha_n + beta x
        pos = sp_p * x * x + beta * x
        neg = (np.expm1(np.minimum(x, eps)) - x) * (beta + sp_n) + beta * x
        return np.where(x > 0, pos, neg)

    check(lambda ctx, a: (ops.leaky_relu(ctx, a, 0.1, False), ops.xielu(ctx, a, 0.8, 0.8, 0.5, -1e-6)),
          [X], lambda x: (np.where(x > 0, x, 0.1 * x), xielu(x)), atol=1e-5)


def test_dup(check):
    check(lambda ctx, a: (ops.dup(ctx, a), ops.dup_inplace(ctx, ops.dup(ctx, a))), [X], lambda x: (x, x))


BINARY_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


@pytest.mark.parametrize("name", sorted(BINARY_REF))
@pytest.mark.parametrize("bshape", [(2, 3, 5), (1, 3, 1), (5,), (2, 1, 5)])
def test_binary_broadcast(check, name, bshape):
    a = R.standard_normal((2, 3, 5)).astype(np.float32)
    b = (R.standard_normal(bshape) + 3).astype(np.float32)
    check(lambda ctx, x, y: getattr(ops, name)(ctx, x, y), [a, b], BINARY_REF[name])
    check(lambda ctx, x, y: getattr(ops, name + "_inplace")(ctx, x, y), [a, b], BINARY_REF[name])


def test_binary_f16_with_f32(check):
    a = R.standard_normal((4, 6)).astype(np.float32)
    b = R.standard_normal((6,)).astype(np.float32)
    check(lambda ctx, x, y: ops.cast(ctx, ops.add(ctx, x, y), "f32"), [(a, "f16"), b], np.add, atol=1e-2)


def test_add1_add_cast_add_id(check):
    a = R.standard_normal((3, 4)).astype(np.float32)
    s = np.array([2.5], np.float32)
    check(lambda ctx, x, y: (ops.add1(ctx, x, y), ops.add1_inplace(ctx, ops.dup(ctx, x), y)), [a, s],
          lambda x, y: (x + y, x + y))
    check(lambda ctx, x, y: ops.add_cast(ctx, x, y, "f32"), [(a, "f16"), a[:1]], lambda x, y: x + y, atol=1e-2)
    table = R.standard_normal((5, 4)).astype(np.float32)          # 5 rows of 4
    x = R.standard_normal((2, 3, 4)).astype(np.float32)           # [n_tokens=2, n_used=3, n=4]
    ids = R.integers(0, 5, (2, 3)).astype(np.int32)
    check(lambda ctx, x_, t, i: ops.add_id(ctx, x_, t, i), [x, table, ids], lambda x_, t, i: x_ + t[i])


def test_scale_clamp_fill(check):
    check(lambda ctx, a: (ops.scale(ctx, a, 3.0), ops.scale_bias(ctx, a, 2.0, -1.0),
                          ops.scale_inplace(ctx, ops.dup(ctx, a), 0.5),
                          ops.scale_bias_inplace(ctx, ops.dup(ctx, a), -1.0, 4.0)),
          [X], lambda x: (3 * x, 2 * x - 1, 0.5 * x, -x + 4))
    check(lambda ctx, a: ops.clamp(ctx, ops.dup(ctx, a), -0.5, 0.25), [X], lambda x: np.clip(x, -0.5, 0.25))
    check(lambda ctx, a: (ops.fill(ctx, a, 7.0), ops.fill_inplace(ctx, ops.dup(ctx, a), -2.0)),
          [X], lambda x: (np.full_like(x, 7), np.full_like(x, -2)))


GLU_ACT = {"reglu": lambda x: np.maximum(x, 0),
           "geglu": UNARY_REF["gelu"], "swiglu": UNARY_REF["silu"], "geglu_erf": UNARY_REF["gelu_erf"],
           "geglu_quick": UNARY_REF["gelu_quick"]}


@pytest.mark.parametrize("kind", sorted(GLU_ACT))
def test_glu_family(check, kind):
    act = GLU_ACT[kind]
    x = R.standard_normal((3, 8)).astype(np.float32)
    g = R.standard_normal((3, 4)).astype(np.float32)
    h = 4
    check(lambda ctx, a: (getattr(ops, kind)(ctx, a), getattr(ops, kind + "_swapped")(ctx, a),
                          ops.glu(ctx, a, kind, False), ops.glu(ctx, a, kind, True)),
          [x], lambda a: (act(a[:, :h]) * a[:, h:], a[:, :h] * act(a[:, h:]),
                          act(a[:, :h]) * a[:, h:], a[:, :h] * act(a[:, h:])), atol=2e-3, rtol=2e-3)
    check(lambda ctx, a, b: (getattr(ops, kind + "_split")(ctx, a, b), ops.glu_split(ctx, a, b, kind)),
          [x[:, :4].copy(), g], lambda a, b: (act(a) * b, act(a) * b), atol=2e-3, rtol=2e-3)


def test_swiglu_oai(check):
    a = (R.standard_normal((3, 4)) * 3).astype(np.float32)
    b = (R.standard_normal((3, 4)) * 3).astype(np.float32)

    def ref(a, b, alpha=1.7, limit=2.0):
        x = np.minimum(a, limit)
        y = np.clip(b, -limit, limit)
        return x * _sig(alpha * x) * (y + 1)

    check(lambda ctx, x, y: ops.swiglu_oai(ctx, x, y, 1.7, 2.0), [a, b], ref, atol=1e-5)
