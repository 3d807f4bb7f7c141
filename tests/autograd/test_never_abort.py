"""What GGML would abort on is caught in Python: indices out of range (host data and device-computed),
zero-size tensors, views GGML ops cannot take. Each case runs in a subprocess first, so a regression is a
failed test, not a dead interpreter; then the values are compared with PyTorch where it is installed."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ggrad
from ggrad import nn

CASES = {
    "embedding_host": "ggrad.embedding(ggrad.tensor([1, 7]), ggrad.randn(4, 3))",
    "embedding_module": "nn.Embedding(4, 3)(ggrad.tensor([[0, 4]]))",
    "index_select_host": "ggrad.randn(4, 3).index_select(1, ggrad.tensor([3]))",
    "gather_host": "ggrad.gather(ggrad.randn(4, 3), 1, ggrad.tensor([[0], [1], [2], [3]]))",
    "getitem_list": "ggrad.randn(4, 3)[[0, 4]]",
    "getitem_negative_list": "ggrad.randn(4, 3)[:, [-4]]",
    "device_index": "ggrad.randn(4, 3).index_select(0, ggrad.tensor([1, 2]) * 3).numpy()",
    "device_index_backward": "w = ggrad.randn(4, 3, requires_grad=True); "
                             "ggrad.embedding(ggrad.tensor([2]) + 5, w).sum().backward(); w.grad.numpy()",
    "cross_entropy_label": "ggrad.cross_entropy(ggrad.randn(3, 4), ggrad.tensor([0, 4, 1]))",
    "nll_label": "ggrad.nll_loss(ggrad.randn(3, 4), ggrad.tensor([-1, 0, 1]))",
}


def _run_cases(cases):
    """Run each statement in one fresh interpreter; {name: exception type name or 'ok'}; a crash fails."""
    script = textwrap.dedent("""
        import ggrad, numpy as np
        from ggrad import nn
        for name, code in CASES.items():
            try:
                exec(code)
                print(name, "ok", flush=True)
            except IndexError:   # or a subclass (gather's is also a RuntimeError, as torch's)
                print(name, "IndexError", flush=True)
            except Exception as e:
                print(name, type(e).__name__, flush=True)
    """).replace("CASES", repr(cases))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"the interpreter died (rc {proc.returncode}):\n{proc.stderr[-2000:]}"
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines())


def test_out_of_range_indices_raise_index_error():
    results = _run_cases(CASES)
    assert results == {name: "IndexError" for name in CASES}


SURVIVAL = {
    "zero_size_ops": "t = ggrad; [f(t).numpy() for f in (" + ", ".join(
        ["lambda t: t.zeros(3, 0).sum(1)", "lambda t: t.zeros(8, 0) @ t.zeros(0, 5)",
         "lambda t: t.ones(4, 3)[1:1] * 2.0", "lambda t: t.cat([t.ones(2, 3), t.zeros(0, 3)], 0)",
         "lambda t: nn.Linear(3, 2)(t.zeros(0, 3))"]) + ")]",
    "empty_slice_backward": "x = ggrad.randn(4, 3, requires_grad=True); (x[1:1] * 2.0).sum().backward(); "
                            "x.grad.numpy()",
    "split_view_scale": "(ggrad.randn(4, 3).split(2, 0)[1] * 2).numpy()",
    "transposed_row_scale": "(ggrad.randn(1, 5).T * 2).numpy()",
}


def test_zero_size_and_views_never_abort():
    assert _run_cases(SURVIVAL) == {name: "ok" for name in SURVIVAL}


def test_device_index_error_poisons_the_step_but_not_host_data():
    x = ggrad.randn(4, 3)
    doubled = x * 2.0
    with pytest.raises(IndexError, match="computed on the device"):
        x.index_select(0, ggrad.tensor([1, 2]) * 3).numpy()
    with pytest.raises(IndexError):   # a result of the failed compute
        doubled.numpy()
    with pytest.raises(IndexError):   # and using it in a new op
        doubled + 1.0
    assert x.numpy().shape == (4, 3)   # host data of the step is intact
    np.testing.assert_allclose((x * 2.0).numpy(), x.numpy() * 2.0)


def test_device_indices_in_range_pass_and_negative_ones_wrap():
    x = ggrad.randn(5, 3)
    idx = ggrad.tensor([0, 1]) * 2   # computed on the device
    np.testing.assert_allclose(x.index_select(0, idx).numpy(), x.numpy()[[0, 2]])
    np.testing.assert_allclose(x[ggrad.tensor([-1, 0]) * 1].numpy(), x.numpy()[[-1, 0]])
    np.testing.assert_allclose(x[:, [-1]].numpy(), x.numpy()[:, [-1]])


ZERO_SIZE = [
    ("sum_empty", lambda t: t.zeros(3, 0).sum(1)),
    ("sum_all_empty", lambda t: t.zeros(0).sum()),
    ("mean_empty", lambda t: t.zeros(3, 0).mean(1)),
    ("matmul_k0", lambda t: t.zeros(8, 0) @ t.zeros(0, 5)),
    ("matmul_m0", lambda t: t.zeros(0, 4) @ t.ones(4, 5)),
    ("slice_empty", lambda t: t.ones(4, 3)[1:1] * 2.0),
    ("cat_with_empty", lambda t: t.cat([t.ones(2, 3), t.zeros(0, 3)], 0)),
    ("exp_empty", lambda t: t.exp(t.zeros(2, 0, 3))),
    ("softmax_empty", lambda t: t.softmax(t.zeros(0, 4), -1)),
]


@pytest.mark.parametrize("name, fn", ZERO_SIZE, ids=[c[0] for c in ZERO_SIZE])
def test_zero_size_as_pytorch(name, fn):
    torch = pytest.importorskip("torch")
    ours, theirs = fn(ggrad).numpy(), fn(torch).numpy()
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs)


def test_zero_size_batch_trains():
    ggrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2))
    x = ggrad.zeros(0, 3)
    loss = ggrad.cross_entropy(model(x), ggrad.tensor(np.zeros(0, dtype=np.int32)), reduction="sum")
    loss.backward()
    assert loss.item() == 0.0
    for p in model.parameters():
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros(p.shape))


def test_backward_of_an_empty_slice():
    x = ggrad.randn(4, 3, requires_grad=True)
    (x[1:1] * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((4, 3)))


def test_max_over_nothing_raises_index_error():
    with pytest.raises(IndexError, match="non-zero size"):
        ggrad.zeros(3, 0).amax(1)
    with pytest.raises(IndexError, match="non-zero size"):
        ggrad.zeros(3, 0).argmax(1)


@pytest.mark.parametrize("make", [lambda x: x.split(2, 0)[1], lambda x: x.T[:, 1:2].T, lambda x: x[2:3].T,
                                  lambda x: x.unsqueeze(1)[1:3].permute(1, 0, 2)])
def test_views_that_ggml_ops_cannot_take_are_repacked(make):
    x = ggrad.randn(4, 3)
    ref = make(x.numpy().view(_NumpyT))
    np.testing.assert_allclose((make(x) * 2.0).numpy(), np.asarray(ref) * 2.0)
    np.testing.assert_allclose(ggrad.exp(make(x)).numpy(), np.exp(np.asarray(ref)), rtol=1e-6)


class _NumpyT(np.ndarray):
    """numpy arrays with the Tensor methods the view cases use."""

    def split(self, size, dim):
        return np.split(self, range(size, self.shape[dim], size), axis=dim)

    def unsqueeze(self, dim):
        return np.expand_dims(self, dim).view(_NumpyT)

    def permute(self, *dims):
        return np.transpose(self, dims)


def test_in_place_change_of_a_saved_tensor_raises_at_backward():
    """As PyTorch: the gradient would read the new value, so backward refuses."""
    x = ggrad.randn(3, requires_grad=True)
    y = x * 1.0
    z = y * y          # saves y
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    e = ggrad.exp(x)   # saves its output
    e.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        e.sum().backward()


def test_in_place_change_of_an_unsaved_tensor_is_fine():
    x = ggrad.randn(3, requires_grad=True)
    y = x * 2.0        # saves nothing of y
    y.add_(1.0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


def test_where_and_masked_fill_pick_exactly_as_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, np.inf, -2.0], [np.nan, 5.0, 0.5]], dtype=np.float32)
    b = np.array([0.25, -1.0, np.inf], dtype=np.float32)
    c = np.array([[1, 0, 0], [0, 1, 1]], dtype=bool)
    ga, gb = ggrad.tensor(a, requires_grad=True), ggrad.tensor(b, requires_grad=True)
    out = ggrad.where(ggrad.tensor(c), ga, gb)
    (out * ggrad.tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32))).sum().backward()
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ref = torch.where(torch.tensor(c).bool(), ta, tb)
    (ref * torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(ga.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(gb.grad.numpy(), tb.grad.numpy())
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    mask = np.array([[True, False, True]])
    ours = ggrad.tensor(x).masked_fill(ggrad.tensor(mask), float("-inf")).numpy()
    np.testing.assert_array_equal(ours, torch.tensor(x).masked_fill(torch.tensor(mask), float("-inf")).numpy())
