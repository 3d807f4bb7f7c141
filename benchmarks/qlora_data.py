"""What both sides of bench_qlora.py share (numpy only: its PyTorch side must not load GGML, nor its ggrad side
PyTorch): the adapted projections under both names, the batches, the peak memory on the CPU."""

import numpy as np

# llama.cpp's name of each projection LoRA adapts -> transformers' module under a decoder layer
HF_OF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj"}


def batches(vocab, batch, seq, n):
    """`n` (batch, seq + 1) int64 windows of one repeating random sequence of 97 tokens (something to learn)."""
    rng = np.random.default_rng(1)
    data = np.tile(rng.integers(0, vocab, 97), (seq + 200) // 97 + 2)
    starts = rng.integers(0, 97, (n, batch))
    return [np.stack([data[s:s + seq + 1] for s in row]) for row in starts]


def peak_rss():
    """This process's peak resident memory in bytes (VmHWM: getrusage's ru_maxrss would count the parent's
    memory at the fork before this program's exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
