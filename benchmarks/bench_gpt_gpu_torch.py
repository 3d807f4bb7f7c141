"""PyTorch's side of bench_gpt_gpu.py, run in its own process that imports no ggrad (and so no GGML)."""

import json

from common import median_ms
from gpt_torch import CONFIGS, torch_step_fn


def main(config, steps, autocast=None, device="cuda", tf32=False, variant="eager"):
    """Print {"ms": median step time, "peak_mib": the CUDA allocator's peak reservation, "alloc_mib": its peak
    allocation} as JSON. `tf32` lets f32 products use TF32 tensor cores (as GGML's cuBLAS calls always do);
    `variant`: gpt_torch.VARIANTS (eager, sdpa, compile)."""
    import torch
    nan = float("nan")
    if device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"ms": nan, "peak_mib": nan, "alloc_mib": nan}))
        return
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    ms = median_ms(torch_step_fn(CONFIGS[config], device, autocast, variant), warmup=5, repeats=steps)
    cuda = device == "cuda"
    peak = torch.cuda.max_memory_reserved() / 2 ** 20 if cuda else nan
    alloc = torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else nan
    gpu = torch.cuda.get_device_name(0) if cuda else "cpu"
    print(json.dumps({"ms": ms, "peak_mib": peak, "alloc_mib": alloc, "torch": torch.__version__, "gpu": gpu}))
