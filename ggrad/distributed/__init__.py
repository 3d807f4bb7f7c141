"""ggrad.distributed: data-parallel training across processes, one per device or host, over MPI or TCP.

PyTorch's everyday surface (ggrad.collectives): `init_process_group` (under mpiexec, torchrun or
`python -m ggrad.distributed.run`, torchrun's launcher for one host: see ggrad.collectives.group),
`TCPStore`, `get_rank`, `get_world_size`, `all_reduce`, `broadcast`, `barrier`, `all_gather`, ..., with
`nn.parallel.DistributedDataParallel` and `utils.data.distributed.DistributedSampler`. And ggrad's own
trainer, over MPI:

    mpiexec -n 2 python train.py
    # train.py:  history = ggrad.distributed.dp_train(model, optimizer, "cross_entropy", loader, epochs=3)

The same `dp_train` as `ggrad.parallel`'s, with gradients all-reduced by MPI (mpi4py). Use it for one
process per device or host; use `ggrad.parallel.dp_train` with GGML RPC servers for one driver
process and many devices. mpi4py and an MPI are the optional extra `pip install "ggrad[mpi]"`,
imported on first use.
"""

from ..collectives import *  # noqa: F401,F403  (torch.distributed's names)
from ..collectives import __all__ as _torch_names
from ..collectives.mpi import RankLostError, available, world
from .training import DistributedDataParallel, dp_train


def rank():
    """This process's rank in COMM_WORLD."""
    return world().rank


def world_size():
    """How many ranks COMM_WORLD holds."""
    return world().size


__all__ = ["DistributedDataParallel", "RankLostError", "available", "dp_train", "rank", "world",
           "world_size"] + _torch_names
