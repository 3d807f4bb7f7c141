"""ggrad.optim: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop,
LBFGS), learning-rate schedulers.

Gradient clipping is in ggrad.nn.utils.
"""

from .optimizer import Optimizer
from .sgd import SGD, sgd
from .adam import Adam, adamw
from .adamw import AdamW
from .rmsprop import RMSprop, rmsprop
from .adagrad import Adagrad, adagrad
from .adadelta import Adadelta
from .adamax import Adamax
from .nadam import NAdam
from .radam import RAdam
from .asgd import ASGD
from .rprop import Rprop
from .lbfgs import LBFGS
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD",
           "Rprop", "LBFGS", "sgd", "adamw", "rmsprop", "adagrad", "lr_scheduler"]
