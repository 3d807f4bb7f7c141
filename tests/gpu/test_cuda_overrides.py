"""ggrad's overrides on CUDA (ggrad/ggml/cuda/overrides.cu): GGML nodes that the patched backend offers to ggrad
first give, to the bit, what the CPU's GGML gives for the same nodes:
- conversions between float32 and float16/bfloat16 (CPY): round to nearest even, overflow to inf, subnormals,
  nan stays nan; whole vectors, tails, unaligned views, sources with contiguous rows (4 at a time);
- contiguous copies of permuted views (CONT), float32 and float16;
- embedding gradients (GET_ROWS_BACK): each row the sum of its tokens' rows in the tokens' order.

Skipped without a CUDA device, or where the twins were not built (tests/gpu/conftest.py).
"""

import numpy as np
import pytest

import ggrad
from ggrad.ggml import gpu_twins

DTYPES = {"f16": ggrad.float16, "bf16": ggrad.bfloat16}


def _values(n, seed):
    """float32 values over every range a half dtype meets: ties of both dtypes, subnormals, overflow, signed
    zeros, infinities and nan first, then random magnitudes from 2**-30 to 2**20."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8, 1 + 3 * 2**-8,
                         65504.0, 65520.0, 1e5, 3.4e38, -3.4e38, 2**-24, 2**-25, 3 * 2**-26, 1e-40, -1e-45,
                         2**-126, 0.1, -0.3], dtype=np.float32)
    rng = np.random.default_rng(seed)
    wide = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 21, n))).astype(np.float32)
    return np.concatenate([specials, wide])[:n]


def _ops(fn):
    with ggrad.profile() as prof:
        fn()
    return set(prof.by_op())


@pytest.fixture
def cpu():
    return ggrad.device("cpu")


def test_the_overrides_are_registered_with_the_twins(cuda):
    assert gpu_twins.OVERRIDES in gpu_twins.registered("CUDA")


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("n", [1, 7, 8, 4099, 1_000_003])
def test_narrowing_gives_the_cpus_bits(cuda, cpu, name, n):
    x_np = _values(n, n)
    want = ggrad.tensor(x_np, device=cpu).to(DTYPES[name]).float().numpy()
    narrowed = ggrad.tensor(x_np, device=cuda).to(DTYPES[name])
    got = narrowed.to(cpu).float().numpy()   # the bits moved as they are, widened by the CPU
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("n", [1, 7, 8, 4099, 1_000_003])
def test_widening_gives_the_cpus_values(cuda, cpu, name, n):
    half = ggrad.tensor(_values(n, n + 1), device=cpu).to(DTYPES[name])   # the CPU's half values
    want = half.float().numpy()
    got = half.to(cuda).float().to(cpu).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("view", ["offset", "permuted", "transposed"])
def test_views_convert_as_on_the_cpu(cuda, cpu, name, view):
    """A packed view 1 element in (not 16-byte aligned), a permuted one (contiguous rows: 4 at a time) and a
    transposed one (GGML's own copy), narrowed and widened."""
    take = {"offset": lambda t: t.reshape(-1)[1:], "permuted": lambda t: t.permute(1, 0, 2),
            "transposed": lambda t: t[0].t()}[view]
    x_np = _values(6 * 5 * 64, 5).reshape(6, 5, 64)
    want = take(ggrad.tensor(x_np, device=cpu)).to(DTYPES[name]).float().numpy()
    narrowed = take(ggrad.tensor(x_np, device=cuda)).to(DTYPES[name])
    np.testing.assert_array_equal(narrowed.to(cpu).float().numpy(), want)
    half = ggrad.tensor(x_np, device=cpu).to(DTYPES[name])
    got = take(half.to(cuda)).float().to(cpu).numpy()
    np.testing.assert_array_equal(got, take(half).float().numpy())


@pytest.mark.parametrize("dtype", [ggrad.float32, ggrad.float16])
@pytest.mark.parametrize("shape", [(6, 5, 64), (3, 4, 7)])
def test_contiguous_copies_of_permuted_views(cuda, cpu, dtype, shape):
    """CONT of a permuted view: rows of 64 four at a time, rows of 7 by GGML (not a multiple of 4)."""
    x_np = _values(int(np.prod(shape)), 6).reshape(shape)
    results = []
    for device in (cpu, cuda):
        x = ggrad.tensor(x_np, device=device).to(dtype)
        out = x.permute(1, 0, 2).contiguous()
        assert "CONT" in _ops(lambda: out.to(cpu).numpy()), device
        results.append(out.to(cpu).float().numpy())
    np.testing.assert_array_equal(results[1], results[0])


@pytest.mark.parametrize("vocab, width, tokens", [(96, 512, 8192), (1000, 2500, 300), (5, 7, 13)])
def test_embedding_gradients_as_the_cpu(cuda, cpu, vocab, width, tokens):
    """GET_ROWS_BACK: every row of the table's gradient sums its tokens' rows in the tokens' order, as GGML's
    CPU does (bit for bit); rows of 2,500 take two rounds of a block's columns, unused rows are zeros."""
    rng = np.random.default_rng(7)
    ids_np = rng.integers(0, vocab - 1, tokens).astype(np.int32)   # the last row never used
    g_np = rng.standard_normal((tokens, width)).astype(np.float32)
    results = []
    for device in (cpu, cuda):
        table = ggrad.zeros(vocab, width, device=device, requires_grad=True)
        out = ggrad.nn.functional.embedding(ggrad.tensor(ids_np, device=device), table)
        assert "GET_ROWS_BACK" in _ops(lambda: ((out * ggrad.tensor(g_np, device=device)).sum().backward(),
                                                 table.grad.numpy())), device
        results.append(table.grad.numpy())
    np.testing.assert_array_equal(results[1], results[0])
    assert not results[1][-1].any()
