"""Trainer: the Keras-like loop for any Module, over arrays or any iterable of (x, y) batches."""

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim
from ggrad.train import Callback, Trainer

pytestmark = pytest.mark.usefixtures("one_thread")   # tiny graphs (see tests/conftest.py)


class TwoLayer(nn.Module):
    """Not a Sequential: the trainer knows nothing of its layers."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(2, 16)
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        return self.out(ggrad.relu(self.hidden(x)))


def _blobs(n=300, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centers = np.array([[0.0, 0.0], [3.0, 3.0], [-3.0, 3.0]], np.float32)
    return centers[y] + rng.standard_normal((n, 2)).astype(np.float32) * 0.7, y


def _weights(model):
    return [p.numpy().copy() for p in model.parameters()]


def test_trainer_fits_any_module_on_arrays():
    x, y = _blobs()
    model = TwoLayer()
    trainer = Trainer(model)
    trainer.compile(optimizer="adamw", loss="cross_entropy", metrics=["accuracy"], lr=2e-2)
    h = trainer.fit(x, y, epochs=5, batch_size=32, validation_split=0.2, verbose=0).history
    assert h["val_accuracy"][-1] > 0.9 and h["loss"][-1] < h["loss"][0]
    assert trainer.history.history is h and isinstance(trainer.optimizer, optim.AdamW)
    assert trainer.evaluate(x, y, verbose=0)["accuracy"] > 0.9
    assert trainer.predict(x[:5]).shape == (5, 3)
    assert not hasattr(model, "fit")   # the module is untouched: the trainer holds the training state


def test_batches_give_the_same_training_as_arrays():
    """fit over a list of (x, y) pairs is fit over arrays without shuffling."""
    x, y = _blobs(100)

    def train(data_as_batches):
        ggrad.manual_seed(3)
        trainer = Trainer(TwoLayer())
        trainer.compile(optimizer="sgd", loss="cross_entropy", metrics=["accuracy"], lr=0.1)
        if data_as_batches:
            batches = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 100, 32)]
            h = trainer.fit(batches, epochs=3, validation_data=(x, y), verbose=0)
        else:
            h = trainer.fit(x, y, epochs=3, batch_size=32, shuffle=False, validation_data=(x, y), verbose=0)
        return h.history, _weights(trainer.model), trainer

    h_batches, w_batches, trainer = train(True)
    h_arrays, w_arrays, _ = train(False)
    assert h_batches == h_arrays
    for a, b in zip(w_batches, w_arrays):
        np.testing.assert_array_equal(a, b)
    batches = [(ggrad.tensor(x[i:i + 50]), ggrad.tensor(y[i:i + 50].astype(np.int32))) for i in (0, 50)]
    assert trainer.evaluate(batches, verbose=0) == pytest.approx(trainer.evaluate(x, y, verbose=0), rel=1e-5)


def test_generator_max_steps_and_stop_training():
    x, y = _blobs(64)
    trainer = Trainer(TwoLayer())
    trainer.compile(loss="cross_entropy")
    sizes = []

    class Count(Callback):
        def on_batch_end(self, batch, logs=None):
            sizes.append(logs["size"])
            if len(sizes) == 5:
                self.trainer.stop_training = True

    one_pass = ((x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16))
    h = trainer.fit(one_pass, epochs=1, callbacks=[Count()], verbose=0)   # a generator: one epoch
    assert sizes == [16] * 4 and len(h.history["loss"]) == 1
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    h = trainer.fit(batches, epochs=3, callbacks=[Count()], verbose=0)   # stopped after its 5th batch overall
    assert len(sizes) == 5 and len(h.history["loss"]) == 1
    sizes.clear()
    h = trainer.fit(x, y, epochs=4, batch_size=16, max_steps=6, verbose=0)
    assert len(h.history["loss"]) == 2 and h.params["steps"] == 4
    with pytest.raises(ValueError, match="no batches in epoch 2"):
        trainer.fit(iter(batches), epochs=2, verbose=0)


def test_trainer_mixed_into_a_module_trains_itself():
    class Net(Trainer, nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(2, 3)

        def forward(self, x):
            return self.layer(x)

    x, y = _blobs(200)
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["layer.weight", "layer.bias"]
    net.compile(optimizer="adamw", loss="cross_entropy", metrics=["accuracy"], lr=5e-2)
    h = net.fit(x, y, epochs=4, verbose=0).history
    assert h["accuracy"][-1] > 0.85 and net.optimizer.param_groups[0]["params"][0] is net.layer.weight
    with pytest.raises(TypeError, match="trains itself"):
        Trainer.__init__(net, nn.Linear(1, 1))


def test_trainer_bad_input():
    with pytest.raises(TypeError, match="must be an nn.Module"):
        Trainer(lambda x: x)
    x, y = _blobs(40)
    trainer = Trainer(TwoLayer())
    trainer.compile(loss="cross_entropy")
    with pytest.raises(ValueError, match="pair"):
        trainer.fit([(x, y, y)], verbose=0)
    with pytest.raises(TypeError, match="iterable of"):
        trainer.fit(3, verbose=0)
    with pytest.raises(ValueError, match="validation_split needs arrays"):
        trainer.fit([(x, y)], validation_split=0.5, verbose=0)
    with pytest.raises(ValueError, match="y is None"):
        trainer.fit(x, verbose=0)
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        trainer.fit(x, y, max_steps=0, verbose=0)
    with pytest.raises(ValueError, match="different numbers of samples: 40 and 39"):
        trainer.fit([(x, y[:-1])], verbose=0)


@pytest.mark.parametrize("optimizer,clipnorm", [("adamw", None), ("sgd", 0.5)])
def test_fit_with_jit_compile_is_bitwise_the_eager_fit(optimizer, clipnorm):
    """compile(jit_compile=True): each batch shape is recorded, then replayed (ggrad.compile_step); the
    history (loss, accuracy, validation) and the weights are bitwise those of the eager loop, the partial
    last batch of every epoch included."""
    x, y = _blobs(203)
    runs = []
    for jit in (False, True):
        ggrad.manual_seed(0)
        model = TwoLayer()
        trainer = Trainer(model)
        trainer.compile(optimizer=optimizer, loss="cross_entropy", metrics=["accuracy"], lr=2e-2,
                        clipnorm=clipnorm, jit_compile=jit)
        before = ggrad.stats()["step_replays"]
        history = trainer.fit(x, y, epochs=3, batch_size=32, validation_split=0.2, verbose=0)
        runs.append((history.history, _weights(model), ggrad.stats()["step_replays"] - before))
    (h0, w0, r0), (h1, w1, r1) = runs
    assert h0 == h1
    for a, b in zip(w0, w1):
        np.testing.assert_array_equal(a, b)
    assert r0 == 0 and r1 >= 3 * 5 - 3
