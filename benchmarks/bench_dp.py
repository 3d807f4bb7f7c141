"""Data-parallel scaling of the W2 char GPT on this host: RPC servers and MPI ranks vs one process.

Each worker is pinned to one core with one thread: `N` RPC servers (`taskset -c i python -m
ggrad.rpc_server --threads 1`, driven by one DataParallel client), or `N` MPI ranks
(`mpiexec -n N`, each rank pinned with os.sched_setaffinity). The baseline is one process with the
same total threads (N threads on N cores) running the plain W2 step. The global batch is W2's 16
sequences (split 8 + 8 over 2 workers). Prints samples/s (medians over --rounds rounds of the median
step of --steps steps), the scaling efficiency (samples/s of N workers / (N x samples/s of 1 worker)),
the ratio to the one-process baseline, the reduction's share of the step and the update's, the
graph computes a step per process, and cpu_ms: the CPU time a step of the measuring process (the
one process, the RPC driver, MPI rank 0), steadier than wall time on a loaded machine. Reduction:
for RPC, from the devices' graphs computed to the update starting (gradient download, host sum,
clipping); for MPI on the host path (`--mpi host`), the same plus the all-reduce including any wait
for the other rank; for MPI in the graph (`--mpi graph`, what a rank on the CPU does by default) the
time inside the all-reduce node (including the wait). Update: the uploads and the second compute
that applies the update (none when the all-reduce is in the graph).

    python benchmarks/bench_dp.py [--workers 1 2] [--steps 10] [--rounds 3] [--mpi graph|host|both]
                                  [--ways rpc mpi]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table  # noqa: E402

_WORKER = r"""
import json, os, statistics, sys, time
sys.path.insert(0, {bench_dir!r})
import ggrad
from ggrad import optim
from ggrad.examples.char_gpt import CharGPT
from ggrad.parallel import DataParallel
from bench_gpt import W2, batch_data, ggrad_step_fn
mode, threads, steps, endpoints = {mode!r}, {threads}, {steps}, {endpoints!r}
if mode == "mpi":
    from ggrad import distributed
    os.sched_setaffinity(0, {{distributed.rank() % os.cpu_count()}})
ggrad.set_num_threads(threads)
times, windows = [], []
if mode == "single":
    step = ggrad_step_fn("cpu")
else:
    ggrad.manual_seed(0)
    model = CharGPT(W2["vocab"], W2["d_model"], W2["layers"], W2["heads"], W2["context"])
    opt = optim.AdamW(model.parameters(), lr=W2["lr"])
    if mode == "rpc":
        import ggrad.ggml as gg
        dp = DataParallel(model, [gg.rpc_add_server(e)[0] for e in endpoints], opt)
    else:
        dp = distributed.DistributedDataParallel(model, ["cpu"], opt)
        dp.in_graph = dp.in_graph and {in_graph!r}
    x, y = batch_data()
    loss_fn = lambda out, t: ggrad.cross_entropy(out.reshape(-1, W2["vocab"]), t.reshape(-1))
    def step():
        dp.step(x, y, loss_fn)
        windows.append((dp.timings["reduce"], dp.timings["update"]))
computes, cpu = [], []
for i in range(3 + steps):
    c0 = ggrad.stats()["computes"]
    t0, p0 = time.perf_counter(), time.process_time()
    step()
    if i >= 3:
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - p0)
        computes.append(ggrad.stats()["computes"] - c0)
if mode != "mpi" or distributed.rank() == 0:
    w = windows[3:]
    share = statistics.median(r / t for (r, _), t in zip(w, times)) if w else 0.0
    update = statistics.median(u / t for (_, u), t in zip(w, times)) if w else 0.0
    print("RESULT " + json.dumps(dict(step_s=statistics.median(times), share=share, update=update,
                                      computes=statistics.median(computes), cpu_s=statistics.median(cpu))),
          flush=True)
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_worker(mode, threads, steps, cores, endpoints=(), ranks=1, in_graph=True):
    code = _WORKER.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), mode=mode, threads=threads,
                          steps=steps, endpoints=list(endpoints), in_graph=in_graph)
    cmd = [sys.executable, "-c", code]
    if mode == "mpi":
        cmd = [shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec", "-n", str(ranks)] + cmd
    else:
        cmd = ["taskset", "-c", cores] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} worker failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _rpc(n, steps):
    from ggrad.ggml.rpc import protocol as P
    servers, endpoints = [], []
    try:
        for i in range(n):
            port = _free_port()
            proc = subprocess.Popen(["taskset", "-c", str(i % os.cpu_count()), sys.executable, "-m", "ggrad.rpc_server",
                                     "--port", str(port), "--threads", "1"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            servers.append(proc)
            P.wait_listening(port, proc)
            endpoints.append(f"127.0.0.1:{port}")
        return _run_worker("rpc", 1, steps, ",".join(map(str, range(os.cpu_count()))), endpoints)
    finally:
        for proc in servers:
            proc.kill()
            proc.wait()


def _mpi_available():
    code = "import ggrad.distributed as d; raise SystemExit(0 if d.available() else 1)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mpi", choices=["graph", "host", "both"], default="graph",
                        help="MPI ranks all-reduce inside the step's graph (one compute a step), on the host "
                             "(compute, read, all-reduce, upload, update), or both rows")
    parser.add_argument("--ways", nargs="+", default=["rpc", "mpi"], choices=["rpc", "mpi"],
                        help="which ways to run besides the one-process baseline (always run: the ratios need it)")
    args = parser.parse_args(argv)
    batch = 16
    ways = [("one process", lambda n: _run_worker("single", n, args.steps, ",".join(map(str, range(n)))))]
    if "rpc" in args.ways:
        ways.append(("RPC servers", lambda n: _rpc(n, args.steps)))
    if "mpi" in args.ways and _mpi_available():
        for kind in (["graph", "host"] if args.mpi == "both" else [args.mpi]):
            ways.append((f"MPI ranks ({kind})", lambda n, g=kind == "graph": _run_worker("mpi", 1, args.steps, None,
                                                                                         ranks=n, in_graph=g)))
    elif "mpi" in args.ways:
        print('MPI ranks skipped: pip install -e ".[mpi]"')
    results = {}
    for _ in range(args.rounds):   # rounds alternate the ways, so that a load spike hits them alike
        for name, run in ways:
            for n in args.workers:
                results.setdefault((name, n), []).append(run(n))
    rows = []
    for name, _ in ways:
        one = batch / statistics.median(r["step_s"] for r in results[(name, args.workers[0])])
        for n in args.workers:
            rs = results[(name, n)]
            sps = batch / statistics.median(r["step_s"] for r in rs)
            base = batch / statistics.median(r["step_s"] for r in results[("one process", n)])
            rows.append(dict(way=name, workers=n, samples_per_s=f"{sps:.1f}",
                             step_ms=f"{1e3 * batch / sps:.0f}",
                             rounds_ms=" ".join(f"{1e3 * r['step_s']:.0f}" for r in rs),
                             efficiency=f"{sps / (n / args.workers[0] * one):.2f}",
                             vs_one_process=f"{sps / base:.2f}",
                             reduction_share="-" if name == "one process" else
                             f"{statistics.median(r['share'] for r in rs):.1%}",
                             update_share="-" if name == "one process" else
                             f"{statistics.median(r['update'] for r in rs):.1%}",
                             computes=f"{statistics.median(r['computes'] for r in rs):g}",
                             cpu_ms=f"{1e3 * statistics.median(r['cpu_s'] for r in rs):.0f}"))
    print_table(f"W2 data parallel, global batch {batch}, {args.rounds} rounds x {args.steps} steps (medians), "
                f"{time.strftime('%Y-%m-%d')}, load average {os.getloadavg()[0]:.1f}", rows,
                ["way", "workers", "samples_per_s", "step_ms", "rounds_ms", "efficiency", "vs_one_process",
                 "reduction_share", "update_share", "computes", "cpu_ms"])


if __name__ == "__main__":
    main()
