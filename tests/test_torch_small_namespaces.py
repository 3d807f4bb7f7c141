"""ggrad.testing.assert_close, ggrad.jit and ggrad.random against PyTorch's torch.testing, torch.jit and
torch.random: the same verdicts and messages, TorchScript's names as no-ops, fork_rng restoring the state."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


def _cases(lib):
    t = lib.tensor
    return [
        (t([1.0, 2.0, 3.0]), t([1.0, 2.5, 3.0]), {}),
        (t([1.0, 2.0, 3.0]), t([1.0, 2.0 + 1e-6, 3.0]), {}),
        (t([[1, 2], [3, 4]]), t([[1, 2], [3, 5]]), {}),
        (t([float("nan"), 1.0]), t([float("nan"), 1.0]), {}),
        (t([float("nan"), 1.0]), t([float("nan"), 1.0]), {"equal_nan": True}),
        (t([1.0, 2.0]), t([1.0, 2.1]), {"rtol": 0.1, "atol": 0.0}),
        (t([1.0, 2.0]), t([1.0, 2.0, 3.0]), {}),
        (t([1.0, float("inf")]), t([1.0, float("inf")]), {}),
        (t([1.0, 2.0]), t([1.0, 2.5]), {"msg": "custom"}),
        ([t([1.0]), {"a": t([2.0])}], [t([1.0]), {"a": t([2.0 + 1e-3])}], {}),
        (1.0, 1.1, {}),
        (3, 3, {}),
        (2, 3, {}),
        (t([1.0, 2.0], dtype=lib.float16), t([1.0, 2.001], dtype=lib.float16), {}),
    ]


def _verdict(lib, actual, expected, kwargs):
    try:
        lib.testing.assert_close(actual, expected, **kwargs)
        return "ok"
    except (AssertionError, ValueError, TypeError) as e:
        return f"{type(e).__name__}: {e}"


def test_assert_close_verdicts_and_messages_are_pytorchs():
    for ours, theirs in zip(_cases(ggrad), _cases(torch)):
        assert _verdict(ggrad, *ours) == _verdict(torch, *theirs).replace("torch.Size([2])", "(2,)").replace(
            "torch.Size([3])", "(3,)")


def test_assert_close_dtype_and_tolerance_arguments():
    for lib in (ggrad, torch):
        with pytest.raises(AssertionError, match="The values for attribute 'dtype' do not match"):
            lib.testing.assert_close(lib.tensor([1.0]), lib.tensor([1]))
        lib.testing.assert_close(lib.tensor([1.0]), lib.tensor([1]), check_dtype=False)
        with pytest.raises(ValueError, match="Both 'rtol' and 'atol' must be either specified or omitted"):
            lib.testing.assert_close(lib.tensor([1.0]), lib.tensor([1.0]), rtol=1e-3)
    z = ggrad.view_as_complex(ggrad.tensor([[1.0, 2.0]]))
    ggrad.testing.assert_close(z, z * 1.0)
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        ggrad.testing.assert_close(z, z * 1.1)


def test_jit_names_leave_python_code_as_it_is():
    model = ggrad.nn.Linear(2, 2)
    assert ggrad.jit.script(model) is model and ggrad.jit.trace(model, ggrad.ones(1, 2)) is model

    @ggrad.jit.ignore
    def f(x):
        return x + 1

    @ggrad.jit.unused(drop=True)
    def g(x):
        return x * 2

    @ggrad.jit.export
    def h(x):
        return x - 1

    assert f(1) == 2 and g(2) == 4 and h(1) == 0 and ggrad.jit.annotate(list, [1]) == [1]
    assert ggrad.jit.is_scripting() is torch.jit.is_scripting() is False
    assert ggrad.jit.is_tracing() is False


def test_fork_rng_restores_the_generator():
    ggrad.manual_seed(3)
    with ggrad.random.fork_rng():
        inside = ggrad.rand(3).numpy()
    after = ggrad.rand(3).numpy()
    assert np.array_equal(inside, after)
    with ggrad.random.fork_rng(enabled=False):
        ggrad.rand(3)
    assert not np.array_equal(ggrad.rand(3).numpy(), after)
    assert ggrad.random.manual_seed is ggrad.manual_seed and ggrad.random.initial_seed() == 3
