"""A small Llama-style model written the PyTorch way, against a `torch` namespace passed in.

Exercises what gpt_model.py does not: RMSNorm, rotary embeddings (outer, cos/sin, rotate-half with cat),
a SiLU-gated MLP, grouped-query attention (repeat_interleave) through F.scaled_dot_product_attention with
is_causal, bias-free Linear layers, and a training loop over a DataLoader with Adam, clip_grad_norm_ and a
cosine learning-rate schedule.
"""


def build(torch):
    """Define the model and its training loop over `torch` (PyTorch or ggrad); return them in a dict."""
    nn = torch.nn
    F = torch.nn.functional

    def rotary_tables(head_dim, length, base=10000.0):
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(length).float(), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos(), angles.sin()

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], dim=-1)

    class Attention(nn.Module):
        def __init__(self, dim, n_head, n_kv_head):
            super().__init__()
            self.n_head, self.n_kv_head, self.head_dim = n_head, n_kv_head, dim // n_head
            self.wq = nn.Linear(dim, dim, bias=False)
            self.wk = nn.Linear(dim, n_kv_head * self.head_dim, bias=False)
            self.wv = nn.Linear(dim, n_kv_head * self.head_dim, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            q = self.wq(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
            k = self.wk(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
            v = self.wv(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
            q = q * cos[:T] + rotate_half(q) * sin[:T]
            k = k * cos[:T] + rotate_half(k) * sin[:T]
            groups = self.n_head // self.n_kv_head
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(y.transpose(1, 2).reshape(B, T, -1))

    class FeedForward(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.w1 = nn.Linear(dim, hidden, bias=False)
            self.w3 = nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Layer(nn.Module):
        def __init__(self, dim, n_head, n_kv_head):
            super().__init__()
            self.attention_norm = nn.RMSNorm(dim, eps=1e-5)
            self.attention = Attention(dim, n_head, n_kv_head)
            self.ffn_norm = nn.RMSNorm(dim, eps=1e-5)
            self.feed_forward = FeedForward(dim, 3 * dim)

        def forward(self, x, cos, sin):
            x = x + self.attention(self.attention_norm(x), cos, sin)
            return x + self.feed_forward(self.ffn_norm(x))

    class Llama(nn.Module):
        def __init__(self, vocab_size, max_len, n_layer, dim, n_head, n_kv_head):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab_size, dim)
            self.layers = nn.ModuleList([Layer(dim, n_head, n_kv_head) for _ in range(n_layer)])
            self.norm = nn.RMSNorm(dim, eps=1e-5)
            self.output = nn.Linear(dim, vocab_size, bias=False)
            cos, sin = rotary_tables(dim // n_head, max_len)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

        def forward(self, tokens):
            x = self.tok_embeddings(tokens)
            for layer in self.layers:
                x = layer(x, self.cos, self.sin)
            return self.output(self.norm(x))

    def fit(model, inputs, targets, epochs, batch_size, lr):
        """Adam over a DataLoader (no shuffle), gradients clipped to norm 1, cosine schedule; losses as floats."""
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inputs, targets),
                                             batch_size=batch_size, shuffle=False)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))
        losses = []
        model.train()
        for _ in range(epochs):
            for x, y in loader:
                logits = model(x)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                losses.append(loss.item())
        return losses

    return {"Llama": Llama, "fit": fit}
