"""Zero-size results never reach a GGML node (Primitive: an op with an empty operand or result is a constant;
GGML aborted with "tensor buffer not set"): a slice with both endpoints outside the tensor, tril/triu with
an offset past the matrix, var/std and other reductions over a dimension of size 0, empty operands of
matmul, conv, cat, indexing and the optimizers. Values and gradients as PyTorch's; the members run in a
child process (member_cases.py)."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from member_cases import run_members  # noqa: E402


def _grad(expression, shape):
    """The gradient of expression(x).sum() at x = arange over `shape` (x named `x`)."""
    return (f"(lambda x: (lambda y: (y.sum().backward(), x.grad)[1])(({expression})))"
            f"(ggrad.arange(float(np.prod({shape}))).reshape({shape}).requires_grad_())")


MEMBERS = {   # name -> (expression of x, shape of x)
    "slice_both_ends_outside": ("x[-15:-7]", (3,)),
    "slice_rows_past_end": ("x[5:9]", (3, 4)),
    "slice_columns_past_end": ("x[:, 9:12]", (3, 4)),
    "slice_5d": ("x[..., 5:7]", (2, 1, 2, 1, 3)),
    "narrow_length_0": ("x.narrow(1, 4, 0)", (3, 4)),
    "tril_offset_below": ("x.tril(-5)", (3, 3)),
    "triu_offset_past": ("x.triu(5)", (3, 3)),
    "tril_rect": ("x.tril(-3)", (2, 5)),
    "var_dim_0": ("x.var(0)", (0, 3)),
    "std_dim_0": ("x.std(0)", (0, 3)),
    "var_correction_0": ("x.var(0, correction=0)", (0, 3)),
    "var_keepdim_empty_rows": ("x.var(1, keepdim=True)", (3, 0)),
    "mean_dim_0": ("x.mean(0)", (0, 3)),
    "sum_dim_0": ("x.sum(0)", (0, 3)),
    "prod_dim_0": ("x.prod(0)", (0, 3)),
    "logsumexp_dim_0": ("x.logsumexp(0)", (0, 3)),
    "softmax_empty": ("x.softmax(1)", (0, 3)),
    "cumsum_empty": ("x.cumsum(1)", (3, 0)),
    "matmul_inner_0": ("x @ x.T", (2, 0)),
    "matmul_rows_0": ("x.T @ x", (0, 3)),
    "cat_empties": ("(x * 0).flatten()[:0].reshape(0, 1).expand(0, 3) + x[:0]", (2, 3)),
    "index_select_empty": ("x.index_select(0, x[:0, 0].long())", (3, 4)),
    "diagonal_past": ("x.diagonal(5)", (3, 3)),
    "expand_to_0": ("x.expand(0, 3)", (1, 3)),
}


def _cases():
    cases = {}
    for name, (expression, shape) in MEMBERS.items():
        value = f"(lambda x: {expression})(ggrad.arange(float(np.prod({shape}))).reshape({shape}))"
        cases[name] = (value, value.replace("ggrad.", "torch."))
        grad = _grad(expression, shape)
        cases[name + ":grad"] = (grad, grad.replace("ggrad.", "torch."))
    cases["conv2d_batch_0"] = ("ggrad.conv2d(ggrad.ones(0, 1, 5, 5), ggrad.ones(2, 1, 3, 3))",
                               "torch.conv2d(torch.ones(0, 1, 5, 5), torch.ones(2, 1, 3, 3))")
    adam = ("(lambda p, q: (lambda opt: ((p.sum() + q.sum()).backward(), opt.step(), q)[2])"
            "(ggrad.optim.Adam([p, q])))(ggrad.nn.Parameter(ggrad.zeros(0, 3)), ggrad.nn.Parameter(ggrad.ones(2)))")
    cases["adam_step_empty_parameter"] = (adam, adam.replace("ggrad.", "torch."))
    return cases


@pytest.fixture(scope="module")
def outcomes():
    return run_members(_cases())


@pytest.mark.parametrize("name", sorted(_cases()))
def test_zero_size_results_are_torchs(outcomes, name):
    ours, theirs = outcomes[name]["ggrad"], outcomes[name]["torch"]
    if theirs[0] == "raised":
        assert ours[0] == "raised" and theirs[1][0] in ours[1], (ours, theirs)
    else:
        assert ours[0] == "ok", ours
        assert json.dumps(ours[1]) == json.dumps(theirs[1])   # nan and empty lists compare as text


def test_an_in_place_write_of_nothing_is_refused_before_ggml():
    """index_write_ (the KV cache's write) of a zero-size source reached GGML's set_rows, which aborted."""
    write = "ggrad.autograd.ops.inplace.index_write_"
    cases = {"columns": (f"(lambda t: (t.numpy(), {write}(t, 0, [1], ggrad.zeros(1, 0)))[1])(ggrad.zeros(4, 0))",
                         None),
             "rows": (f"(lambda t: (t.numpy(), {write}(t, 1, [1], ggrad.zeros(0, 1)))[1])(ggrad.zeros(0, 3))", None)}
    for name, outcome in run_members(cases).items():
        ours = outcome["ggrad"]
        assert ours[0] == "raised" and "ShapeError" in ours[1] and "nothing to write" in ours[2], (name, ours)
