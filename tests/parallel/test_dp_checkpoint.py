"""Checkpoint and resume: 10 steps + resume 10 reach the weights of 20 straight steps, bitwise, with a loader
that shuffles with ggrad's generator and a model that draws dropout masks from it."""

import numpy as np
import pytest

import ggrad
from ggrad.autograd.factory import generator
from ggrad import nn, optim
from ggrad.parallel import dp_train, fit_resumable, read_checkpoint
from ggrad.train import Callback, Trainer
from ggrad.utils.data import DataLoader, TensorDataset


class ShuffledBatches:
    """Batches of (x, y) in a fresh order each pass, drawn from ggrad's generator (as a DataLoader would)."""

    def __init__(self, x, y, batch_size):
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return -(-len(self.x) // self.batch_size)

    def __iter__(self):
        order = generator().permutation(len(self.x))
        for start in range(0, len(self.x), self.batch_size):
            idx = order[start:start + self.batch_size]
            yield self.x[idx], self.y[idx]


def loader(x, y, batch_size):
    """ggrad's DataLoader, shuffling (a seed drawn from ggrad's generator each pass), batches of Tensors."""
    return DataLoader(TensorDataset(ggrad.tensor(x), ggrad.tensor(y)), batch_size=batch_size, shuffle=True)


def seeded_loader(x, y, batch_size):
    """A DataLoader shuffling with a Generator of its own: checkpoints save its state beside ggrad's."""
    return DataLoader(TensorDataset(ggrad.tensor(x), ggrad.tensor(y)), batch_size=batch_size, shuffle=True,
                      generator=ggrad.Generator().manual_seed(5))


def _data(kind=ShuffledBatches):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((56, 6)).astype(np.float32)   # 7 batches of 8 a pass
    return kind(x, x[:, :3].argmax(1).astype(np.int32), 8)


def _model(seed):
    ggrad.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 3))
    return model, optim.AdamW(model.parameters(), lr=1e-2)


def _run(seed, data=ShuffledBatches, **kwargs):
    model, opt = _model(seed)
    dp_train(model, opt, "cross_entropy", _data(data), devices=["cpu"], epochs=5, verbose=0, **kwargs)
    return [p.numpy() for p in model.parameters()]


@pytest.mark.parametrize("data", [ShuffledBatches, loader, seeded_loader])
def test_resume_reaches_the_uninterrupted_weights_bitwise(tmp_path, data):
    path = tmp_path / "run.ckpt"
    straight = _run(0, max_steps=20, data=data)
    _run(0, max_steps=10, checkpoint=path, checkpoint_every=4, data=data)
    state = read_checkpoint(path)
    assert (state["step"], state["epoch"], state["batch"]) == (10, 1, 3)
    ggrad.manual_seed(123)   # the generator moves on meanwhile; resume restores it
    resumed = _run(7, max_steps=20, resume=path, data=data)  # another initialisation: resume loads the weights
    assert all(np.array_equal(a, b) for a, b in zip(straight, resumed))
    assert not all(np.array_equal(a, b) for a, b in zip(straight, _run(0, max_steps=19, data=data)))


class Crash(Callback):
    """Fails the run when it reaches step `at` (counted from the run's start)."""

    def __init__(self, at):
        super().__init__()
        self.at, self.steps = at, 0

    def on_batch_begin(self, batch, logs=None):
        self.steps += 1
        if self.steps == self.at:
            raise RuntimeError("crash")


class UnsizedBatches(ShuffledBatches):
    __len__ = None   # len() raises TypeError: the loop cannot tell where an epoch ends


@pytest.mark.parametrize("data", [ShuffledBatches, UnsizedBatches])
def test_checkpoint_at_an_epoch_end_resumes_at_the_next_epoch(tmp_path, data):
    """7 batches a pass, a checkpoint every 7 steps: step 7 ends epoch 0, so resuming starts epoch 1."""
    path = tmp_path / "run.ckpt"
    straight = _run(0, max_steps=16)
    with pytest.raises(RuntimeError, match="crash"):
        _run(0, max_steps=16, checkpoint=path, checkpoint_every=7, callbacks=[Crash(at=10)], data=data)
    state = read_checkpoint(path)
    assert (state["step"], state["epoch"], state["batch"]) == (7, 1, 0)
    assert all(np.array_equal(a, b) for a, b in zip(straight, _run(3, max_steps=16, resume=path, data=data)))


def test_resume_from_a_finished_run_trains_no_further_or_continues(tmp_path):
    """A run that ends after a whole epoch (7 steps) checkpoints (epoch 0, 7 batches consumed) at its end."""
    path = tmp_path / "run.ckpt"
    done = _run(0, max_steps=7, checkpoint=path, checkpoint_every=100)
    assert tuple(read_checkpoint(path)[k] for k in ("step", "epoch", "batch")) == (7, 0, 7)
    assert all(np.array_equal(a, b) for a, b in zip(done, _run(1, max_steps=7, resume=path)))
    straight = _run(0, max_steps=16)
    assert all(np.array_equal(a, b) for a, b in zip(straight, _run(1, max_steps=16, resume=path)))


def test_fit_resumable_for_a_plain_trainer(tmp_path):
    path = tmp_path / "run.ckpt"

    def trainer(seed):
        model, opt = _model(seed)
        t = Trainer(model)
        t.compile(optimizer=opt, loss="cross_entropy")
        return t

    a = trainer(0)
    fit_resumable(a, _data(), epochs=2, verbose=0)
    b = trainer(0)
    fit_resumable(b, _data(), epochs=2, max_steps=9, checkpoint=path, checkpoint_every=9, verbose=0)
    c = trainer(5)
    fit_resumable(c, _data(), epochs=2, resume=path, verbose=0)
    assert all(np.array_equal(p.numpy(), q.numpy()) for p, q in zip(a.model.parameters(), c.model.parameters()))


def test_checkpoint_arguments_are_checked(tmp_path):
    model, opt = _model(0)
    with pytest.raises(ValueError, match="checkpoint_every"):
        dp_train(model, opt, "cross_entropy", _data(), devices=["cpu"], checkpoint=tmp_path / "c", verbose=0)
    with pytest.raises(ValueError, match="needs checkpoint="):
        dp_train(model, opt, "cross_entropy", _data(), devices=["cpu"], checkpoint_every=3, verbose=0)
    ggrad.save(model.state_dict(), tmp_path / "weights")
    with pytest.raises(ValueError, match="not a training checkpoint"):
        dp_train(model, opt, "cross_entropy", _data(), devices=["cpu"], resume=tmp_path / "weights", verbose=0)
