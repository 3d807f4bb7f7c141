"""CharGPT.generate against PyTorch with the same weights: the replayed decode step's tokens, one by one."""

import numpy as np
import pytest

from test_char_gpt_generation import PROMPT, small_model

torch = pytest.importorskip("torch")
F = torch.nn.functional


def torch_greedy(model, ids, n):
    """Greedy tokens of `model`'s weights in PyTorch: the full causal forward re-run per token."""
    w = {k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()}
    d = w["tok.weight"].shape[1]
    heads = model.blocks[0].attn.num_heads
    seq = torch.tensor(ids, dtype=torch.long)
    with torch.no_grad():
        for _ in range(n):
            t = seq.shape[1]
            x = w["tok.weight"][seq] + w["pos.weight"][:t]
            for i in range(len(model.blocks)):
                p = f"blocks.{i}."
                h = F.layer_norm(x, (d,), w[p + "ln1.weight"], w[p + "ln1.bias"])
                q, k, v = F.linear(h, w[p + "attn.in_proj_weight"], w[p + "attn.in_proj_bias"]).split(d, dim=-1)
                q, k, v = (z.view(z.shape[0], t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(-1, t, d)
                x = x + F.linear(a, w[p + "attn.out_proj.weight"], w[p + "attn.out_proj.bias"])
                h = F.gelu(F.linear(F.layer_norm(x, (d,), w[p + "ln2.weight"], w[p + "ln2.bias"]),
                                    w[p + "fc1.weight"], w[p + "fc1.bias"]), approximate="tanh")
                x = x + F.linear(h, w[p + "fc2.weight"], w[p + "fc2.bias"])
            logits = F.layer_norm(x[:, -1], (d,), w["ln_f.weight"], w["ln_f.bias"]) @ w["tok.weight"].T
            seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], dim=1)
    return seq.numpy()


def test_greedy_tokens_match_pytorch_with_the_same_weights():
    model = small_model(context=40)
    ours = model.generate(PROMPT, 30, temperature=0).numpy()
    np.testing.assert_array_equal(ours, torch_greedy(model, PROMPT, 30))
