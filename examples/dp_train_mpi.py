"""Data-parallel training of a small character GPT over MPI: one process (rank) per device or host.

Every rank runs this script over the same global batches; each trains on its share of every batch,
the gradients are all-reduced by MPI, and the ranks stay bitwise identical. Rank 0 prints and writes
the checkpoint. Needs the mpi extra: pip install -e ".[mpi]".

    mpiexec -n 2 python examples/dp_train_mpi.py --steps 100
    mpiexec -disable-auto-cleanup -n 2 python examples/dp_train_mpi.py --steps 100   # survivors report a dead rank
    mpiexec -n 2 python examples/dp_train_mpi.py --steps 200 --resume
    mpiexec -hosts a,b -n 2 python examples/dp_train_mpi.py --device cuda:0           # one rank per host
"""

import argparse
import sys
from pathlib import Path

import numpy as np

import ggrad
from ggrad import distributed, optim
from ggrad.examples.char_gpt import VOCAB, CharGPT, batches, load_corpus
from ggrad.parallel import read_checkpoint


def char_loss(logits, targets):
    return ggrad.cross_entropy(logits.reshape(-1, len(VOCAB)), targets.reshape(-1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", help="this rank's device (default cpu)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of each rank")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=16, help="global batch (split across the ranks)")
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--corpus", default=None, help="a text file or a folder of .py files (default: the stdlib)")
    p.add_argument("--checkpoint-every", type=int, default=25)
    p.add_argument("--out", default="runs/dp_train_mpi", help="folder of rank 0's checkpoint")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the other ranks")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    ggrad.set_num_threads(args.threads)
    rank, size = distributed.rank(), distributed.world_size()
    train, _ = load_corpus(args.corpus, max_bytes=2 << 20)
    rng = np.random.default_rng(args.seed)   # the same seed on every rank: the same global batches
    data = [batches(train, args.batch, args.context, rng) for _ in range(args.steps)]
    ggrad.manual_seed(args.seed)
    model = CharGPT(len(VOCAB), args.d_model, args.layers, 2, args.context)
    opt = optim.AdamW(model.parameters(), lr=3e-3)
    checkpoint = Path(args.out) / "checkpoint.ckpt"
    if rank == 0:
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        print(f"{size} ranks; {sum(q.numel() for q in model.parameters()):,} parameters")
        if args.resume:
            print(f"resuming from {checkpoint} at step {read_checkpoint(checkpoint)['step']}")
    try:
        history = distributed.dp_train(model, opt, char_loss, data, devices=[args.device], max_steps=args.steps,
                                       checkpoint=checkpoint, checkpoint_every=args.checkpoint_every,
                                       resume=checkpoint if args.resume else None, timeout=args.timeout)
    except distributed.RankLostError as e:
        print(e, file=sys.stderr)
        return 1
    if rank == 0:
        print(f"final loss {history.history['loss'][-1]:.3f} nats after {args.steps} steps; checkpoint {checkpoint}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
