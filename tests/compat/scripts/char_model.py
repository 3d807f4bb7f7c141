"""A character model trained as minGPT-style scripts train one: a Dataset of text chunks read by a DataLoader
of worker processes (worker_init_fn, persistent_workers, pin_memory, prefetch_factor), torch.compile, AdamW
with fused=, a warmup-then-cosine SequentialLR, gradient clipping, sampling.

`torch` is not imported here: the test loads this file as a module of its own with `torch` already bound to
PyTorch, or to ggrad (as `import ggrad as torch`).
"""

import numpy as np

nn = torch.nn  # noqa: F821  (bound by the test before this runs)
TEXT = ("the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat and the bird sings "
        "in the tall tree by the river where the fish swim under the old bridge near the quiet town ") * 4
CHARS = sorted(set(TEXT))
STOI = {c: i for i, c in enumerate(CHARS)}
BLOCK = 12


class CharDataset(torch.utils.data.Dataset):  # noqa: F821
    def __init__(self, text):
        self.data = [STOI[c] for c in text]

    def __len__(self):
        return len(self.data) - BLOCK - 1

    def __getitem__(self, idx):
        chunk = self.data[idx:idx + BLOCK + 1]
        return torch.tensor(chunk[:-1], dtype=torch.long), torch.tensor(chunk[1:], dtype=torch.long)  # noqa: F821


def seed_worker(worker_id):
    np.random.seed(torch.initial_seed() % 2 ** 32)  # noqa: F821


class CharModel(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, 16)
        self.gru = nn.GRU(16, 24, batch_first=True)
        self.head = nn.Linear(24, vocab)

    def forward(self, idx, targets=None):
        out, _ = self.gru(self.emb(idx))
        logits = self.head(out)
        if targets is None:
            return logits, None
        return logits, nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main(init, steps=6):
    """`steps` steps over two passes of the persistent workers, then 5 sampled characters. Returns (losses,
    the shape of the sampled ids)."""
    torch.set_float32_matmul_precision("high")  # noqa: F821
    torch.cuda.manual_seed_all(0)  # noqa: F821
    loader = torch.utils.data.DataLoader(CharDataset(TEXT), batch_size=8, shuffle=False, num_workers=2,  # noqa: F821
                                         worker_init_fn=seed_worker, persistent_workers=True, pin_memory=True,
                                         prefetch_factor=2, drop_last=True)
    model = CharModel(len(CHARS))
    init(model)
    model = torch.compile(model)  # noqa: F821
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1,  # noqa: F821
                                  fused=False)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=2)  # noqa: F821
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)  # noqa: F821
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[2])  # noqa: F821
    losses = []
    for epoch in range(2):   # the persistent workers serve both passes
        for it, (xb, yb) in enumerate(loader):
            _, loss = model(xb, yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # noqa: F821
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            if it + 1 == steps // 2:
                break
    model.eval()
    idx = torch.zeros((1, 1), dtype=torch.long)  # noqa: F821
    with torch.no_grad():  # noqa: F821
        for _ in range(5):
            logits, _ = model(idx)
            probs = torch.nn.functional.softmax(logits[:, -1, :], dim=-1)  # noqa: F821
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)  # noqa: F821
    torch.set_float32_matmul_precision("highest")  # noqa: F821
    return losses, tuple(idx.shape)
