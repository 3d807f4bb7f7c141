"""PyTorch's `torch.nn.modules.loss` path: the loss modules."""

from ..loss import (L1Loss, NLLLoss, KLDivLoss, MSELoss, BCELoss, BCEWithLogitsLoss, SmoothL1Loss, HuberLoss,
                    CrossEntropyLoss)

__all__ = ["L1Loss", "NLLLoss", "KLDivLoss", "MSELoss", "BCELoss", "BCEWithLogitsLoss", "SmoothL1Loss", "HuberLoss",
           "CrossEntropyLoss"]
