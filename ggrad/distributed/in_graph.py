"""The gradient all-reduce as a node of the step's own graph, for a rank whose one device is the CPU.

On the CPU every tensor of a graph is in host memory, so MPI can sum a gradient bucket where GGML
computed it: `AllReduce` is a custom GGML node that copies its input into its own memory and
all-reduces it there, in place, while the graph computes. Clipping, the parameters' gradients and the
optimizer's update are further nodes of the same graph, so a step is ONE compute per rank (forward,
backward, all-reduce, update) with no download or upload of the gradients; the host path (compute,
read the bucket, all-reduce, upload, a second compute for the update) stays for ranks with other
devices (GPUs, RPC servers), whose memory MPI cannot reach and where GGML runs no Python node.

A failed all-reduce (a lost rank) is raised once the graph has computed; by then the update has run
on this rank's own gradients, so the run resumes from its checkpoint, as the RankLostError says.
"""

from ..autograd import no_grad
from ..autograd.factory import tensor
from ..autograd.ops import cat, reshape
from ..autograd.primitive import Primitive
from ..ggml import data, ops


def _sum_in_place(dst, src, ith, nth, reduce):
    """The GGML callback (on one thread): dst = src, then `reduce(dst)` sums it across the ranks in place."""
    out = data.view(dst)
    out[...] = data.view(src)
    reduce(out)


class AllReduce(Primitive):
    """y = the sum of the float32 vector x over every rank, computed inside the graph by `reduce`.

    `reduce(array)` sums a float32 numpy array across the ranks in place; one function per run, so
    that the graph cache replays the node of an earlier step. Applied to gradients under no_grad:
    it is not differentiated.
    """

    @staticmethod
    def build(ctx, graph, x, reduce):
        return ops.map_custom1(graph.ctx, x, _sum_in_place, 1, reduce)


def reduced_step(replica, optimizer, device, x, y, loss_fn, share, reduce, max_grad_norm):
    """Schedule a whole step on `device` (the CPU), computing nothing; return the global mean loss (a
    pending 1-element Tensor) and the devices to compute, each as one graph (the caller times the spans).

    The shard's gradients and loss, weighted by `share` (its part of the global batch), go into one
    bucket that `AllReduce` sums across the ranks; its sum is the global mean gradient and loss. The
    gradient is clipped to `max_grad_norm` (joint 2-norm, as clip_grad_norm_) inside the graph.
    """
    optimizer.zero_grad()
    loss = loss_fn(replica(tensor(x, device=device)), tensor(y, device=device))
    loss.backward()
    params = [p for p in replica.parameters() if p.grad is not None]
    with no_grad():
        bucket = cat([reshape(p.grad.float(), p.numel()) for p in params] + [reshape(loss.detach().float(), 1)], 0)
        if share != 1.0:
            bucket = bucket * share   # one op for the whole bucket: the same products as one per gradient
        total = AllReduce.apply(bucket, reduce)
        mean_loss, gradients = total[-1:], total[:-1]
        if max_grad_norm is not None:
            norm = (gradients * gradients).sum().sqrt()
            gradients = gradients * (float(max_grad_norm) / (norm + 1e-6)).clamp(max=1.0)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = reshape(gradients[offset:offset + n], p.shape).to(p.dtype)
            offset += n
    return mean_loss, optimizer._schedule_step()
