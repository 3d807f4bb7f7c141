"""A ViT block with patchify and grouped-query attention whose key/value heads are expanded through 5-D
tensors, written the PyTorch way once and run with PyTorch and with `import ggrad as torch`: forward,
the gradients of every parameter and of the image, and a few SGD steps."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

B, C, IMG, P, DIM, HEADS, KV_HEADS = 2, 3, 8, 4, 16, 4, 2


def build(torch):
    nn, F = torch.nn, torch.nn.functional

    class PatchViTBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(C * P * P, DIM)
            self.q = nn.Linear(DIM, DIM)
            self.kv = nn.Linear(DIM, 2 * DIM // (HEADS // KV_HEADS))
            self.out = nn.Linear(DIM, C * P * P)
            self.norm = nn.LayerNorm(DIM)

        def patchify(self, x):
            b, c, h, w = x.shape
            x = x.view(b, c, h // P, P, w // P, P).permute(0, 2, 4, 1, 3, 5)   # 6-D
            return x.reshape(b, (h // P) * (w // P), c * P * P)

        def unpatchify(self, x):
            b, n, _ = x.shape
            side = IMG // P
            x = x.reshape(b, side, side, C, P, P).permute(0, 3, 1, 4, 2, 5)
            return x.reshape(b, C, IMG, IMG)

        def forward(self, image):
            h = self.embed(self.patchify(image))
            b, n, d = h.shape
            hd, rep = d // HEADS, HEADS // KV_HEADS
            x = self.norm(h)
            q = self.q(x).view(b, n, HEADS, hd).transpose(1, 2)
            k, v = self.kv(x).view(b, n, 2, KV_HEADS, hd).permute(2, 0, 3, 1, 4)   # 5-D
            k = k[:, :, None].expand(b, KV_HEADS, rep, n, hd).reshape(b, HEADS, n, hd)
            v = v.unsqueeze(2).expand(b, KV_HEADS, rep, n, hd).reshape(b, HEADS, n, hd)
            att = F.softmax(q @ k.transpose(-2, -1) / hd ** 0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, n, d)
            return self.unpatchify(self.out(h + y)) + image

    return PatchViTBlock


def _models():
    torch.manual_seed(0)
    ref = build(torch)()
    ours = build(ggrad)()
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    return ref, ours


def _image(seed=0):
    return np.random.default_rng(seed).standard_normal((B, C, IMG, IMG)).astype(np.float32)


def test_forward_and_gradients_match_pytorch():
    ref, ours = _models()
    xt, xg = torch.tensor(_image(), requires_grad=True), ggrad.tensor(_image(), requires_grad=True)
    yt, yg = ref(xt), ours(xg)
    np.testing.assert_allclose(yg.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    (yt ** 2).mean().backward()
    (yg ** 2).mean().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-3, atol=1e-6)
    ref_grads = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), ref_grads[name].grad.numpy(), rtol=1e-3, atol=1e-6,
                                   err_msg=name)


def test_sgd_steps_match_pytorch():
    ref, ours = _models()
    losses = {}
    for T, model in ((torch, ref), (ggrad, ours)):
        opt = T.optim.SGD(model.parameters(), lr=0.05)
        target = T.tensor(_image(1))
        losses[T.__name__] = []
        for _ in range(4):
            loss = ((model(T.tensor(_image())) - target) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[T.__name__].append(loss.item())
    np.testing.assert_allclose(losses["ggrad"], losses["torch"], rtol=1e-4)
    assert losses["ggrad"][-1] < losses["ggrad"][0]
