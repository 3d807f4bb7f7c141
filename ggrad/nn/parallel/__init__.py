"""PyTorch's `torch.nn.parallel`: `DistributedDataParallel` over ggrad's MPI process group."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
