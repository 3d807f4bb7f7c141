"""PyTorch's side of bench_gpt_gpu.py, run in its own process that imports no ggrad (and so no GGML)."""

import json

from common import median_ms
from gpt_torch import CONFIGS, torch_step_fn


def main(config, steps):
    import torch
    if not torch.cuda.is_available():
        print(json.dumps({"ms": float("nan")}))
        return
    ms = median_ms(torch_step_fn(CONFIGS[config], "cuda"), warmup=5, repeats=steps)
    print(json.dumps({"ms": ms, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}))
