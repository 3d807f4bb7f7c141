"""Reductions, sorting and matrix products against numpy."""

import numpy as np
import pytest

from ggrad.ggml import ops
from ggrad.ggml._lib import lib
from ggrad.ggml.errors import ArgumentError, ShapeError

R = np.random.default_rng(1)
X = R.standard_normal((2, 3, 5)).astype(np.float32)


def test_sums_and_means(check):
    check(lambda ctx, a: (ops.sum(ctx, a), ops.sum_rows(ctx, a), ops.mean(ctx, a), ops.cumsum(ctx, a)),
          [X], lambda x: (x.sum().reshape(1), x.sum(-1, keepdims=True), x.mean(-1, keepdims=True),
                          np.cumsum(x, -1)), atol=1e-5)


def test_argmax_count_equal(check):
    m = R.standard_normal((4, 7)).astype(np.float32)
    check(lambda ctx, a: ops.argmax(ctx, a), [m], lambda x: x.argmax(-1).astype(np.int32))
    p = np.array([1, 2, 3, 4, 5], np.int32)
    q = np.array([1, 0, 3, 0, 5], np.int32)
    check(lambda ctx, a, b: ops.count_equal(ctx, a, b), [p, q], lambda a, b: np.array([np.sum(a == b)]))


def test_argsort_topk(check, run):
    m = R.permutation(24).reshape(3, 8).astype(np.float32)
    check(lambda ctx, a: (ops.argsort(ctx, a, "asc"), ops.argsort(ctx, a, "desc"), ops.argsort_top_k(ctx, a, 3)),
          [m], lambda x: (np.argsort(x, -1), np.argsort(-x, -1), np.argsort(-x, -1)[:, :3]))
    got, _ = run(lambda ctx, a: ops.top_k(ctx, a, 3), [m])
    top = got[0].reshape(3, 3)
    for row, idx in zip(m, top):  # in no particular order
        assert sorted(row[idx]) == sorted(np.sort(row)[-3:])


def test_mul_mat(check):
    a = R.standard_normal((4, 6)).astype(np.float32)      # ne [6, 4]: 4 rows of k=6
    b = R.standard_normal((3, 6)).astype(np.float32)      # ne [6, 3]
    check(lambda ctx, x, y: ops.mul_mat(ctx, x, y), [a, b], lambda x, y: y @ x.T, atol=1e-5)


def test_mul_mat_broadcast_batch(check):
    a = R.standard_normal((1, 2, 4, 6)).astype(np.float32)    # ne [6, 4, 2, 1]
    b = R.standard_normal((3, 4, 5, 6)).astype(np.float32)    # ne [6, 5, 4, 3]: batch dims multiples of a's
    ref = lambda x, y: np.einsum("qrnk,qrmk->qrmn", np.repeat(np.broadcast_to(x, (3, 2, 4, 6)), 2, axis=1), y)
    check(lambda ctx, x, y: ops.mul_mat(ctx, x, y), [a, b], ref, atol=1e-5)


def test_mul_mat_f16_weights(check):
    a = R.standard_normal((4, 8)).astype(np.float32)
    b = R.standard_normal((3, 8)).astype(np.float32)
    check(lambda ctx, x, y: ops.mul_mat(ctx, x, y), [(a, "f16"), b], lambda x, y: y @ x.T, atol=2e-2, rtol=2e-2)


def test_mul_mat_precision(check):
    """The precision is the node's first op parameter (the CPU always sums in f32: the same result)."""
    a = R.standard_normal((4, 8)).astype(np.float32)
    b = R.standard_normal((3, 8)).astype(np.float32)

    def build(ctx, x, y):
        out = ops.mul_mat(ctx, x, y)
        assert out.ptr.op_params[0] == lib.GGML_PREC_DEFAULT
        assert out.set_prec("f32") is out and out.ptr.op_params[0] == lib.GGML_PREC_F32
        return out
    check(build, [(a, "f16"), b], lambda x, y: y @ x.T, atol=2e-2, rtol=2e-2)


def test_mul_mat_set_prec_refuses_other_nodes_and_precisions(run):
    def build(ctx, x):
        with pytest.raises(ShapeError, match="set_prec: .* is not a node made by mul_mat"):
            ops.scale(ctx, x, 2.0).set_prec("f32")   # GGML would abort
        with pytest.raises(ArgumentError, match="prec must be one of"):
            ops.mul_mat(ctx, x, x).set_prec("f64")
        return ops.scale(ctx, x, 1.0)
    run(build, [np.ones((2, 2), np.float32)])


def test_mul_mat_id(check):
    experts = R.standard_normal((3, 4, 6)).astype(np.float32)   # 3 experts, [k=6, n=4]
    b = R.standard_normal((5, 1, 6)).astype(np.float32)         # 5 tokens, 1 row each (broadcast over used)
    ids = R.integers(0, 3, (5, 2)).astype(np.int32)              # 2 experts per token

    def ref(e, x, i):
        out = np.zeros((5, 2, 4), np.float32)
        for t in range(5):
            for j in range(2):
                out[t, j] = e[i[t, j]] @ x[t, 0]
        return out

    check(lambda ctx, e, x, i: ops.mul_mat_id(ctx, e, x, i), [experts, b, ids], ref, atol=1e-5)


def test_out_prod(check):
    a = R.standard_normal((5, 3)).astype(np.float32)   # ne [3, 5]: m=3, n=5
    b = R.standard_normal((5, 4)).astype(np.float32)   # ne [4, 5]: p=4
    check(lambda ctx, x, y: ops.out_prod(ctx, x, y), [a, b], lambda x, y: y.T @ x, atol=1e-5)


def test_solve_tri_tri_diag(check):
    A = np.tril(R.standard_normal((4, 4))).astype(np.float32) + 3 * np.eye(4, dtype=np.float32)
    B = R.standard_normal((4, 2)).astype(np.float32)
    check(lambda ctx, a, b: ops.solve_tri(ctx, a, b, True, True, False), [A, B],
          lambda a, b: np.linalg.solve(a, b), atol=1e-4)
    M = R.standard_normal((4, 4)).astype(np.float32)
    check(lambda ctx, a: (ops.tri(ctx, a, "lower_diag"), ops.tri(ctx, a, "lower"), ops.tri(ctx, a, "upper_diag"),
                          ops.tri(ctx, a, "upper")),
          [M], lambda m: (np.tril(m), np.tril(m, -1), np.triu(m), np.triu(m, 1)))
    v = R.standard_normal((2, 1, 3)).astype(np.float32)
    check(lambda ctx, a: ops.diag(ctx, a), [v], lambda x: np.stack([np.diag(r[0]) for r in x]))
