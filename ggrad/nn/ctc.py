"""`CTCLoss`: the connectionist temporal classification loss module over `F.ctc_loss`
(ggrad/autograd/ops/ctc.py)."""

from ..autograd.ops.ctc import ctc_loss
from .loss import _Loss

__all__ = ["CTCLoss"]


class CTCLoss(_Loss):
    """The connectionist temporal classification loss (see `ctc_loss`).

    Args:
        blank (int): the blank label. Default: 0.
        reduction (str): 'mean', 'sum' or 'none'. Default: 'mean'.
        zero_infinity (bool): impossible alignments give 0 and no gradient. Default: False.
    """

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                        self.zero_infinity)
