"""Sizes that overflow (sizes.py): every op that computes a result shape refuses one whose element count or
bytes overflow int64 or size_t, with a RuntimeError naming the op, before GGML sees it. GGML's counts wrap
silently: the allocator then handed out a tiny buffer and the compute wrote past it (SIGSEGV), or a sum over
2**62 elements returned 0.0. The members run in a child process (member_cases.py)."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from member_cases import run_members  # noqa: E402

BIG = "ggrad.ones(1, 1).expand(2**40, 1)"   # 4 TiB if computed; never computed, only its products' shapes
# name -> (ggrad expression, the same in torch); torch raises RuntimeError for each (numel or storage overflow)
WITH_TORCH = {
    "expand_numel": "ggrad.ones(1, 1, 1, 1).expand(2**20, 2**20, 2**20, 2**20).sum().item()",
    "expand_5d_folded": "ggrad.ones(1, 1, 1, 1, 1).expand(2**13, 2**13, 2**13, 2**13, 2**13).sum().item()",
    "repeat": "ggrad.ones(2, 2).repeat(2**40, 2**40)",
    "tile": "ggrad.ones(2, 2).tile((2**40, 2**40))",
    "matmul": f"{BIG} @ {BIG}.T",
    "outer": "ggrad.outer(ggrad.ones(1).expand(2**40), ggrad.ones(1).expand(2**40))",
    "cat": "ggrad.cat([ggrad.ones(1).expand(2**52)] * 3)",
    "pad": "F.pad(ggrad.ones(1, 1).expand(2**26, 2**26), (2**31, 2**31))",
    "interpolate": "F.interpolate(ggrad.ones(1, 1, 2, 2), size=(2**31, 2**31))",
    "one_hot": "F.one_hot(ggrad.tensor([0]), 2**62)",
    "zeros": "ggrad.zeros(2**40, 2**40)",
    "full": "ggrad.full((2**31, 2**31), 1.0)",
    "rand": "ggrad.rand(2**31, 2**31)",
    "new_zeros": "ggrad.ones(2).new_zeros(2**31, 2**31)",
    "arange": "ggrad.arange(0, 2**62)",
    "linspace": "ggrad.linspace(0, 1, 2**62)",
    "eye": "ggrad.eye(2**32)",
    "randperm": "ggrad.randperm(2**62)",
}
# ggrad copies where PyTorch makes a zero-stride view (expand), so ggrad refuses what torch computes (slowly)
ONLY_GGRAD = {
    "expand_bytes": "ggrad.ones(1, 1).expand(2**31, 2**31).sum().item()",
    "expand_1d": "ggrad.ones(1).expand(2**62).sum().item()",
}
NAMED = {"expand_numel": "expand", "expand_5d_folded": "expand", "expand_bytes": "expand", "expand_1d": "expand",
         "cat": "cat", "pad": "pad", "interpolate": "interpolate", "one_hot": "one_hot", "zeros": "zeros",
         "full": "full", "rand": "rand", "new_zeros": "new_zeros", "arange": "arange", "linspace": "linspace",
         "eye": "eye", "randperm": "randperm", "repeat": "repeat", "tile": "tile", "outer": "outer",
         "matmul": "matmul"}


@pytest.fixture(scope="module")
def outcomes():
    cases = {name: (code, code.replace("ggrad.", "torch.")) for name, code in WITH_TORCH.items()}
    cases.update({name: (code, None) for name, code in ONLY_GGRAD.items()})
    return run_members(cases)


@pytest.mark.parametrize("name", sorted(WITH_TORCH))
def test_an_overflowing_size_raises_runtime_error_as_torch_does(outcomes, name):
    ours, theirs = outcomes[name]["ggrad"], outcomes[name]["torch"]
    assert theirs[0] == "raised" and "RuntimeError" in theirs[1], theirs
    assert ours[0] == "raised" and "RuntimeError" in ours[1], ours
    assert "overflow" in ours[2], ours[2]


@pytest.mark.parametrize("name", sorted(ONLY_GGRAD))
def test_an_expand_too_large_to_copy_raises_instead_of_summing_wrapped_sizes(outcomes, name):
    """`ones(1, 1).expand(2**31, 2**31).sum()` returned 0.0; the 4-D expand of 2**80 elements killed the process."""
    ours = outcomes[name]["ggrad"]
    assert ours[0] == "raised" and "RuntimeError" in ours[1] and "overflow" in ours[2], ours


@pytest.mark.parametrize("name", sorted(NAMED))
def test_the_error_names_the_public_op(outcomes, name):
    assert f"{NAMED[name]}(" in outcomes[name]["ggrad"][2] or f"{NAMED[name]}:" in outcomes[name]["ggrad"][2]


def test_large_sizes_that_fit_still_compute():
    """Only overflowing sizes are refused: a result of 3 * 2**20 elements computes as in torch."""
    result = run_members({"fits": ("ggrad.ones(3, 1).expand(3, 2**20).sum().item()",
                                   "torch.ones(3, 1).expand(3, 2**20).sum().item()")})["fits"]
    assert result["ggrad"] == result["torch"] == ["ok", 3 * 2**20]
