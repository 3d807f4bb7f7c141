"""`DistributedDataParallel`: PyTorch's module wrapper for one process per rank (under mpiexec or torchrun).

    ggrad.distributed.init_process_group("gloo")
    model = DistributedDataParallel(model)            # rank 0's parameters and buffers on every rank
    loss_fn(model(x_shard), y_shard).backward()       # the gradients' all-reduce joins the step's graph
    optimizer.step()

Each parameter's post-accumulate-grad hook marks it ready; once every awaited gradient has arrived
the wrapper replaces them by their average over the ranks: one `AllReduceBucket` (the same in-graph
all-reduce as ggrad.distributed.dp_train) copies them, each divided by the world size, into a float32
bucket that the group's transport (MPI or sockets) sums in messages of at most `bucket_cap_mb` while the
graph computes, in PyTorch's bucket order (parameters in reverse). So on the CPU, forward, backward, all-reduce and the optimizer's
update stay one graph; on other devices the gradients are read, all-reduced and uploaded instead.
`no_sync()` leaves the gradients local (they accumulate) until a backward outside it.
`find_unused_parameters=True` finds, at each forward, the parameters the output does not reach; the
ranks exchange which ones they used, locally unused ones take part with zeros, and a parameter no rank
used keeps its gradient (None), as PyTorch's.
"""

import contextlib

import numpy as np

from ...autograd import Tensor, no_grad
from ...autograd.factory import tensor, zeros
from ...autograd.grad_mode import is_grad_enabled
from ...autograd.ops import reshape, split
from ...collectives.bucket import AllReduceBucket
from ...collectives.group import default_group
from ...collectives.operations import broadcast_tensors
from ..module import Module

_UNFINISHED = ("Expected to have finished reduction in the prior iteration before starting a new one. This error "
               "indicates that your module has parameters that were not used in producing loss. You can enable "
               "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
               "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
               "participate in calculating loss.")


def _tensors(output):
    """The Tensors in a forward's output (nested tuples, lists and dicts)."""
    if isinstance(output, Tensor):
        return [output]
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in _tensors(item)]
    return []


def _leaves_reached(outputs):
    """ids of the leaf tensors whose gradient a backward from `outputs` would reach (explicit stack)."""
    reached, seen = set(), set()
    stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
    reached.update(id(t) for t in outputs if t.grad_fn is None and t.requires_grad)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for edge in node.next_edges:
            if isinstance(edge, tuple):
                stack.append(edge[0])
            elif isinstance(edge, Tensor):
                reached.add(id(edge))
    return reached


class DistributedDataParallel(Module):
    """Data parallelism across the ranks of the process group: each rank runs `module` on its own batch
    and every rank's gradients become their average (PyTorch's `torch.nn.parallel.DistributedDataParallel`).

    Args:
        module (Module): the model; its parameters and buffers are replaced by rank 0's at construction.
        device_ids, output_device: accepted for GPU modules; must be None for a CPU module (as PyTorch).
        broadcast_buffers (bool): give every rank rank 0's buffers at each forward. Default: True.
        process_group: None or group.WORLD (ggrad has one group).
        bucket_cap_mb (float): largest all-reduce message in MiB. Default: 25.
        find_unused_parameters (bool): see the module docstring. Default: False.
    The remaining PyTorch arguments (dim, check_reduction, gradient_as_bucket_view, static_graph, ...) are
    accepted and change nothing here.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None,
                 skip_all_reduce_unused_params=False):
        super().__init__()
        group = default_group(process_group)
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        on_cpu = all(p.device.is_cpu for p in params)
        if on_cpu and (device_ids is not None or output_device is not None):
            raise ValueError("DistributedDataParallel device_ids and output_device arguments only work with "
                             "single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                             f"{device_ids}, output_device {output_device}, and module parameters "
                             f"{{{params[0].device}}}.")
        cap = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        if not cap > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb}")
        self.module = module
        self.process_group = group
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int(cap * 2**20)
        self._params = params[::-1]              # PyTorch's bucket order: the last parameters first
        self._awaited = {id(p) for p in params}  # gradients this backward waits for (locally used ones)
        self._reduced = list(self._params)       # parameters whose gradients the reduction averages
        self._ready = set()
        self._reduce_in_place = self._allreduce  # one bound method for every step (graph cache replays)
        broadcast_tensors(list(module.parameters()) + list(module.buffers()), group)
        self._grad_hooks = [p.register_post_accumulate_grad_hook(self._gradient_ready) for p in params]

    def forward(self, *inputs, **kwargs):
        if self._ready:
            raise RuntimeError(_UNFINISHED)
        buffers = list(self.module.buffers())
        if self.broadcast_buffers and buffers and self.process_group.size() > 1:
            broadcast_tensors(buffers, self.process_group)
        output = self.module(*inputs, **kwargs)
        if self.find_unused_parameters and self.require_backward_grad_sync and is_grad_enabled():
            self._find_used(_tensors(output))
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside leave their gradients local (accumulating); the first outside averages."""
        before = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = before

    def _find_used(self, outputs):
        """Await the gradients this output reaches; reduce those of parameters that any rank used."""
        reached = _leaves_reached(outputs)
        used = np.array([id(p) in reached for p in self._params], np.int32)
        group = self.process_group
        group.transport.reduce(used, "max", "DistributedDataParallel's used parameters")
        self._awaited = {id(p) for p in self._params if id(p) in reached}
        self._reduced = [p for p, flag in zip(self._params, used) if flag]

    def _gradient_ready(self, param):
        if not self.require_backward_grad_sync:
            return
        self._ready.add(id(param))
        if self._ready >= self._awaited:
            self._ready = set()
            self._average_gradients()

    def _average_gradients(self):
        params = self._reduced
        if not params:
            return
        share = 1.0 / self.process_group.size()
        with no_grad():
            parts = [p.grad.float() if p.grad is not None else zeros(p.shape, device=p.device) for p in params]
            if all(part.device.is_cpu for part in parts):
                total = AllReduceBucket.apply(*parts, share, self._reduce_in_place)
                pieces = split(total, [p.numel() for p in params])
            else:   # GPU or RPC memory the transport cannot reach: read, all-reduce on the host, upload
                flat = np.concatenate([part.numpy().reshape(-1) for part in parts]) * np.float32(share)
                self._allreduce(flat)
                pieces = np.split(flat, np.cumsum([p.numel() for p in params])[:-1])
                pieces = [tensor(piece, device=p.device) for piece, p in zip(pieces, params)]
            for p, g in zip(params, pieces):
                p.grad = reshape(g, p.shape).to(p.dtype)

    def _allreduce(self, flat):
        """Sum the float32 array `flat` across the ranks in place, in messages of at most bucket_cap_mb."""
        group, size = self.process_group, max(1, self.bucket_bytes_cap // 4)
        what = "DistributedDataParallel's gradient all-reduce"
        group.transport.check_same_size(len(flat), what)
        group.transport.sum_arrays([flat[i:i + size] for i in range(0, len(flat), size)], what)

    def extra_repr(self):
        return f"world_size={self.process_group.size()}, find_unused_parameters={self.find_unused_parameters}"
