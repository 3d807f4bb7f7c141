"""`F.gumbel_softmax`: a differentiable draw from a categorical distribution given by logits (discrete latent
variables, VQ-style and RL code): softmax((logits + g) / tau) with Gumbel(0, 1) noise g; with `hard`, the
one-hot of its argmax whose gradient is the soft sample's (straight-through), as PyTorch's."""

from ..autograd.factory import empty_like, zeros_like
from ..autograd.ops import softmax

__all__ = ["gumbel_softmax"]


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """A sample of the relaxed categorical distribution over `dim` (eps: unused, as in PyTorch)."""
    gumbels = -empty_like(logits).exponential_().log()
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
