"""The same PyTorch-style Llama source (llama_model.py) run with PyTorch and with `import ggrad as torch`."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

from llama_model import build  # noqa: E402

VOCAB, MAX_LEN, LAYERS, DIM, HEADS, KV_HEADS = 19, 16, 2, 16, 4, 2


def _models():
    torch.manual_seed(0)
    ref = build(torch)["Llama"](VOCAB, MAX_LEN, LAYERS, DIM, HEADS, KV_HEADS)
    ours = build(ggrad)["Llama"](VOCAB, MAX_LEN, LAYERS, DIM, HEADS, KV_HEADS)
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    return ref, ours


def _tokens(shape, seed):
    return np.random.default_rng(seed).integers(0, VOCAB, size=shape)


def test_non_persistent_rotary_buffers_stay_out_of_the_state_dict():
    ref, ours = _models()
    assert sorted(ours.state_dict()) == sorted(ref.state_dict())
    assert "cos" not in ours.state_dict()
    np.testing.assert_allclose(ours.cos.numpy(), ref.cos.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours.sin.numpy(), ref.sin.numpy(), rtol=1e-6, atol=1e-6)


def test_forward_and_gradients_match_pytorch():
    ref, ours = _models()
    x, y = _tokens((2, 11), 1), _tokens((2, 11), 2)
    lt, lg = ref(torch.tensor(x)), ours(ggrad.tensor(x))
    np.testing.assert_allclose(lg.numpy(), lt.detach().numpy(), rtol=1e-4, atol=1e-5)
    torch.nn.functional.cross_entropy(lt.reshape(-1, VOCAB), torch.tensor(y).reshape(-1)).backward()
    ggrad.nn.functional.cross_entropy(lg.reshape(-1, VOCAB), ggrad.tensor(y).reshape(-1)).backward()
    ref_grads = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), ref_grads[name].grad.numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=name)


def test_dataloader_adam_clipping_and_cosine_schedule_match_pytorch():
    ref, ours = _models()
    x, y = _tokens((6, 9), 3), _tokens((6, 9), 4)
    losses_t = build(torch)["fit"](ref, torch.tensor(x), torch.tensor(y), epochs=2, batch_size=4, lr=1e-2)
    losses_g = build(ggrad)["fit"](ours, ggrad.tensor(x), ggrad.tensor(y), epochs=2, batch_size=4, lr=1e-2)
    assert len(losses_g) == 4  # 2 epochs of batches 4 + 2
    np.testing.assert_allclose(losses_g, losses_t, rtol=1e-3)
    ref_params = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), ref_params[name].detach().numpy(), rtol=1e-3, atol=1e-4,
                                   err_msg=name)
