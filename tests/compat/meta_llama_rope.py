"""Rotary embeddings on complex numbers, as Meta's Llama writes them (precompute_freqs_cis with polar,
apply_rotary_emb with view_as_complex / view_as_real), in an attention block that keeps freqs_cis as a plain
attribute and moves it to the input's device. Written as PyTorch code; `build(torch)` runs it with either."""


def build(torch):
    nn, F = torch.nn, torch.nn.functional

    def precompute_freqs_cis(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        t = torch.arange(end, device=freqs.device)
        freqs = torch.outer(t, freqs).float()
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
        return freqs_cis

    def reshape_for_broadcast(freqs_cis, x):
        ndim = x.ndim
        assert 0 <= 1 < ndim
        assert freqs_cis.shape == (x.shape[1], x.shape[-1])
        shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
        return freqs_cis.view(*shape)

    def apply_rotary_emb(xq, xk, freqs_cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    class Attention(nn.Module):
        def __init__(self, dim, n_heads, max_seq_len):
            super().__init__()
            self.n_heads, self.head_dim = n_heads, dim // n_heads
            self.wq = nn.Linear(dim, dim, bias=False)
            self.wk = nn.Linear(dim, dim, bias=False)
            self.wv = nn.Linear(dim, dim, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)
            self.freqs_cis = precompute_freqs_cis(self.head_dim, max_seq_len * 2)

        def forward(self, x, start_pos=0):
            bsz, seqlen, _ = x.shape
            self.freqs_cis = self.freqs_cis.to(x.device)
            freqs_cis = self.freqs_cis[start_pos: start_pos + seqlen]
            xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
            xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
            xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
            xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
            xq, xk, xv = xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2)
            scores = torch.matmul(xq, xk.transpose(2, 3)) / self.head_dim ** 0.5
            mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device).triu(1)
            scores = F.softmax(scores.float() + mask, dim=-1).type_as(xq)
            out = torch.matmul(scores, xv).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
            return self.wo(out)

    return {"precompute_freqs_cis": precompute_freqs_cis, "apply_rotary_emb": apply_rotary_emb,
            "Attention": Attention}
