"""Window parameters checked where the public function is (ops/windows.py), with PyTorch's errors: a
convolution's or pool's stride 0, negative padding, dilation 0, kernel 0, a kernel larger than the padded
input. `ggrad.conv2d(x, w, stride=0)` raised ZeroDivisionError; negative padding and a kernel too large got
GGML's im2col messages (reversed shapes); `ggrad.max_pool2d` with a kernel larger than the input returned a
(1, 1, 0, 0) tensor. Every public function and its alias (ggrad.X and nn.functional.X) is a member."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from member_cases import run_members  # noqa: E402

BAD_CONV = {"stride_0": "stride=0", "negative_padding": "padding=-1", "dilation_0": "dilation=0",
            "kernel_past_input": "", "good": "padding=1"}
BAD_POOL = {"kernel_0": "0", "stride_0": "2, stride=0", "negative_padding": "2, padding=-1",
            "padding_past_half": "2, padding=2", "kernel_past_input": "26", "good": "2, stride=1, padding=1"}


def _conv_cases():
    cases = {}
    for op, n in (("conv1d", 1), ("conv2d", 2), ("conv_transpose1d", 1), ("conv_transpose2d", 2)):
        for bad, kwargs in BAD_CONV.items():
            side = 2 if bad == "kernel_past_input" else 5
            x, w = f"{{0}}.ones(1, 1, {', '.join([str(side)] * n)})", f"{{0}}.ones(1, 1, {', '.join(['3'] * n)})"
            for alias in ("ggrad", "F"):
                call = f"{alias}.{op}({x}, {w}, {kwargs})"
                cases[f"{alias}.{op}:{bad}"] = (call.format("ggrad"), f"F.{op}({x}, {w}, {kwargs})".format("torch"))
    return cases


def _pool_cases():
    cases = {}
    for op, n, aliases in (("max_pool2d", 2, ("ggrad", "F")), ("avg_pool2d", 2, ("ggrad", "F")),
                           ("max_pool1d", 1, ("F",)), ("avg_pool1d", 1, ("F",))):
        x = f"{{0}}.arange(50.).reshape(2, 1, {'5, 5' if n == 2 else '25'})"
        for bad, args in BAD_POOL.items():
            for alias in aliases:
                cases[f"{alias}.{op}:{bad}"] = (f"{alias}.{op}({x}, {args})".format("ggrad"),
                                                f"F.{op}({x}, {args})".format("torch"))
    cases["F.max_pool2d:dilation_0"] = ("F.max_pool2d(ggrad.ones(1, 1, 5, 5), 2, dilation=0)",
                                        "F.max_pool2d(torch.ones(1, 1, 5, 5), 2, dilation=0)")
    cases["nn.MaxPool2d:kernel_past_input"] = ("ggrad.nn.MaxPool2d(7)(ggrad.ones(1, 1, 5, 5))",
                                               "torch.nn.MaxPool2d(7)(torch.ones(1, 1, 5, 5))")
    return cases


CASES = {**_conv_cases(), **_pool_cases()}


@pytest.fixture(scope="module")
def outcomes():
    return run_members(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_window_parameters_behave_as_torchs(outcomes, name):
    """Where torch raises, ggrad raises the same type naming the op; where torch computes, the same values."""
    ours, theirs = outcomes[name]["ggrad"], outcomes[name]["torch"]
    if theirs[0] == "ok":
        assert ours == theirs
        return
    assert ours[0] == "raised" and theirs[1][0] in ours[1], (ours, theirs)
    op = name.split(":")[0].rsplit(".", 1)[-1]
    assert op in ours[2] or op == "MaxPool2d", ours[2]
    assert "im2col" not in ours[2] and "ZeroDivision" not in ours[1][0], ours


def test_each_bad_parameter_is_refused_by_torch_too(outcomes):
    """The table's bad parameters are bad (torch raises for each but the good ones and a transposed
    convolution's larger kernel, which is valid there): else the family tests nothing."""
    computed = sorted(name for name, r in outcomes.items() if r["torch"][0] == "ok")
    assert all(name.endswith(":good") or "conv_transpose" in name for name in computed), computed
