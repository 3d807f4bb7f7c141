"""PyTorch's `torch.nn.modules.transformer` path: the Transformer layers."""

from ..transformer_layers import (Transformer, TransformerEncoder, TransformerDecoder, TransformerEncoderLayer,
                                  TransformerDecoderLayer)

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]
