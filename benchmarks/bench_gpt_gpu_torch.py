"""PyTorch's side of bench_gpt_gpu.py, run in its own process that imports no ggrad (and so no GGML)."""

import json

from common import median_ms
from gpt_torch import CONFIGS, torch_step_fn


def main(config, steps, autocast=None, device="cuda"):
    """Print {"ms": median step time, "peak_mib": the CUDA allocator's peak reservation} as JSON."""
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"ms": float("nan"), "peak_mib": float("nan")}))
        return
    ms = median_ms(torch_step_fn(CONFIGS[config], device, autocast), warmup=5, repeats=steps)
    peak = torch.cuda.max_memory_reserved() / 2 ** 20 if device == "cuda" else float("nan")
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    print(json.dumps({"ms": ms, "peak_mib": peak, "torch": torch.__version__, "gpu": gpu}))
