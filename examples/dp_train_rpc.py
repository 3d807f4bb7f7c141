"""Data-parallel training of a small character GPT from ONE process over the CPU and GGML RPC servers.

Each global batch is split between this process's CPU and every server's device; their graphs run at
the same time and the gradients are averaged. A checkpoint is written every --checkpoint-every steps;
if a server dies the run stops with a DeviceLostError naming it, and --resume continues from the
checkpoint (on the devices still there: `--servers 0` is the CPU alone).

    python examples/dp_train_rpc.py --servers 2 --steps 100           # starts 2 local servers
    python examples/dp_train_rpc.py --connect 10.0.0.5:50052 --steps 100
    python examples/dp_train_rpc.py --servers 0 --steps 100 --resume  # after a crash

A server on another host: `python -m ggrad.rpc_server --host 0.0.0.0 --port 50052` there (no
authentication: a network you trust).
"""

import argparse
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

import ggrad
import ggrad.ggml as gg
from ggrad import optim
from ggrad.examples.char_gpt import VOCAB, CharGPT, batches, load_corpus
from ggrad.ggml.rpc import protocol
from ggrad.parallel import dp_train, read_checkpoint


def start_local_server(threads):
    """A `python -m ggrad.rpc_server` on a free loopback port: (process, endpoint)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "ggrad.rpc_server", "--port", str(port), "--threads",
                             str(threads)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    protocol.wait_listening(port, proc)
    return proc, f"127.0.0.1:{port}"


def global_batches(args):
    """`args.steps` (x, y) batches of random windows of the corpus (made up front: the same on a resume)."""
    train, _ = load_corpus(args.corpus, max_bytes=2 << 20)
    rng = np.random.default_rng(args.seed)
    return [batches(train, args.batch, args.context, rng) for _ in range(args.steps)]


def char_loss(logits, targets):
    return ggrad.cross_entropy(logits.reshape(-1, len(VOCAB)), targets.reshape(-1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", type=int, default=2, help="local RPC servers to start (default 2)")
    p.add_argument("--connect", action="append", default=[], help="host:port of a running server (repeatable)")
    p.add_argument("--threads", type=int, default=1, help="threads of each local server and of the CPU")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=16, help="global batch (split across the devices)")
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--corpus", default=None, help="a text file or a folder of .py files (default: the stdlib)")
    p.add_argument("--checkpoint-every", type=int, default=25)
    p.add_argument("--out", default="runs/dp_train_rpc", help="folder of the checkpoint")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    ggrad.set_num_threads(args.threads)
    servers = [start_local_server(args.threads) for _ in range(args.servers)]
    try:
        endpoints = [endpoint for _, endpoint in servers] + args.connect
        devices = ["cpu"] + [gg.rpc_add_server(e)[0].name for e in endpoints]
        ggrad.manual_seed(args.seed)
        model = CharGPT(len(VOCAB), args.d_model, args.layers, 2, args.context)
        opt = optim.AdamW(model.parameters(), lr=3e-3)
        checkpoint = Path(args.out) / "checkpoint.ckpt"
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        print(f"devices: {', '.join(devices)}; {sum(q.numel() for q in model.parameters()):,} parameters")
        if args.resume:
            print(f"resuming from {checkpoint} at step {read_checkpoint(checkpoint)['step']}")
        try:
            history = dp_train(model, opt, char_loss, global_batches(args), devices=devices, max_steps=args.steps,
                               checkpoint=checkpoint, checkpoint_every=args.checkpoint_every,
                               resume=checkpoint if args.resume else None, verbose=1)
        except gg.DeviceLostError as e:
            print(f"{e}\ncontinue with --resume (and --servers 0 for the CPU alone)", file=sys.stderr)
            return 1
        print(f"final loss {history.history['loss'][-1]:.3f} nats after {args.steps} steps; checkpoint {checkpoint}")
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
