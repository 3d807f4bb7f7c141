"""torch.distributed's collectives on ggrad Tensors, in place as PyTorch's, over MPI or TCP sockets.

Each reads its tensors' values to the host, runs the collective on the group's transport (MPI's or
sockets.py's, bounded by the group's timeout: a lost rank raises RankLostError) and writes the result
back in place. They complete before they return; `async_op=True` returns a completed `Work`. Half and
bfloat16 values travel as float32 (MPI has no half type) and are rounded once when written back. AVG of
an integer tensor truncates the mean toward zero, as NCCL's.
"""

import enum

import numpy as np

from ..autograd import no_grad
from ..autograd.factory import tensor as _tensor
from ..autograd.tensor import Tensor
from .group import default_group


class ReduceOp(enum.Enum):
    """How all_reduce / reduce_scatter combine the ranks' values (PyTorch's `torch.distributed.ReduceOp`)."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7


ReduceOp.RedOpType = ReduceOp   # PyTorch's ReduceOp.SUM is a ReduceOp.RedOpType


class Work:
    """What a collective returns with async_op=True; ggrad's collectives have completed by then."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True


def _done(async_op):
    return Work() if async_op else None


def _check(tensor, name):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(tensor).__name__}")


def _host(tensor):
    """The tensor's values as a contiguous writable numpy array a transport can send (half types as float32)."""
    values = tensor.detach().numpy()
    if values.dtype == np.float16 or tensor.dtype.name == "bf16":
        values = values.astype(np.float32)
    return np.ascontiguousarray(values).copy()


def _write(tensor, values):
    """Overwrite `tensor` in place with `values` (shape checked by the caller)."""
    with no_grad():
        tensor.copy_(_tensor(values.reshape(tensor.shape), device=tensor.device).to(tensor.dtype))


def _reduction(op, dtype):
    """The transport's name of the reduction `op` on values of numpy dtype `dtype`."""
    if not isinstance(op, ReduceOp):
        raise ValueError(f"expected a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR), got {op!r}")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype.kind not in "iub":
        raise RuntimeError(f"{op.name} is defined on integer and bool tensors, not on {dtype}")
    if dtype.kind == "b":   # no arithmetic on bools: SUM/MAX/BOR are "any", PRODUCT/MIN/BAND "all"
        if op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR, ReduceOp.AVG):
            return "lor"
        return "lxor" if op is ReduceOp.BXOR else "land"
    return {ReduceOp.SUM: "sum", ReduceOp.AVG: "sum", ReduceOp.PRODUCT: "prod", ReduceOp.MIN: "min",
            ReduceOp.MAX: "max", ReduceOp.BAND: "band", ReduceOp.BOR: "bor", ReduceOp.BXOR: "bxor"}[op]


def _average(values, op, size):
    if op is not ReduceOp.AVG or values.dtype.kind == "b":
        return values
    if values.dtype.kind == "f":
        return values / values.dtype.type(size)
    return np.trunc(values / size).astype(values.dtype)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine `tensor` across every rank with `op`; every rank's `tensor` then holds the result."""
    pg = default_group(group)
    _check(tensor, "all_reduce")
    values = _host(tensor)
    pg.transport.reduce(values.reshape(-1), _reduction(op, values.dtype), "all_reduce")
    _write(tensor, _average(values, op, pg.size()))
    return _done(async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Give every rank rank `src`'s `tensor` (in place)."""
    pg = default_group(group)
    _check(tensor, "broadcast")
    src = group_src if src is None else src
    if src is None or not 0 <= src < pg.size():
        raise ValueError(f"broadcast: src must be a rank in [0, {pg.size() - 1}], got {src}")
    values = _host(tensor)
    pg.transport.broadcast([values.reshape(-1)], src, "broadcast")
    if pg.rank() != src:
        _write(tensor, values)
    return _done(async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Return once every rank has called barrier."""
    pg = default_group(group)
    pg.transport.barrier()
    return _done(async_op)


def _gathered(pg, tensor, name):
    """Every rank's values of `tensor` (same shape and dtype on every rank), stacked: (world, *shape)."""
    values = _host(tensor)
    pg.transport.check_same_size(values.size, name)
    table = np.empty((pg.size(),) + values.shape, values.dtype)
    pg.transport.gather(values.reshape(-1), table.reshape(pg.size(), -1), name)
    return table


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] = rank r's `tensor`, on every rank (the list holds world-size tensors of its shape)."""
    pg = default_group(group)
    _check(tensor, "all_gather")
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list holds {len(tensor_list)} tensors for a world of {pg.size()}")
    for out in tensor_list:
        _check(out, "all_gather")
        if out.shape != tensor.shape:
            raise ValueError(f"all_gather: output tensor of shape {tuple(out.shape)} for an input of shape "
                             f"{tuple(tensor.shape)}")
    for out, values in zip(tensor_list, _gathered(pg, tensor, "all_gather")):
        _write(out, values)
    return _done(async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """The ranks' `input_tensor`s joined along dim 0 (or stacked: output shape (world, *input.shape))."""
    pg = default_group(group)
    _check(output_tensor, "all_gather_into_tensor")
    _check(input_tensor, "all_gather_into_tensor")
    if output_tensor.numel() != pg.size() * input_tensor.numel():
        raise ValueError(f"all_gather_into_tensor: output tensor of shape {tuple(output_tensor.shape)} must have "
                         f"world size ({pg.size()}) times the input's elements ({tuple(input_tensor.shape)})")
    _write(output_tensor, _gathered(pg, input_tensor, "all_gather_into_tensor"))
    return _done(async_op)


def _reduced_part(pg, parts, op, name):
    """This rank's part of the reduction of the ranks' `parts` (one array per rank, all of one shape)."""
    stacked = np.stack(parts)
    reduction = _reduction(op, stacked.dtype)
    pg.transport.check_same_size(stacked.size, name)
    pg.transport.reduce(stacked.reshape(-1), reduction, name)
    return _average(stacked[pg.rank()], op, pg.size())


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output on rank r = input_list[r] combined across the ranks with `op`."""
    pg = default_group(group)
    _check(output, "reduce_scatter")
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list holds {len(input_list)} tensors for a world of {pg.size()}")
    for part in input_list:
        _check(part, "reduce_scatter")
        if part.shape != output.shape:
            raise ValueError(f"reduce_scatter: input tensor of shape {tuple(part.shape)} for an output of shape "
                             f"{tuple(output.shape)}")
    _write(output, _reduced_part(pg, [_host(p) for p in input_list], op, "reduce_scatter"))
    return _done(async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):  # noqa: A002
    """`input` split into world-size equal parts along dim 0; output on rank r = part r combined with `op`."""
    pg = default_group(group)
    _check(output, "reduce_scatter_tensor")
    _check(input, "reduce_scatter_tensor")
    if input.numel() != pg.size() * output.numel():
        raise ValueError(f"reduce_scatter_tensor: input tensor of shape {tuple(input.shape)} must have world size "
                         f"({pg.size()}) times the output's elements ({tuple(output.shape)})")
    parts = list(_host(input).reshape(pg.size(), -1))
    _write(output, _reduced_part(pg, parts, op, "reduce_scatter_tensor"))
    return _done(async_op)


def broadcast_tensors(tensors, group=None, src=0):
    """Rank `src`'s values in every tensor of `tensors` (one exchange for all; DDP's start)."""
    pg = default_group(group)
    arrays = [_host(t).reshape(-1) for t in tensors]
    pg.transport.broadcast(arrays, src, f"broadcast of rank {src}'s tensors")
    if pg.rank() != src:
        for t, values in zip(tensors, arrays):
            _write(t, values)
