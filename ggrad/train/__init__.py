"""ggrad.train: the Keras-like training loop for any Module (compile / fit / evaluate / predict, callbacks,
History, progress), and `Sequential`, the Keras-style model that inherits it.

    trainer = ggrad.train.Trainer(model)      # any nn.Module
    model = ggrad.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))   # a container that trains itself

It sits above `nn` and `optim` and below `parallel` (whose `dp_train` runs this loop).
"""
# flake8: noqa: F401  (this module re-exports)

from . import callbacks
from .callbacks import Callback, CallbackList, History, EarlyStopping, ModelCheckpoint, LearningRateScheduler
from .logs import METRICS
from .trainer import LOSSES, Trainer
from .sequential import Sequential
