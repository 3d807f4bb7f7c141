"""ggrad.optim: optimizers (SGD, AdamW), learning-rate schedulers; gradient clipping is in ggrad.nn.utils."""

from .optimizer import Optimizer
from .sgd import SGD, sgd
from .adamw import AdamW, adamw
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "AdamW", "sgd", "adamw", "lr_scheduler"]
