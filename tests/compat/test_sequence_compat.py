"""A sequence tagger written the PyTorch way (Embedding with padding_idx, a bidirectional 2-layer LSTM with
batch_first, a causal TransformerEncoder with a key padding mask built from `tokens == PAD`, GroupNorm over
the features, cross_entropy with ignore_index, Adam with clip_grad_norm_), run with PyTorch and with
`import ggrad as torch` on copied weights: losses of 5 steps, the weights after them, eval outputs."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

PAD, VOCAB, TAGS, D, LR, STEPS = 0, 11, 4, 16, 1e-2, 5


def build(torch):
    nn = torch.nn

    class Tagger(nn.Module):
        def __init__(self, d=D):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, d, padding_idx=PAD)
            self.lstm = nn.LSTM(d, d // 2, num_layers=2, batch_first=True, bidirectional=True)
            layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True,
                                               norm_first=True, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(d),
                                                 enable_nested_tensor=False)
            self.norm = nn.GroupNorm(4, d)
            self.head = nn.Linear(d, TAGS)

        def forward(self, tokens):
            padding = tokens == PAD
            x, (h, c) = self.lstm(self.embed(tokens))
            causal = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
            x = self.encoder(x, mask=causal, src_key_padding_mask=padding, is_causal=True)
            x = self.norm(x.transpose(1, 2)).transpose(1, 2)   # GroupNorm wants (N, C, L)
            return self.head(x), h

    def fit(model, tokens, tags, steps):
        optimizer = torch.optim.Adam(model.parameters(), lr=LR)
        losses = []
        model.train()
        for _ in range(steps):
            logits, _ = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, TAGS), tags.reshape(-1), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            return losses, model(tokens)

    return Tagger, fit


def test_lstm_transformer_tagger_trains_as_pytorch():
    torch.manual_seed(0)
    ref_model, ref_fit = build(torch)
    our_model, our_fit = build(ggrad)
    ref, ours = ref_model(), our_model()
    ours.load_state_dict({k: ggrad.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    start = {k: v.numpy().copy() for k, v in ref.state_dict().items()}
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, VOCAB, size=(3, 7))
    tokens[0, 5:] = PAD
    tokens[2, 6:] = PAD
    tags = rng.integers(0, TAGS, size=(3, 7))
    tags[tokens == PAD] = -100
    losses_t, (out_t, h_t) = ref_fit(ref, torch.tensor(tokens), torch.tensor(tags), STEPS)
    losses_g, (out_g, h_g) = our_fit(ours, ggrad.tensor(tokens), ggrad.tensor(tags), STEPS)
    np.testing.assert_allclose(losses_g, losses_t, rtol=1e-4)
    assert losses_g[-1] < losses_g[0]
    np.testing.assert_allclose(out_g.numpy(), out_t.numpy(), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(h_g.numpy(), h_t.numpy(), rtol=1e-3, atol=1e-4)
    ref_state = ref.state_dict()
    for name, value in ours.state_dict().items():
        got, want = value.numpy(), ref_state[name].numpy()
        if name.endswith("self_attn.in_proj_bias"):
            # The key bias's true gradient is 0 (it shifts a whole row of scores, which softmax ignores):
            # Adam turns both frameworks' rounding noise into lr-sized steps of random sign (see README).
            key = slice(D, 2 * D)
            assert np.all(np.abs(got[key] - start[name][key]) <= LR * STEPS * 1.01), name
            got, want = np.delete(got, np.s_[key]), np.delete(want, np.s_[key])
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=name)
