"""PyTorch's `torch.nn.modules.dropout` path: the dropout modules."""

from ..normalization import Dropout
from ..dropout_channels import Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]
