"""nn.decode_attention: a cached step's attention by each CPU choice (ggrad's kernel, GGML's flash_attn_ext)
against PyTorch's scaled_dot_product_attention, over a grouped-query cache whose mask blocks runs of slots with
nn's MASKED and with -inf; what falls back to flash_attn_ext and what to the composed path (None)."""

import dataclasses

import numpy as np
import pytest

import ggrad
from ggrad.autograd import execution, lowering
from ggrad.nn.decode_attention import attend_cached
from ggrad.nn.functional import MASKED

torch = pytest.importorskip("torch")

TOLERANCE = {"kernel": 1e-5, "flash_attn_ext": 2e-3}   # flash_attn_ext rounds to float16 inside


def _case(t, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, 8, t, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 48, 16)).astype(np.float32) for _ in range(2))
    mask = np.zeros((2, 1, 1, 48), np.float32)
    mask[..., 30:] = MASKED          # unfilled slots
    mask[0, ..., 3:9] = -np.inf      # a padded row's blocked prefix
    mask[1, ..., 20:24] = MASKED
    return q, k, v, mask


def _torch(q, k, v, mask):
    out = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                                           attn_mask=torch.tensor(mask), enable_gqa=True)
    b, h, t, d = q.shape
    return out.permute(0, 2, 1, 3).reshape(b, t, h * d).numpy()


def _attend(choice, q, k, v, mask):
    device = ggrad.device("cpu")
    with execution.forced_lowering(device, dataclasses.replace(lowering.CPU, decode_attention=choice)), \
            ggrad.no_grad(), ggrad.profile() as prof:
        out = attend_cached(*(ggrad.tensor(a) for a in (q, k, v, mask)), 0.25)
        got = None if out is None else out.numpy()
    return got, prof.by_op()


@pytest.mark.parametrize("choice", sorted(TOLERANCE))
def test_one_query_over_a_masked_grouped_cache_matches_torch(choice):
    q, k, v, mask = _case(1)
    got, ops = _attend(choice, q, k, v, mask)
    np.testing.assert_allclose(got, _torch(q, k, v, mask), rtol=TOLERANCE[choice], atol=TOLERANCE[choice])
    assert ("FLASH_ATTN" in ops) == (choice == "kernel") and ("FLASH_ATTN_EXT" in ops) == (choice != "kernel")


def test_the_kernel_leaves_several_queries_to_flash_attn_ext():
    q, k, v, mask = _case(3, seed=1)
    got, ops = _attend("kernel", q, k, v, mask)
    np.testing.assert_allclose(got, _torch(q, k, v, mask), rtol=2e-3, atol=2e-3)
    assert "FLASH_ATTN_EXT" in ops and "FLASH_ATTN" not in ops


def test_the_composed_choice_and_gradients_return_none():
    q, k, v, mask = _case(1)
    assert _attend("softmax", q, k, v, mask)[0] is None
    device = ggrad.device("cpu")
    with execution.forced_lowering(device, dataclasses.replace(lowering.CPU, decode_attention="kernel")):
        qt = ggrad.tensor(q, requires_grad=True)
        assert attend_cached(qt, *(ggrad.tensor(a) for a in (k, v, mask)), 0.25) is None
