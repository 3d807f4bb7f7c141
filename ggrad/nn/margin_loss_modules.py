"""The modules of margin_losses' functions, as torch.nn's: each calls its function with its settings."""

from .loss import _Loss
from .margin_losses import (cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss, margin_ranking_loss,
                            multi_margin_loss, multilabel_soft_margin_loss, poisson_nll_loss, soft_margin_loss,
                            triplet_margin_loss, triplet_margin_with_distance_loss)

__all__ = ["MarginRankingLoss", "SoftMarginLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss"]


class MarginRankingLoss(_Loss):
    """`margin_ranking_loss(x1, x2, y, margin)`."""

    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class SoftMarginLoss(_Loss):
    """`soft_margin_loss(x, y)`."""

    def forward(self, input, target):  # noqa: A002
        return soft_margin_loss(input, target, self.reduction)


class HingeEmbeddingLoss(_Loss):
    """`hinge_embedding_loss(x, y, margin)`."""

    def __init__(self, margin=1.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input, target):  # noqa: A002
        return hinge_embedding_loss(input, target, self.margin, self.reduction)


class CosineEmbeddingLoss(_Loss):
    """`cosine_embedding_loss(x1, x2, y, margin)`."""

    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class TripletMarginLoss(_Loss):
    """`triplet_margin_loss(a, p, n, margin, p, eps, swap)`."""

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean"):
        super().__init__(reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                   self.reduction)



class TripletMarginWithDistanceLoss(_Loss):
    """`triplet_margin_with_distance_loss(a, p, n, distance_function, margin, swap)`."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                 margin=self.margin, swap=self.swap, reduction=self.reduction)

class MultiLabelSoftMarginLoss(_Loss):
    """`multilabel_soft_margin_loss(x, y, weight)`."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self._weight("weight", weight)

    def forward(self, input, target):  # noqa: A002
        return multilabel_soft_margin_loss(input, target, self.weight, self.reduction)


class MultiMarginLoss(_Loss):
    """`multi_margin_loss(x, y, p, margin, weight)`."""

    def __init__(self, p=1, margin=1.0, weight=None, reduction="mean"):
        super().__init__(reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin = p, margin
        self._weight("weight", weight)

    def forward(self, input, target):  # noqa: A002
        return multi_margin_loss(input, target, self.p, self.margin, self.weight, self.reduction)


class PoissonNLLLoss(_Loss):
    """`poisson_nll_loss(x, y, log_input, full, eps=eps)`."""

    def __init__(self, log_input=True, full=False, eps=1e-8, reduction="mean"):
        super().__init__(reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """`gaussian_nll_loss(x, y, var, full, eps)`."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):  # noqa: A002
        return gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)
