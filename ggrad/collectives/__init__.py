"""The process group and its collectives on Tensors, over MPI or TCP sockets: the layer that torch.distributed's
surface (`ggrad.distributed`), `nn.parallel.DistributedDataParallel` and `utils.data.distributed.DistributedSampler`
stand on. mpi4py is imported on first use (the optional extra `pip install "ggrad[mpi]"`), for MPI runs only."""

from .group import (Backend, ProcessGroup, destroy_process_group, get_backend, get_rank, get_world_size, group,
                    init_process_group, is_available, is_gloo_available, is_initialized, is_mpi_available,
                    is_nccl_available)
from .store import DistError, DistStoreError, TCPStore
from .operations import (ReduceOp, Work, all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast,
                         reduce_scatter, reduce_scatter_tensor)

# torch.distributed's names (ggrad.distributed re-exports them)
__all__ = ["Backend", "DistError", "DistStoreError", "ProcessGroup", "ReduceOp", "TCPStore", "Work", "all_gather",
           "all_gather_into_tensor", "all_reduce", "barrier", "broadcast", "destroy_process_group", "get_backend",
           "get_rank", "get_world_size", "group", "init_process_group", "is_available", "is_gloo_available",
           "is_initialized", "is_mpi_available", "is_nccl_available", "reduce_scatter", "reduce_scatter_tensor"]
