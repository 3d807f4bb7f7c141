"""Child of test_thread_count.py: three AdamW steps of a small transformer (class-index cross-entropy) and
one fit epoch of a Keras-style model, at the thread count given; prints the losses and a digest of the
weights and optimizer state.

    python thread_count_child.py THREADS
"""

import hashlib
import json
import sys

import numpy as np

import ggrad
from ggrad import nn


class TinyGPT(nn.Module):
    def __init__(self, vocab=50, width=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.block = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, x):
        return self.head(self.norm(self.block(self.emb(x), is_causal=True,
                                              src_mask=nn.Transformer.generate_square_subsequent_mask(x.shape[1]))))


def digest(tensors):
    h = hashlib.sha1()
    for t in tensors:
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def transformer_steps():
    ggrad.manual_seed(0)
    model = TinyGPT()
    opt = ggrad.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x, y = (ggrad.tensor(rng.integers(0, 50, (4, 16))) for _ in range(2))
    losses = []
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(x).reshape(64, 50), y.reshape(64))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, ggrad.Tensor)]
    return {"losses": losses, "weights": digest(model.parameters()), "state": digest(state)}


def fit_epoch():
    ggrad.manual_seed(0)
    model = ggrad.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))
    model.compile(optimizer="adam", loss="cross_entropy")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((96, 8)).astype(np.float32)
    y = rng.integers(0, 5, 96)
    history = model.fit(x, y, epochs=1, batch_size=32, verbose=0, shuffle=False)
    return {"losses": history.history["loss"], "weights": digest(model.parameters())}


if __name__ == "__main__":
    ggrad.set_num_threads(int(sys.argv[1]))
    print(json.dumps({"transformer": transformer_steps(), "fit": fit_epoch(), "threads": ggrad.get_num_threads()}))
