"""PyTorch's `torch.utils.tensorboard` path: `SummaryWriter`, on the `tensorboard` package (an optional extra:
`pip install ggrad[tensorboard]`). Importing this module without it raises ImportError saying so, as PyTorch's."""

from .writer import SummaryWriter

__all__ = ["SummaryWriter"]
