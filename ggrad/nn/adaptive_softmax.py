"""`AdaptiveLogSoftmaxWithLoss` (PyTorch's, Grave et al.'s adaptive softmax): the frequent classes in a head,
the rare ones in clusters of smaller projections, for language models with large vocabularies.

The head scores the shortlist (classes below cutoffs[0]) and one entry per cluster; a target in cluster i
has log p = head's log p(cluster i) + the cluster's log p(class). The targets are read once on the host (their
range check, as PyTorch's); a cluster no target falls in is not computed (its weights get no gradient, as
PyTorch's), the others for the whole batch, each row keeping its own cluster's term (a selection, no row
gathering).
"""

from collections import namedtuple

from ..autograd.ops import cat, gather, log_softmax, where
from .containers import ModuleList
from .linear import Linear
from .module import Module
from .sequential import Sequential

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: returns (output, loss), output the target's log-probability per row, loss its mean
    negative.

    Args:
        in_features (int): input size. n_classes (int): number of classes.
        cutoffs (sequence of int): increasing cluster boundaries, in [1, n_classes - 1].
        div_value (float): each cluster's projection is in_features / div_value ** (i + 1) wide. Default: 4.0.
        head_bias (bool): a bias in the head. Default: False.
    """

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > (n_classes - 1)
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                                        Linear(hidden, size, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_, target_):
        targ_dim = target_.ndim
        if targ_dim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.ndim != 2:
                raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{list(input_.shape)}")
        elif targ_dim == 0:
            if input_.ndim != 1:
                raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{list(input_.shape)}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        input_ = input_.unsqueeze(0) if targ_dim == 0 else input_
        target = (target_.unsqueeze(0) if targ_dim == 0 else target_).long()
        labels = target.numpy()
        if labels.size and (labels.min() < 0 or labels.max() >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{labels.min()}, {labels.max()}] were found. ")
        head_logprob = log_softmax(self.head(input_), 1)
        # the head's entry for each row: the class itself in the shortlist, else its cluster's entry
        head_index = target.clamp(max=self.shortlist_size - 1)
        output = None
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            if not ((labels >= low) & (labels < high)).any():
                continue
            inside = (target >= low) & (target < high)
            head_index = where(inside, self.shortlist_size + i, head_index)
            cluster_logprob = log_softmax(self.tail[i](input_), 1)
            relative = (target - low).clamp(0, high - low - 1)
            local = gather(cluster_logprob, 1, relative.unsqueeze(1)).squeeze(1)
            term = where(inside, local, 0.0)
            output = term if output is None else output + term
        output_head = gather(head_logprob, 1, head_index.unsqueeze(1)).squeeze(1)
        output = output_head if output is None else output_head + output
        loss = (-output).mean()
        return _ASMoutput(output.squeeze(0) if targ_dim == 0 else output, loss)

    def _full_log_prob(self, input, head_output):  # noqa: A002
        head_logprob = log_softmax(head_output, 1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = log_softmax(self.tail[i](input), 1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)

    def log_prob(self, input):  # noqa: A002
        """log p of every class, (B, n_classes) (or (n_classes,) for a 1-D input)."""
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input):  # noqa: A002
        """The most likely class of each row."""
        return self.log_prob(input).argmax(-1)
