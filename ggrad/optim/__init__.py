"""ggrad.optim: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad), learning-rate schedulers.

Gradient clipping is in ggrad.nn.utils.
"""

from .optimizer import Optimizer
from .sgd import SGD, sgd
from .adam import Adam, adamw
from .adamw import AdamW
from .rmsprop import RMSprop, rmsprop
from .adagrad import Adagrad, adagrad
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "sgd", "adamw", "rmsprop", "adagrad",
           "lr_scheduler"]
