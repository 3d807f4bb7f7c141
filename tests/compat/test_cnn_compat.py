"""A small CNN classifier written the PyTorch way (Conv2d, BatchNorm2d, MaxPool2d, Flatten, SGD with
momentum, train/eval), run with PyTorch and with `import ggrad as torch` on copied weights."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402


def build(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                                          nn.MaxPool2d(2), nn.Conv2d(6, 8, 3), nn.BatchNorm2d(8), nn.ReLU())
            self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8 * 2 * 2, 5))

        def forward(self, x):
            return self.classifier(self.features(x))

    def fit(model, x, y, steps):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        losses = []
        model.train()
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            return losses, model(x)

    return Net, fit


def test_cnn_training_and_eval_outputs_match_pytorch():
    torch.manual_seed(0)
    ref_net, ref_fit = build(torch)
    our_net, our_fit = build(ggrad)
    ref, ours = ref_net(), our_net()
    ours.load_state_dict({k: ggrad.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 3, 8, 8)).astype(np.float32), rng.integers(0, 5, size=8)
    losses_t, out_t = ref_fit(ref, torch.tensor(x), torch.tensor(y), 5)
    losses_g, out_g = our_fit(ours, ggrad.tensor(x), ggrad.tensor(y), 5)
    np.testing.assert_allclose(losses_g, losses_t, rtol=1e-3)
    assert losses_g[-1] < losses_g[0]
    np.testing.assert_allclose(out_g.numpy(), out_t.numpy(), rtol=1e-3, atol=1e-4)
    ref_state = ref.state_dict()
    for name, value in ours.state_dict().items():
        np.testing.assert_allclose(value.numpy(), ref_state[name].numpy(), rtol=1e-3, atol=1e-4, err_msg=name)
