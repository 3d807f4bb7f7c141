"""`python -m ggrad.distributed.run`: torchrun's launcher for one host, for machines without PyTorch.

    python -m ggrad.distributed.run --nproc_per_node=2 train.py --epochs 3
    python -m ggrad.distributed.run --standalone --nproc-per-node 3 -m mypackage.train

Starts `nproc_per_node` copies of the script (or module), each with torchrun's variables: RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR and
MASTER_PORT (29500 unless given; a free port with --standalone). Their init_process_group meets over
TCP (ggrad.collectives.group). When one worker fails the others are stopped and the launcher exits
with its code, as torchrun does. One node only: --nnodes must be 1.
"""

import argparse
import os
import socket
import subprocess
import sys
import time

_GRACE = 5.0   # seconds a stopped worker gets between SIGTERM and SIGKILL


def _parser():
    parser = argparse.ArgumentParser(prog="python -m ggrad.distributed.run", description=__doc__.split("\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--nproc_per_node", "--nproc-per-node", type=int, default=1, help="workers to start")
    parser.add_argument("--nnodes", default="1", help="must be 1 (one host)")
    parser.add_argument("--node_rank", "--node-rank", type=int, default=0, help="must be 0 (one host)")
    parser.add_argument("--master_addr", "--master-addr", default="127.0.0.1")
    parser.add_argument("--master_port", "--master-port", type=int, default=29500)
    parser.add_argument("--standalone", action="store_true", help="pick a free port on this host")
    parser.add_argument("-m", "--module", action="store_true", help="run the script argument as a module")
    parser.add_argument("--no_python", "--no-python", action="store_true", help="run the script as a program")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return parser


def _free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def worker_environments(nproc, master_addr, master_port, base=None):
    """The environment of each worker: `base` (default os.environ) with torchrun's variables."""
    base = dict(os.environ if base is None else base)
    envs = []
    for rank in range(nproc):
        env = dict(base)
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
                   GROUP_RANK="0", ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(nproc), MASTER_ADDR=master_addr,
                   MASTER_PORT=str(master_port))
        envs.append(env)
    return envs


def _stop(workers):
    for w in workers:
        if w.poll() is None:
            w.terminate()
    deadline = time.monotonic() + _GRACE
    for w in workers:
        try:
            w.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()


def run(args):
    """Start the workers `args` (parsed) describe and wait for them; the exit code (the first failure's)."""
    if args.nnodes not in ("1", "1:1") or args.node_rank != 0:
        raise SystemExit("ggrad.distributed.run starts workers on one host: --nnodes must be 1 and --node_rank 0 "
                         "(for several hosts, run it on each with the same MASTER_ADDR, or use mpiexec)")
    if args.nproc_per_node < 1:
        raise SystemExit(f"--nproc_per_node must be at least 1, got {args.nproc_per_node}")
    port = _free_port(args.master_addr) if args.standalone else args.master_port
    if args.no_python:
        command = [args.training_script]
    elif args.module:
        command = [sys.executable, "-u", "-m", args.training_script]
    else:
        command = [sys.executable, "-u", args.training_script]
    command += args.training_script_args
    workers = [subprocess.Popen(command, env=env)
               for env in worker_environments(args.nproc_per_node, args.master_addr, port)]
    try:
        while True:
            codes = [w.poll() for w in workers]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                _stop(workers)
                return failed[0] if failed[0] > 0 else 128 - failed[0]   # killed by signal k: 128 + k
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.05)
    except KeyboardInterrupt:
        _stop(workers)
        return 130


def main(argv=None):
    sys.exit(run(_parser().parse_args(argv)))


if __name__ == "__main__":
    main()
