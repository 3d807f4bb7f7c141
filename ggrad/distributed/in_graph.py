"""The gradient all-reduce as nodes of the step's own graph, for a rank whose one device is the CPU.

On the CPU every tensor of a graph is in host memory, so MPI can sum the gradients where GGML computed
them: `AllReduceBucket` (ggrad.collectives.bucket) copies the gradients, scaled by the rank's share of
the batch, into one flat float32 bucket and all-reduces it in place while the graph computes. Clipping,
the parameters' gradients and the optimizer's update are further nodes of the same graph, so a step is
ONE compute per rank (forward, backward, all-reduce, update) with no download or upload of the
gradients; the host path (compute, read the bucket, all-reduce, upload, a second compute for the
update) stays for ranks with other devices (GPUs, RPC servers), whose memory MPI cannot reach and
where GGML runs no Python node.

A failed all-reduce (a lost rank) is raised once the graph has computed; by then the update has run
on this rank's own gradients, so the run resumes from its checkpoint, as the RankLostError says.
"""

from ..autograd import no_grad
from ..autograd.factory import tensor
from ..autograd.ops import reshape, split
from ..collectives.bucket import AllReduceBucket


def reduced_step(replica, optimizer, device, x, y, loss_fn, share, reduce, max_grad_norm):
    """Schedule a whole step on `device` (the CPU), computing nothing; return the global mean loss (a
    pending 1-element Tensor) and the devices to compute, each as one graph (the caller times the spans).

    The shard's gradients and loss, weighted by `share` (its part of the global batch), go into one
    bucket that `AllReduceBucket` sums across the ranks; its sum is the global mean gradient and loss.
    The gradient is clipped to `max_grad_norm` (joint 2-norm, as clip_grad_norm_) inside the graph.
    """
    optimizer.zero_grad()
    loss = loss_fn(replica(tensor(x, device=device)), tensor(y, device=device))
    loss.backward()
    params = [p for p in replica.parameters() if p.grad is not None]
    with no_grad():
        total = AllReduceBucket.apply(*[p.grad.float() for p in params], loss.detach().float(), float(share),
                                      reduce)
        mean_loss, gradients = total[-1:], total[:-1]
        if max_grad_norm is not None:
            norm = (gradients * gradients).sum().sqrt()
            gradients = gradients * (float(max_grad_norm) / (norm + 1e-6)).clamp(max=1.0)
        for p, g in zip(params, split(gradients, [p.numel() for p in params])):
            p.grad = reshape(g, p.shape).to(p.dtype)
    return mean_loss, optimizer._schedule_step()
