"""ggrad.parallel: data-parallel training across devices (local GPUs/CPU, or other hosts through RPC), with
checkpoints that resume bitwise."""

from .checkpoint import fit_resumable, read_checkpoint
from .data_parallel import DataParallel, default_devices, shard_sizes, split_sizes
from .training import DataParallelTrainer, dp_train

__all__ = ["DataParallel", "DataParallelTrainer", "default_devices", "dp_train", "fit_resumable", "read_checkpoint",
           "shard_sizes", "split_sizes"]
