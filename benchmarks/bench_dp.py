"""Data-parallel scaling of the W2 char GPT on this host: RPC servers and MPI ranks vs one process.

Each worker is pinned to one core (os.sched_setaffinity) with one thread: `N` RPC servers (`python -m
ggrad.rpc_server --threads 1` on core i, driven by one DataParallel client), or `N` MPI ranks
(`mpiexec -n N`, rank r on core r; each rank checks that the world has N ranks). The baseline is one
process with the same total threads (N threads pinned to N cores) running the plain W2 step. The
global batch is W2's 16 sequences (split 8 + 8 over 2 workers).

Every run prints a row at once (flushed: a run cut short still leaves its figures): the median step
and its phases, the consecutive spans of `DataParallel.timings` (record: building the replicas'
graphs, the first devices already computing; compute: until every gradient bucket is read; reduce:
host sum, clipping and, for MPI, the all-reduce including any wait for the other rank, or for MPI
in the graph the time inside the all-reduce node; update: the uploads and the updates' computes,
none when the all-reduce is in the graph). For the one process, record is the host work and compute
GGML's graph compute (`stats()["compute_seconds"]`). cpu_ms is the CPU time a step of the measuring
process (the one process, the RPC driver, MPI rank 0); load the 1-minute load average after the run
(other processes on the same cores make every figure slower and noisier). The summary table then gives samples/s
(medians over --rounds rounds of the median step of --steps steps), the scaling efficiency
(samples/s of N workers / (N x samples/s of 1 worker)), the ratio to the one-process baseline, the
phases in ms and the reduction's share of the step. The "independent" row is the control: N processes
with nothing shared, each running the plain step on its batch/N sequences on its own core at once; its
efficiency is what the host's cores allow (on a VM whose cores slow each other it is well below 1), and
vs_independent is each way's samples/s against it: what the data parallelism itself costs.

    python benchmarks/bench_dp.py [--workers 1 2] [--steps 10] [--rounds 3] [--mpi graph|host|both]
                                  [--ways rpc mpi] [--device cpu|cuda:0]

`--device cuda:0` runs every worker on one GPU (two GGML backends of it: with one GPU lent, this checks
the multi-device paths and times the reduction; it says nothing of scaling).
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
mode, threads, steps, endpoints, ranks, device = {mode!r}, {threads}, {steps}, {endpoints!r}, {ranks}, {device!r}
shard = dict(W2, batch={batch})
if mode == "mpi":
    from ggrad import distributed
    if distributed.world_size() != ranks:
        raise SystemExit(f"mpiexec -n {{ranks}} started a world of {{distributed.world_size()}} ranks "
                         "(is mpi4py built for this mpiexec?)")
    os.sched_setaffinity(0, {{distributed.rank() % os.cpu_count()}})
ggrad.set_num_threads(threads)
PHASES = ("record", "compute", "reduce", "update")
times, phases = [], []
if mode == "single":
    run = ggrad_step_fn(device, shard)
    def step():
        c0 = ggrad.stats()["compute_seconds"]
        t0 = time.perf_counter()
        run()
        compute = ggrad.stats()["compute_seconds"] - c0
        return dict(record=time.perf_counter() - t0 - compute, compute=compute, reduce=0.0, update=0.0)
else:
    ggrad.manual_seed(0)
    model = CharGPT(W2["vocab"], W2["d_model"], W2["layers"], W2["heads"], W2["context"])
    opt = optim.AdamW(model.parameters(), lr=W2["lr"])
    if mode == "rpc":
        import ggrad.ggml as gg
        devices = [gg.rpc_add_server(e)[0] for e in endpoints]
        if len({{d.name for d in devices}}) != len(endpoints):
            raise SystemExit(f"{{len(endpoints)}} servers gave the devices {{[d.name for d in devices]}}")
        dp = DataParallel(model, devices, opt)
    else:
        dp = distributed.DistributedDataParallel(model, [device], opt)
        dp.in_graph = dp.in_graph and {in_graph!r}
    x, y = batch_data()
    loss_fn = lambda out, t: ggrad.cross_entropy(out.reshape(-1, W2["vocab"]), t.reshape(-1))
    def step():
        dp.step(x, y, loss_fn)
        return {{k: dp.timings[k] for k in PHASES}}
computes, cpu = [], []
for i in range(3 + steps):
    c0 = ggrad.stats()["computes"]
    t0, p0 = time.perf_counter(), time.process_time()
    spans = step()
    if i >= 3:
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - p0)
        computes.append(ggrad.stats()["computes"] - c0)
        phases.append(spans)
if mode != "mpi" or distributed.rank() == 0:
    print("RESULT " + json.dumps(dict(step_s=statistics.median(times), computes=statistics.median(computes),
                                      cpu_s=statistics.median(cpu),
                                      **{{k: statistics.median(p[k] for p in phases) for k in PHASES}})),
          flush=True)
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pinned(cores):
    """A preexec_fn that pins the child process to `cores` (None: leave it free)."""
    if cores is None:
        return None
    cores = {c % os.cpu_count() for c in cores}
    return lambda: os.sched_setaffinity(0, cores)


def _worker_cmd(mode, threads, steps, endpoints=(), ranks=1, in_graph=True, device="cpu", batch=16):
    code = _WORKER.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), mode=mode, threads=threads,
                          steps=steps, endpoints=list(endpoints), ranks=ranks, in_graph=in_graph, device=device,
                          batch=batch)
    cmd = [sys.executable, "-c", code]
    if mode == "mpi":   # each rank pins itself
        cmd = [shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec", "-n", str(ranks)] + cmd
    return cmd


def _result(mode, proc):
    out, err = proc.communicate()
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} worker failed ({proc.returncode}):\n{out[-2000:]}\n{err[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _run_worker(mode, threads, steps, cores, **kwargs):
    cmd = _worker_cmd(mode, threads, steps, **kwargs)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_pinned(cores))
    return _result(mode, proc)


def _independent(n, steps, batch, device):
    """n plain one-thread steps of batch/n sequences at once, process i on core i, sharing nothing: what
    this host's cores give n workers with no communication at all (the slowest one's step)."""
    procs = [subprocess.Popen(_worker_cmd("single", 1, steps, device=device, batch=batch // n),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_pinned([i]))
             for i in range(n)]
    results = [_result("single", p) for p in procs]
    return max(results, key=lambda r: r["step_s"])


def _rpc(n, steps, device):
    from ggrad.ggml.rpc import protocol as P
    servers, endpoints = [], []
    try:
        for i in range(n):
            port = _free_port()
            proc = subprocess.Popen([sys.executable, "-m", "ggrad.rpc_server", "--port", str(port), "--threads", "1",
                                     "--device", device],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    preexec_fn=_pinned([i]))
            servers.append(proc)
            P.wait_listening(port, proc)
            endpoints.append(f"127.0.0.1:{port}")
        return _run_worker("rpc", 1, steps, None, endpoints=endpoints)   # the driver mostly waits: not pinned
    finally:
        for proc in servers:
            proc.kill()
            proc.wait()


_PHASES = ("record", "compute", "reduce", "update")


class _Row:
    """Rows printed one at a time under a header, in fixed columns, each flushed at once."""

    def __init__(self, columns, width=11):
        self.columns = columns
        self.widths = {c: max(len(c), 18 if c == "way" else width) for c in columns}
        print("  ".join(c.ljust(self.widths[c]) for c in columns), flush=True)

    def print(self, **values):
        print("  ".join(str(values[c]).ljust(self.widths[c]) for c in self.columns), flush=True)


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
    parser.add_argument("--device", default="cpu",
                        help="the device every worker computes on (cuda:0: the RPC servers and MPI ranks share "
                             "one GPU, which checks the paths and times the reduction, not scaling)")
    args = parser.parse_args(argv)
    batch = 16
    ways = [("one process", lambda n: _run_worker("single", n, args.steps, range(n), device=args.device)),
            ("independent", lambda n: _independent(n, args.steps, batch, args.device))]
    if "rpc" in args.ways:
        ways.append(("RPC servers", lambda n: _rpc(n, args.steps, args.device)))
    if "mpi" in args.ways and _mpi_available():
        for kind in (["graph", "host"] if args.mpi == "both" else [args.mpi]):
            ways.append((f"MPI ranks ({kind})", lambda n, g=kind == "graph": _run_worker("mpi", 1, args.steps, None,
                                                                                         ranks=n, in_graph=g,
                                                                                         device=args.device)))
    elif "mpi" in args.ways:
        print('MPI ranks skipped: pip install -e ".[mpi]"')
    print(f"W2 data parallel on {args.device}, global batch {batch}, {args.rounds} rounds x {args.steps} steps, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    live = _Row(["round", "way", "workers", "step_ms"] + [f"{p}_ms" for p in _PHASES] + ["computes", "cpu_ms", "load"])
    results = {}
    for r in range(args.rounds):   # rounds alternate the ways, so that a load spike hits them alike
        for name, run in ways:
            for n in args.workers:
                res = run(n)
                results.setdefault((name, n), []).append(res)
                live.print(round=r, way=name, workers=n, step_ms=f"{1e3 * res['step_s']:.0f}",
                           computes=f"{res['computes']:g}", cpu_ms=f"{1e3 * res['cpu_s']:.0f}",
                           load=f"{os.getloadavg()[0]:.1f}",
                           **{f"{p}_ms": f"{1e3 * res[p]:.1f}" for p in _PHASES})
    rows = []
    for name, _ in ways:
        one = batch / statistics.median(r["step_s"] for r in results[(name, args.workers[0])])
        for n in args.workers:
            rs = results[(name, n)]
            step = statistics.median(r["step_s"] for r in rs)
            sps = batch / step
            base = batch / statistics.median(r["step_s"] for r in results[("one process", n)])
            ceiling = batch / statistics.median(r["step_s"] for r in results[("independent", n)])
            rows.append(dict(way=name, workers=n, samples_per_s=f"{sps:.1f}", step_ms=f"{1e3 * step:.0f}",
                             rounds_ms=" ".join(f"{1e3 * r['step_s']:.0f}" for r in rs),
                             efficiency=f"{sps / (n / args.workers[0] * one):.2f}",
                             vs_one_process=f"{sps / base:.2f}", vs_independent=f"{sps / ceiling:.2f}",
                             **{f"{p}_ms": f"{1e3 * statistics.median(r[p] for r in rs):.1f}" for p in _PHASES},
                             reduce_share=f"{statistics.median(r['reduce'] / r['step_s'] for r in rs):.1%}",
                             computes=f"{statistics.median(r['computes'] for r in rs):g}",
                             cpu_ms=f"{1e3 * statistics.median(r['cpu_s'] for r in rs):.0f}"))
    print_table("medians over the rounds", rows,
                ["way", "workers", "samples_per_s", "step_ms", "rounds_ms", "efficiency", "vs_one_process",
                 "vs_independent"]
                + [f"{p}_ms" for p in _PHASES] + ["reduce_share", "computes", "cpu_ms"])

if __name__ == "__main__":
    main()
