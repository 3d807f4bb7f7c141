"""Checkpoints of a training run, and resuming one to the same weights as an uninterrupted run.

    fit_resumable(trainer, loader, epochs=3, checkpoint="run.ckpt", checkpoint_every=100)
    fit_resumable(trainer, loader, epochs=3, resume="run.ckpt")       # after a crash: the same result

A checkpoint is one `ggrad.save` file (written atomically: a crash mid-write keeps the previous one)
holding the model's and the optimizer's state dicts, the step count, the data position (the epoch and
how many of its batches were consumed) and the state of ggrad's generator twice: now, and at the start
of that epoch (and likewise the data's own generator, a DataLoader's `generator=`, where it has one). Resuming loads the weights and the optimizer state, then replays the epoch's consumed
batches from the epoch-start generator state without training on them (so a loader that shuffles with
ggrad's generator draws the same order again, and a plain iterable skips what was consumed), then sets
the generator to its saved state: from there the run draws and computes what the uninterrupted run did.
Callbacks' own state (a scheduler's counters) is not saved; the optimizer's learning rate is.
"""

import copy

from ..autograd.factory import generator
from ..autograd.generator import Generator
from ..serialization import load, save
from ..train import Callback, History
from ..train.data import batch_count, check_positive_int

FORMAT = "ggrad.checkpoint"
_END = object()


def own_generator(data):
    """The data's own ggrad.Generator (a DataLoader's `generator=`), else None: its draws are saved too."""
    own = getattr(data, "generator", None)
    return own if isinstance(own, Generator) else None


def rng_state(own=None):
    """Copies of the states of ggrad's generator and of `own` (None, or the data's own generator): numpy
    bit_generator states, plain ints and strings."""
    return (copy.deepcopy(generator().bit_generator.state),
            None if own is None else copy.deepcopy(own.numpy.bit_generator.state))


def set_rng_state(state, own=None):
    generator().bit_generator.state = state[0]
    if own is not None and state[1] is not None:
        own.numpy.bit_generator.state = state[1]


def _states(checkpoint):
    """(now, at the epoch's start): the rng_state pairs a checkpoint holds."""
    return ((checkpoint["rng"], checkpoint.get("data_rng")),
            (checkpoint["epoch_rng"], checkpoint.get("data_epoch_rng")))


def write_checkpoint(path, model, optimizer, step, epoch, batch, epoch_rng, own=None):
    """Save what resuming needs after `step` steps, `batch` batches into epoch `epoch` (`epoch_rng`: the
    rng_state at the epoch's start; `own`: the data's own generator or None)."""
    now = rng_state(own)
    state = {"format": FORMAT, "step": step, "epoch": epoch, "batch": batch, "rng": now[0],
             "epoch_rng": epoch_rng[0], "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    if own is not None:
        state.update(data_rng=now[1], data_epoch_rng=epoch_rng[1])
    save(state, path)


def read_checkpoint(path):
    """The checkpoint at `path` as a dict; ValueError, naming the path, when it is not one."""
    state = load(path)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"resume: {path} is a ggrad.save file but not a training checkpoint (written by "
                         "checkpoint=); to load weights only, use model.load_state_dict(ggrad.load(path))")
    return state


def restore(model, optimizer, state):
    """Load a checkpoint's weights into `model` and its optimizer state into `optimizer`."""
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])


class Resumed:
    """`data` whose first pass starts where a checkpoint stopped (later passes are `data`'s own).

    The first pass sets the generator to the epoch-start state, consumes the `skip` batches the
    checkpoint had consumed, sets the generator to the checkpoint's state and yields the rest.
    """

    def __init__(self, data, skip, epoch_rng, rng):
        self.data = data
        self.generator = own_generator(data)
        self._first = (skip, epoch_rng, rng)

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        if self._first is None:
            yield from self.data
            return
        skip, epoch_rng, rng = self._first
        self._first = None
        set_rng_state(epoch_rng, self.generator)
        batches = iter(self.data)
        for consumed in range(skip):
            if next(batches, _END) is _END:
                raise ValueError(f"resume: the data gave {consumed} batches, but the checkpoint had consumed "
                                 f"{skip} of this epoch: pass the same data as the interrupted run")
        set_rng_state(rng, self.generator)
        yield from batches


class CheckpointEvery(Callback):
    """Writes a checkpoint every `every` steps, at the end of an epoch that ends on one, and at the end.

    `start` is the checkpoint resumed from (its step count and position carry on); `write=False`
    only tracks the position (the ranks of a distributed run other than 0).
    """

    def __init__(self, path, every, optimizer, start=None, max_steps=None, write=True, own=None):
        super().__init__()
        self.path, self.every, self.optimizer, self.write, self.own = path, every, optimizer, write, own
        self.max_steps = max_steps
        self.step = start["step"] if start else 0
        self._start = start
        self._written = None
        self.epoch, self.offset, self.consumed, self.epoch_rng = 0, 0, 0, None

    def _save(self, epoch, batch, epoch_rng):
        if self.write:
            write_checkpoint(self.path, self.model, self.optimizer, self.step, epoch, batch, epoch_rng, self.own)
        self._written = self.step

    def on_epoch_begin(self, epoch, logs=None):
        if self._start is not None and epoch == self._start["epoch"]:
            self.epoch_rng, self.offset = _states(self._start)[1], self._start["batch"]
        else:
            self.epoch_rng, self.offset = rng_state(self.own), 0
        self._start = None
        self.epoch, self.consumed = epoch, self.offset

    def on_batch_end(self, batch, logs=None):
        self.step += 1
        self.consumed = self.offset + batch + 1
        if self.step % self.every == 0:
            self._save(self.epoch, self.consumed, self.epoch_rng)

    def on_epoch_end(self, epoch, logs=None):
        # a checkpoint at an epoch's last batch points at the next epoch's start (resuming at (epoch, all
        # consumed) would give fit an empty epoch); an epoch cut short by max_steps or a stop is not over
        if self._written == self.step and not self.trainer.stop_training and self.step != self.max_steps:
            self._save(epoch + 1, 0, rng_state(self.own))

    def on_train_end(self, logs=None):
        if self._written != self.step:
            self._save(self.epoch, self.consumed, self.epoch_rng)


def fit_resumable(trainer, data, epochs=1, max_steps=None, callbacks=(), verbose=1, checkpoint=None,
                  checkpoint_every=None, resume=None, write=True):
    """`trainer.fit(data, ...)` (a compiled Trainer, an iterable of (x, y) batches) with checkpoints.

    Args:
        checkpoint (str or path, optional): where to write checkpoints (atomically, overwriting).
        checkpoint_every (int): write one every this many steps (also when an epoch ends on one, and
            at the end of training). Needed with `checkpoint`.
        resume (str or path, optional): a checkpoint to continue from: its weights and optimizer state
            are loaded into trainer's model and optimizer, and training continues at its step and
            data position (`epochs` and `max_steps` count from the run's start, as if uninterrupted).
        write (bool): False to track the position without writing (a distributed run's other ranks).

    Returns:
        History of this call's epochs (the first resumed epoch's "loss" averages its remaining batches).
    """
    start = read_checkpoint(resume) if resume is not None else None
    if start is not None:
        restore(trainer._net(), trainer.optimizer, start)
    return fit_from(trainer, data, start, epochs, max_steps, callbacks, verbose, checkpoint, checkpoint_every,
                    write)


def fit_from(trainer, data, start, epochs=1, max_steps=None, callbacks=(), verbose=1, checkpoint=None,
             checkpoint_every=None, write=True):
    """`fit_resumable` once the checkpoint `start` (or None) is read and restored."""
    if checkpoint is not None:
        check_positive_int(checkpoint_every, "checkpoint_every", "checkpoint")
    elif checkpoint_every is not None:
        raise ValueError("checkpoint_every needs checkpoint= (the path to write to)")
    callbacks = list(callbacks)
    initial_epoch, remaining = 0, max_steps
    if start is not None:
        n_batches = batch_count(data)
        if n_batches is not None and start["batch"] >= n_batches:    # written at an epoch's last batch
            start = dict(start, epoch=start["epoch"] + 1, batch=0, epoch_rng=start["rng"],
                         data_epoch_rng=start.get("data_rng"))
        initial_epoch = start["epoch"]
        now, at_epoch_start = _states(start)
        data = Resumed(data, start["batch"], at_epoch_start, now)
        if max_steps is not None:
            remaining = max_steps - start["step"]
    if checkpoint is not None:
        callbacks.append(CheckpointEvery(checkpoint, checkpoint_every, trainer.optimizer, start, max_steps, write,
                                         own_generator(data)))
    if initial_epoch >= epochs or (remaining is not None and remaining <= 0):
        return History()   # the checkpoint is already at the end of this run
    return trainer.fit(data, epochs=epochs, max_steps=remaining, callbacks=callbacks, verbose=verbose,
                       initial_epoch=initial_epoch)
