"""ggrad.parallel: data-parallel training across devices (local GPUs/CPU, or other hosts through RPC)."""

from .data_parallel import DataParallel, dp_train, split_sizes

__all__ = ["DataParallel", "dp_train", "split_sizes"]
