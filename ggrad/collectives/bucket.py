"""`AllReduceBucket`: a gradient all-reduce as nodes of the step's own graph, for a rank whose one device is the CPU.

On the CPU every tensor of a graph is in host memory, so MPI can sum the gradients where GGML computed
them: a short chain of custom GGML nodes copies the gradients (scaled by the rank's share of the batch)
straight into one flat float32 bucket, each element once, and the last of them all-reduces that bucket
in place while the graph computes. ggrad.distributed's dp_train and nn.parallel.DistributedDataParallel
both build it.
"""

import numpy as np

from ..autograd.primitive import Primitive
from ..autograd.tensor import Tensor
from ..ggml import data, ops

# a custom node takes at most 9 inputs (GGML_MAX_SRC - 1); one that writes into another's output, 8
_FIRST, _NEXT = 9, 8


def _gather(dst, ith, nth, userdata):
    """The GGML callback (on one thread): copy the node's inputs, times `share`, to their offsets in the
    bucket `dst`; the chain's last node then sums the bucket across the ranks in place (`reduce`)."""
    first, offsets, share, reduce = userdata
    bucket = data.view(dst).reshape(-1)
    for i, offset in enumerate(offsets):
        part = data.view(dst.src(first + i)).reshape(-1)
        if share == 1.0:
            bucket[offset:offset + part.size] = part
        else:
            np.multiply(part, share, out=bucket[offset:offset + part.size])
    if reduce is not None:
        reduce(bucket)


class AllReduceBucket(Primitive):
    """y = the sum over every rank of share * (the float32 inputs flattened and joined), built in the graph.

    apply(*parts, share, reduce): `reduce(array)` sums a float32 numpy array across the ranks in place;
    one function per run, so that the graph cache replays the nodes of an earlier step. The parts are
    copied once each (a `cat` of them would copy each about log2(len(parts)) times). Applied to
    gradients under no_grad: it is not differentiated.
    """

    @staticmethod
    def build(ctx, graph, *args):
        *parts, share, reduce = args
        sizes = [p.nelements for p in parts]
        starts = np.cumsum([0] + sizes[:-1]).tolist()
        share = np.float32(share)
        groups = [(0, _FIRST)] + [(i, i + _NEXT) for i in range(_FIRST, len(parts), _NEXT)]
        node = None
        for lo, hi in groups:
            last = hi >= len(parts)
            if node is None:   # the bucket itself, with the first group's parts (its inputs from src(0))
                userdata = (0, starts[lo:hi], share, reduce if last else None)
                node = ops.custom_4d(graph.ctx, "f32", sum(sizes), 1, 1, 1, parts[lo:hi], None, _gather, 1,
                                     userdata)
            else:              # writes into the bucket (src(0)) the next group's parts (from src(1))
                userdata = (1, starts[lo:hi], share, reduce if last else None)
                node = ops.custom_inplace(graph.ctx, node, parts[lo:hi], None, _gather, 1, userdata)
        return node

    @staticmethod
    def shape(*args):
        return (sum(a.numel() for a in args if isinstance(a, Tensor)),)
