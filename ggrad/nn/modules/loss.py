"""PyTorch's `torch.nn.modules.loss` path: the loss modules."""

from ..loss import (L1Loss, NLLLoss, KLDivLoss, MSELoss, BCELoss, BCEWithLogitsLoss, SmoothL1Loss, HuberLoss,
                    CrossEntropyLoss)
from ..margin_loss_modules import (PoissonNLLLoss, GaussianNLLLoss, HingeEmbeddingLoss, SoftMarginLoss,
                                   MultiLabelSoftMarginLoss, CosineEmbeddingLoss, MarginRankingLoss, MultiMarginLoss,
                                   TripletMarginLoss, TripletMarginWithDistanceLoss)
from ..ctc import CTCLoss

__all__ = ["L1Loss", "NLLLoss", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss", "MSELoss", "BCELoss",
           "BCEWithLogitsLoss", "HingeEmbeddingLoss", "SmoothL1Loss", "HuberLoss", "SoftMarginLoss",
           "CrossEntropyLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
           "MultiMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss"]
