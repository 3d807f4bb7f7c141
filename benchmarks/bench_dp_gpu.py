"""Data parallel of the big GPT on one host's GPUs: ggrad's on-device all-reduce against one GPU, and PyTorch
DDP (NCCL) beside it when the host has the GPUs.

At the same per-GPU batch (the config's, 32 sequences of 256 for `big`), it times (medians of --steps steps
after warm-up): ggrad's plain step on the first device; `DataParallel` on the devices with a global batch of
N times that, its phases (`DataParallel.timings`: record, compute, reduce = the copies left after the last
backward and the clipping factor, update = the sums and the updates), the reduction's share of the step, its
bandwidth (the bytes each device received over the time its thread spent copying); and GGML's copy of a
gradient-sized float32 buffer between the first two devices, one way and both ways at once (the link). The
scaling efficiency is (samples/s on N devices) / (N x samples/s on one) = plain step / DP step. PyTorch
(TF32 on, as GGML's cuBLAS products) runs its step on one GPU and, with N GPUs, under DDP over NCCL, in a
subprocess that loads no GGML.

    python benchmarks/bench_dp_gpu.py [--devices cuda:0 cuda:1] [--config big] [--steps 10] [--no-torch]

GGML_CUDA_P2P=1 (set here unless given) lets GGML enable peer access between the GPUs. On a host with one
GPU, GGML_CUDA_DEVICES=2 shows it as CUDA0 and CUDA1 (two backends of one GPU, each with its own stream):
the paths and the reduction's cost run, the copies are copies within one GPU, and the scaling figure
means nothing (both replicas share the GPU).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

os.environ.setdefault("GGML_CUDA_P2P", "1")   # read when GGML's CUDA backend starts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from common import median_ms, print_table  # noqa: E402
from gpt_torch import CONFIGS, batch_data  # noqa: E402

import ggrad  # noqa: E402
from ggrad import optim  # noqa: E402
from ggrad.autograd.device_copy import copy_to_device  # noqa: E402
from ggrad.examples.char_gpt import CharGPT  # noqa: E402
from ggrad.parallel import DataParallel  # noqa: E402

PHASES = ("record", "compute", "reduce", "update")


def dp_run(cfg, devices, steps):
    """(median step ms, median ms of each phase, bytes copied a step, median ms a replica's thread copied) of
    DataParallel over `devices`."""
    ggrad.manual_seed(0)
    model = CharGPT(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"], cfg["context"])
    opt = optim.AdamW(model.parameters(), lr=cfg["lr"])
    dp = DataParallel(model, devices, opt)
    x, y = batch_data(dict(cfg, batch=cfg["batch"] * len(devices)))

    def loss_fn(out, target):
        return ggrad.cross_entropy(out.reshape(-1, cfg["vocab"]), target.reshape(-1))
    spans = []
    try:
        for i in range(3 + steps):
            dp.step(x, y, loss_fn)
            if i >= 3:
                spans.append(dict(dp.timings, copy=dp.copy_seconds))
    finally:
        dp.close()
    phases = {k: 1e3 * statistics.median(s[k] for s in spans) for k in PHASES}
    copy_ms = 1e3 * statistics.median(s["copy"] for s in spans)
    return 1e3 * statistics.median(s["step"] for s in spans), phases, dp.reduce_bytes, copy_ms


def copy_rates(n_floats, a, b, repeats=10):
    """GB/s of GGML's copy of `n_floats` float32 from device b to a, and of both directions at once."""
    src = {d: (ggrad.zeros(n_floats, device=d) + 1.0) for d in (a, b)}
    ggrad.realize()
    one_way = median_ms(lambda: copy_to_device(src[b], a), warmup=2, repeats=repeats)
    errors = []

    def both():
        def pull(s, d):
            try:
                copy_to_device(s, d)
            except BaseException as e:   # noqa: BLE001  (reported below)
                errors.append(e)
        threads = [threading.Thread(target=pull, args=(src[b], a)), threading.Thread(target=pull, args=(src[a], b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    both_ways = median_ms(both, warmup=2, repeats=repeats)
    nbytes = 4 * n_floats
    return nbytes / one_way / 1e6, 2 * nbytes / both_ways / 1e6


def torch_run(config, steps, world):
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import bench_dp_gpu_torch as b; b.main({config!r}, {steps}, {world})")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    print(f"PyTorch run failed (exit {r.returncode}): {r.stderr.strip()[-800:]}", file=sys.stderr)
    return {"single_ms": float("nan"), "ddp_ms": float("nan")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", nargs="+", help="default: every CUDA device GGML shows")
    parser.add_argument("--config", default="big", choices=sorted(CONFIGS))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    if args.threads:
        ggrad.set_num_threads(args.threads)
    devices = [ggrad.device(d) for d in (args.devices or [d.name for d in ggrad.devices() if d.backend_name == "CUDA"])]
    if len(devices) < 2:
        raise SystemExit("needs two devices or more (on one GPU: GGML_CUDA_DEVICES=2)")
    cfg = CONFIGS[args.config]
    n = len(devices)
    print(f"devices: {[f'{d.name} ({d.description})' for d in devices]}; GGML_CUDA_DEVICES="
          f"{os.environ.get('GGML_CUDA_DEVICES')}; per-device batch {cfg['batch']}", flush=True)
    single_ms = median_ms(bench_gpt.ggrad_step_fn(devices[0].name, cfg), warmup=3, repeats=args.steps)
    one_ms, one_phases, _, _ = dp_run(cfg, devices[:1], args.steps)
    dp_ms, phases, copied, copy_ms = dp_run(cfg, devices, args.steps)
    n_params = sum(p.numel() for p in CharGPT(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"],
                                              cfg["context"]).parameters())
    one_way, both_ways = copy_rates(n_params, devices[0], devices[1])
    received = copied / n   # bytes each device received in a step
    rows = [dict(run=f"ggrad plain step, {devices[0].name}", ms=f"{single_ms:.1f}",
                 samples_s=f"{cfg['batch'] / single_ms * 1e3:.0f}", efficiency="1.00"),
            dict(run=f"ggrad DataParallel, {devices[0].name}", ms=f"{one_ms:.1f}",
                 samples_s=f"{cfg['batch'] / one_ms * 1e3:.0f}", efficiency=f"{single_ms / one_ms:.2f}"),
            dict(run=f"ggrad DataParallel, {n} devices", ms=f"{dp_ms:.1f}",
                 samples_s=f"{n * cfg['batch'] / dp_ms * 1e3:.0f}", efficiency=f"{single_ms / dp_ms:.2f}")]
    if not args.no_torch:
        t = torch_run(args.config, args.steps, n)
        rows.append(dict(run="PyTorch one GPU (TF32)", ms=f"{t['single_ms']:.1f}",
                         samples_s=f"{cfg['batch'] / t['single_ms'] * 1e3:.0f}", efficiency="1.00"))
        rows.append(dict(run=f"PyTorch DDP NCCL, {n} GPUs (TF32)", ms=f"{t['ddp_ms']:.1f}",
                         samples_s=f"{n * cfg['batch'] / t['ddp_ms'] * 1e3:.0f}",
                         efficiency=f"{t['single_ms'] / t['ddp_ms']:.2f}"))
        print(f"PyTorch: {t}")
    print_table(f"{args.config} GPT, {cfg['batch']} sequences per device (medians of {args.steps} steps)", rows,
                ["run", "ms", "samples_s", "efficiency"])
    print(f"\nDataParallel on {n} devices, phases (ms): "
          + ", ".join(f"{k} {phases[k]:.1f}" for k in PHASES)
          + "; one device: " + ", ".join(f"{k} {one_phases[k]:.1f}" for k in PHASES))
    print(f"reduction: {phases['reduce'] / dp_ms:.1%} of the step after the last backward; {received / 1e6:.1f} MB "
          f"received per device a step in {copy_ms:.2f} ms of copies (the slowest replica's thread): "
          f"{received / copy_ms / 1e6:.1f} GB/s")
    print(f"GGML copy of {4 * n_params / 1e6:.1f} MB {devices[1].name} -> {devices[0].name}: {one_way:.1f} GB/s one "
          f"way, {both_ways:.1f} GB/s both ways at once")


if __name__ == "__main__":
    main()
