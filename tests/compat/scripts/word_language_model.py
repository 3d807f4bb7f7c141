"""A word-level language model trained as PyTorch's word_language_model example trains one: corpus batching,
an LSTM or a Transformer encoder, gradient clipping, a manual SGD update through `p.data`, a whole-model
checkpoint, sampling.

`torch` is not imported here: the test loads this file as a module of its own with `torch` already bound to
PyTorch, or to ggrad (as `import ggrad as torch`), so its classes live at module level as a script's do (and
pickle by their module's name).
"""

import math
import os

nn = torch.nn  # noqa: F821  (bound by the test before this runs)
TEXT = ("the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat and the bird sings "
        "in the tall tree by the river where the fish swim under the old bridge near the quiet town ") * 4


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt=8):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.0, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0), :])

class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight       # tied
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return torch.nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))

class TransformerModel(nn.Module):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers):
        super().__init__()
        self.pos_encoder = PositionalEncoding(ninp)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout=0.0)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.decoder = nn.Linear(ninp, ntoken)
        self.ninp = ninp

    def forward(self, src, has_mask=True):
        mask = nn.Transformer.generate_square_subsequent_mask(len(src)) if has_mask else None
        src = self.pos_encoder(self.encoder(src) * math.sqrt(self.ninp))
        return torch.nn.functional.log_softmax(self.decoder(self.transformer_encoder(src, mask)), dim=-1)


def main(model_kind, init, workdir):
    """Train 5 steps, save the whole model, load it back, sample a word. Returns (losses, the reloaded model's
    probabilities, the error type of the default (weights-only) load, whether the sample is a word)."""
    words = TEXT.split()
    vocab = sorted(set(words))
    ids = torch.tensor([vocab.index(w) for w in words], dtype=torch.long)
    if model_kind == "lstm":
        model = RNNModel(len(vocab), 16, 16, 2)
    else:
        model = TransformerModel(len(vocab), 16, 2, 32, 2)
    init(model)
    criterion = torch.nn.NLLLoss()
    train_data = batchify(ids, 4)
    lr, losses = 2.0, []
    model.train()
    hidden = model.init_hidden(4) if model_kind == "lstm" else None
    for i in range(0, 5 * 8, 8):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        if model_kind == "lstm":
            hidden = tuple(h.detach() for h in hidden)
            output, hidden = model(data, hidden)
        else:
            output = model(data).view(-1, len(vocab))
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())

    path = os.path.join(workdir, f"{model_kind}.pt")
    with open(path, "wb") as f:
        torch.save(model, f)
    refused = None
    with open(path, "rb") as f:
        try:
            torch.load(f)
        except Exception as e:   # weights_only=True by default: the script's classes are not allowed
            refused = type(e).__name__
    with open(path, "rb") as f:
        model = torch.load(f, weights_only=False)
    model.eval()
    data, _ = get_batch(train_data, 0)
    with torch.no_grad():
        out = model(data, model.init_hidden(4))[0] if model_kind == "lstm" else model(data)
        word = torch.multinomial(out[-1].exp(), 1)[0]
    return losses, out.exp().numpy(), refused, int(word) < len(vocab)
