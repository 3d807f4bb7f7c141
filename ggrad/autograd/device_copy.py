"""A computed tensor copied onto another device by GGML itself, with no numpy array in between.

`ggml_backend_tensor_copy` picks the way: a device-side copy within one device, a peer copy between two
CUDA devices (cudaMemcpyPeer; direct over NVLink or PCIe where peer access is on), a memcpy between
host buffers, the backends' own get/set otherwise (an RPC server's transfer). The bytes arrive as they
were, so the copy is exact. Data-parallel training pulls the replicas' gradient buckets with it.
"""

from .. import ggml
from . import device_locks, execution
from .memory import Block, runtime
from .tensor import Tensor


def _transport_locks(*devices):
    """The locks of the RPC devices among `devices`, in a fixed order: GGML's client shares one connection
    per server, so two threads must not talk to one server at once (other backends copy concurrently)."""
    names = sorted({d.name for d in devices if d.backend_name == "RPC"})
    by_name = {d.name: d for d in devices}
    return [device_locks.lock_of(by_name[n]) for n in names]


def copy_to_device(t, device):
    """A new leaf Tensor on `device` holding `t`'s bytes, copied by GGML (`t` is computed first if pending).

    Unlike `t.to(device)` it records no gradient and reads nothing into the host. ValueError for a view
    that is not laid out contiguously (`t.contiguous()` first); DeviceLostError where either device is a
    lost RPC server's.
    """
    dev = ggml.device(device)
    if t._pending is not None:
        execution.realize(t._pending)
    src = t._node
    if not src.is_packed:
        raise ValueError(f"copy_to_device: the tensor of shape {t.shape} is a strided view; copy "
                         "t.contiguous() instead")
    pool = runtime(dev).pool
    home = ggml.Context(n_tensors=1)
    node = home.like(src)
    locks = _transport_locks(t.device, dev)   # an RPC server's buffer is allocated over its connection too
    for lock in locks:
        lock.acquire()
    try:
        buffer = pool.take(ggml.alloc_size(dev.buffer_type, node))
        block = Block(buffer, pool)   # gives the buffer back if the copy fails
        buffer.place(node)
        ggml.copy_tensor(src, node)
    finally:
        for lock in reversed(locks):
            lock.release()
    return Tensor._make(node, t.shape, t.dtype, dev, None, block)
