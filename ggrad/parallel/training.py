"""`dp_train`: data-parallel training through the same loop as `fit` (`ggrad.train.Trainer`).

    history = dp_train(model, optimizer, ggrad.cross_entropy, loader, devices=["cpu", "rpc:0"], epochs=3)

Only the step of a batch differs: `DataParallel.step` splits it across the devices. Epochs,
`max_steps`, callbacks, the progress bar and the returned `History` are the Trainer's.
"""

import inspect

from .. import nn
from ..train import Trainer
from .checkpoint import fit_from, read_checkpoint, restore
from .data_parallel import DataParallel, default_devices


class DataParallelTrainer(Trainer):
    """A Trainer of `dp.module` (replica 0) whose `train_step` runs one DataParallel step.

    Callbacks see replica 0 as the model and its optimizer as the trainer's: a learning rate they set
    reaches every replica at the next step. Weights they load reach replica 0 only (EarlyStopping's
    restore_best_weights runs when training has ended, so that is where it matters). The loss in
    `on_batch_end`'s logs is a float here: the step reads it anyway to average the shards.
    """

    def __init__(self, dp):
        super().__init__(dp.module)
        self.dp = dp

    def train_step(self, x, y):
        return self.dp.step(x, y, self._compiled["loss"], self._compiled["clipnorm"]), []


def dp_train(model, optimizer, loss_fn, data, *args, **kwargs):
    """Train a model data-parallel: each batch split across devices whose graphs run at once.

    dp_train(model, optimizer, loss_fn, data, devices=None, epochs=1, max_steps=None, shard_weights=None,
             max_grad_norm=None, callbacks=(), checkpoint=None, checkpoint_every=None, resume=None,
             verbose=1, bucket_mb=25.0) -> History

    Args:
        model (Module): trained in place (it is replica 0, on devices[0]; the others are copies).
        optimizer (Optimizer): over model's parameters (each other replica gets a copy).
        loss_fn: a loss name as `Trainer.compile` takes ("cross_entropy", "mse", ...) or
            `loss_fn(output, target) -> 0-d Tensor`, the mean over the shard.
        data: any iterable of (x, y) global batches (numpy arrays or Tensors), re-iterable when
            epochs > 1 (a list, a DataLoader). Batches of any size: the last one may be short.
        devices (list, optional): device names or Devices. Default: every local GPU, else the CPU.
        epochs (int): passes over data. Default: 1.
        max_steps (int, optional): stop after this many batches in all.
        shard_weights (list of float, optional): each device's share of every batch. Default: even.
        max_grad_norm (float, optional): clip the averaged gradients' joint 2-norm to this.
        callbacks (list of ggrad.train.Callback): as for `fit`.
        checkpoint (str or path, optional): write a checkpoint here (atomically) every
            `checkpoint_every` steps: weights, optimizer state, generator state, data position, step.
        checkpoint_every (int): steps between checkpoints; needed with `checkpoint`.
        resume (str or path, optional): continue from this checkpoint to the weights an uninterrupted
            run reaches, bitwise, given the same data, devices and arguments (`epochs` and `max_steps`
            count from the run's start). On other devices (a lost server left out) it continues too.
        verbose (int): 0 silent, 1 a progress bar per epoch, 2 one line per epoch. Default: 1.
        bucket_mb (float): the largest gradient bucket all-reduced between the devices, in MiB. Default: 25.

    The gradients are all-reduced on the devices, with GGML's copies between them (peer copies between
    GPUs) and adds in each replica's update graph: no host round trip (`ggrad.parallel.data_parallel`).

    Returns:
        History, as `fit` returns it ("loss" per epoch).

    The older form, on whole arrays, stays: `dp_train(model_fn, optimizer_fn, loss_fn, x, y, devices,
    epochs=1, batch_size=64, shuffle=True, verbose=1) -> (model, [loss per epoch])`, where
    `model_fn()` builds the model and `optimizer_fn(parameters)` its optimizer. The two are told apart
    by `model`: a Module, or a function building one.
    """
    if isinstance(model, nn.Module):
        return _dp_train(model, optimizer, loss_fn, data, *args, **kwargs)
    if not callable(model):
        raise TypeError(f"dp_train: model must be a Module (or a function building one), got {type(model).__name__}")
    return _dp_train_arrays(model, optimizer, loss_fn, data, *args, **kwargs)


def _dp_train(model, optimizer, loss_fn, data, devices=None, epochs=1, max_steps=None, shard_weights=None,
              max_grad_norm=None, callbacks=(), checkpoint=None, checkpoint_every=None, resume=None, verbose=1,
              bucket_mb=25.0):
    start = read_checkpoint(resume) if resume is not None else None
    if start is not None:
        restore(model, optimizer, start)    # before the replicas copy them
    dp = DataParallel(model, default_devices() if devices is None else devices, optimizer, shard_weights, bucket_mb)
    try:
        trainer = DataParallelTrainer(dp)
        trainer.compile(optimizer=optimizer, loss=loss_fn, clipnorm=max_grad_norm)
        return fit_from(trainer, data, start, epochs, max_steps, callbacks, verbose, checkpoint, checkpoint_every)
    finally:
        dp.close()


dp_train.__signature__ = inspect.signature(_dp_train)   # what help() and IDEs show: the form above


def _dp_train_arrays(model_fn, optimizer_fn, loss_fn, x, y, devices, epochs=1, batch_size=64, shuffle=True,
                     verbose=1):
    dp = DataParallel(model_fn, devices, optimizer_fn)
    try:
        trainer = DataParallelTrainer(dp)
        trainer.compile(optimizer=dp.optimizers[0], loss=loss_fn)
        history = trainer.fit(x, y, epochs=epochs, batch_size=batch_size, shuffle=shuffle, verbose=verbose)
    finally:
        dp.close()
    return dp.module, history.history["loss"]
