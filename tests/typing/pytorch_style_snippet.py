"""PyTorch-style code that a type checker reads against ggrad's hints (mypy, by hand: see test_type_hints.py).

It also runs: test_type_hints.py executes `main()`, so the snippet stays valid code as the API changes.
"""

from __future__ import annotations

import numpy as np

import ggrad as torch
import ggrad.nn as nn
import ggrad.nn.functional as F
from ggrad.utils.data import DataLoader, TensorDataset


class TinyNet(nn.Module):
    def __init__(self, d_in: int, d_hidden: int, n_classes: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


def main() -> float:
    torch.manual_seed(0)
    x = torch.randn(32, 4)
    y = torch.tensor(np.arange(32) % 3)
    loader: DataLoader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    model = TinyNet(4, 16, 3).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    last = 0.0
    for xb, yb in loader:
        opt.zero_grad()
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        loss.backward()
        opt.step()
        last = loss.item()
    with torch.no_grad():
        probs = model.eval()(x).softmax(-1)
        values, indices = probs.max(-1)
        top = probs.topk(2, dim=-1).indices
        mask = probs == probs.amax(-1, keepdim=True)
    shape: tuple[int, ...] = probs.shape
    rows: int = probs.size(0)
    state: dict[str, torch.Tensor] = model.state_dict()
    model.load_state_dict(state)
    assert values.shape == indices.shape == (rows,) and top.shape == (rows, 2) and mask.dtype == torch.bool
    assert shape == (32, 3)
    return float(last)
