"""inference_mode, is_tensor and numel as PyTorch's."""

import pytest

import ggrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("lib", [ggrad, torch], ids=["ggrad", "torch"])
def test_inference_mode_switches_grad_off_and_restores(lib):
    x = lib.ones(2, requires_grad=True)
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        assert not (x * 2).requires_grad
        with lib.inference_mode(False):
            assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
    with lib.no_grad(), lib.inference_mode(False):
        assert lib.is_grad_enabled()   # False turns gradients back on, even inside no_grad
    assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
    assert (x * 2).requires_grad

    @lib.inference_mode()
    def predict(t):
        return t * 3
    assert not predict(x).requires_grad and lib.is_grad_enabled()


def test_is_tensor_and_numel():
    t = ggrad.zeros(3, 4)
    assert ggrad.is_tensor(t) and not ggrad.is_tensor([1.0]) and not ggrad.is_tensor(t.numpy())
    assert ggrad.numel(t) == torch.numel(torch.zeros(3, 4)) == 12
