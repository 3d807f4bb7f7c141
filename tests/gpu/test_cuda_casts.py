"""ggrad's conversions on CUDA (ggrad/ggml/cuda/casts.cu): GGML's packed float32 <-> float16/bfloat16 CPY
nodes, offered to them first by the patched backend, give the bits the CPU's conversions give (round to
nearest even; overflow to inf; subnormals; nan stays nan), whole vectors, tails and unaligned views alike.

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


@pytest.fixture
def cpu():
    return ggrad.device("cpu")


def test_the_conversions_are_registered_with_the_twins(cuda):
    assert gpu_twins.CONVERSIONS in gpu_twins.registered("CUDA")


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
def test_views_at_odd_offsets_convert_too(cuda, cpu, name):
    """A packed view 1 element in (not 16-byte aligned) and a transposed one (not packed: GGML's own copy)."""
    x_np = _values(4 * 1027, 5).reshape(4, 1027)
    for view in (lambda t: t.reshape(-1)[1:], lambda t: t.t()):
        want = view(ggrad.tensor(x_np, device=cpu)).to(DTYPES[name]).float().numpy()
        narrowed = view(ggrad.tensor(x_np, device=cuda)).to(DTYPES[name])
        np.testing.assert_array_equal(narrowed.to(cpu).float().numpy(), want)
        half = ggrad.tensor(x_np, device=cpu).to(DTYPES[name])
        got = view(half.to(cuda)).float().to(cpu).numpy()
        np.testing.assert_array_equal(got, view(half).float().numpy())
