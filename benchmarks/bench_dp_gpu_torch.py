"""PyTorch's side of bench_dp_gpu.py, in processes that import no ggrad (and so no GGML): the GPT step on one
GPU, and under DistributedDataParallel (NCCL) on `world` GPUs at the same per-GPU batch."""

import json
import os
import socket

from common import median_ms
from gpt_torch import CONFIGS, torch_step_fn


def _rank(rank, world, config, steps, port, results, backend):
    """One DDP rank (on GPU `rank` with "nccl", on the CPU with "gloo"); rank 0 puts its median step time (ms)
    into `results`."""
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device, ids = ("cuda", [rank]) if backend == "nccl" else ("cpu", None)
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world)
    torch.backends.cuda.matmul.allow_tf32 = True   # as GGML's cuBLAS calls (TF32 for f32 products)
    wrap = lambda model: torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)  # noqa: E731
    ms = median_ms(torch_step_fn(CONFIGS[config], device, wrap=wrap), warmup=5, repeats=steps)
    if rank == 0:
        results.put(ms)
    dist.destroy_process_group()


def ddp_ms(config, steps, world, backend="nccl"):
    """Rank 0's median step time (ms) of DDP over `world` processes (GPUs with "nccl", CPU processes with
    "gloo": a check of this script where no GPU is)."""
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_rank, args=(world, config, steps, port, results, backend), nprocs=world)
    return results.get()


def main(config, steps, world):
    """Print {"single_ms": one GPU's median step, "ddp_ms": DDP's on `world` GPUs (nan with fewer GPUs)} as JSON."""
    import torch
    nan = float("nan")
    if not torch.cuda.is_available():
        print(json.dumps({"single_ms": nan, "ddp_ms": nan}))
        return
    torch.backends.cuda.matmul.allow_tf32 = True
    single = median_ms(torch_step_fn(CONFIGS[config], "cuda"), warmup=5, repeats=steps)
    ddp = ddp_ms(config, steps, world) if world >= 2 and torch.cuda.device_count() >= world else nan
    print(json.dumps({"single_ms": single, "ddp_ms": ddp, "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count()}))
