"""ggrad.Sequential: the Keras-like compile / fit / evaluate / predict / save / load."""

import time

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim
from ggrad.train import Sequential
from ggrad.train.callbacks import Callback, EarlyStopping, LearningRateScheduler, ModelCheckpoint


pytestmark = pytest.mark.usefixtures("one_thread")   # tiny graphs (see tests/conftest.py)


def _rings(n=3000, noise=0.25, seed=0):
    """Two concentric rings (radius 1 and 2): not linearly separable, easy for a small MLP."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    r = np.where(y == 0, 1.0, 2.0) + rng.standard_normal(n) * noise
    t = rng.uniform(0, 2 * np.pi, n)
    return np.stack([r * np.cos(t), r * np.sin(t)], 1).astype(np.float32), y


def _blobs(n=600, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centers = np.array([[0.0, 0.0], [3.0, 3.0], [-3.0, 3.0]], np.float32)
    return centers[y] + rng.standard_normal((n, 2)).astype(np.float32) * 0.7, y


def _mlp(hidden=32, out=2):
    return Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, out))


def _weights(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


# ---- training -------------------------------------------------------------------------------------
def test_fit_learns_rings_to_95_percent():
    x, y = _rings()
    model = Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
    model.compile(optimizer="adamw", loss="cross_entropy", metrics=["accuracy"], lr=1e-2)
    start = time.perf_counter()
    history = model.fit(x, y, epochs=8, batch_size=64, validation_split=0.2, verbose=0)
    elapsed = time.perf_counter() - start
    h = history.history
    assert set(h) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(v) == 8 for v in h.values())
    assert h["val_accuracy"][-1] >= 0.95, h
    assert h["loss"][-1] < h["loss"][0]
    assert elapsed < 30, f"fit took {elapsed:.1f}s"
    result = model.evaluate(x[-600:], y[-600:], verbose=0)
    assert result["accuracy"] == pytest.approx(h["val_accuracy"][-1], abs=1e-6)
    assert result["loss"] == pytest.approx(h["val_loss"][-1], rel=1e-4)


def test_fit_regression_with_mse():
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (2000, 1)).astype(np.float32)
    y = (np.sin(2 * x[:, 0]) + rng.standard_normal(2000) * 0.1).astype(np.float32)   # 1-D targets
    model = Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    model.compile(optimizer="adamw", loss="mse", metrics=["mae"], lr=1e-2)
    h = model.fit(x, y, epochs=15, batch_size=64, validation_split=0.2, verbose=0).history
    assert h["val_loss"][-1] < 0.02, h["val_loss"]   # the noise floor is 0.01
    assert h["val_mae"][-1] < 0.15
    pred = model.predict(x[:100])
    assert pred.shape == (100, 1) and pred.dtype == np.float32
    np.testing.assert_allclose(pred[:, 0], np.sin(2 * x[:100, 0]), atol=0.15)


def test_each_training_batch_is_one_compute():
    x, y = _blobs(200)
    model = _mlp(out=3)
    model.compile(loss="cross_entropy", metrics=["accuracy"])
    model.fit(x, y, epochs=1, batch_size=50, verbose=0)        # warm-up (parameters realized)
    before = ggrad.stats()["computes"]
    model.fit(x, y, epochs=2, batch_size=64, shuffle=True, verbose=0)   # 4 batches, the last one partial
    assert ggrad.stats()["computes"] - before == 2 * 4   # nothing else pending: exactly one per batch


def test_last_partial_batch_is_used_and_shuffle_is_seeded():
    x, y = _blobs(70)
    seen = []

    class Sizes(Callback):
        def on_batch_end(self, batch, logs=None):
            seen.append(logs["size"])
            assert isinstance(logs["loss"], ggrad.Tensor)

    def train():
        ggrad.manual_seed(5)
        model = _mlp(out=3)
        model.compile(loss="cross_entropy", lr=1e-2)
        model.fit(x, y, epochs=2, batch_size=32, callbacks=[Sizes()], verbose=0)
        return _weights(model)

    first, second = train(), train()
    assert seen[:3] == [32, 32, 6]
    for k in first:
        np.testing.assert_array_equal(first[k], second[k])


def test_tensor_inputs_sgd_and_validation_data():
    x, y = _blobs(300)
    model = _mlp(out=3)
    model.compile(optimizer="sgd", loss="cross_entropy", metrics=["accuracy"], lr=0.1)
    assert isinstance(model.optimizer, optim.SGD) and model.optimizer.param_groups[0]["lr"] == 0.1
    h = model.fit(ggrad.tensor(x), ggrad.tensor(y), epochs=3, validation_data=(x[:100], y[:100]), verbose=0)
    assert h.history["val_accuracy"][-1] > 0.9
    assert model.predict(ggrad.tensor(x[:7])).shape == (7, 3)


def test_compile_with_optimizer_instance_callables_and_bce():
    x, y = _rings(800)
    model = Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = optim.AdamW(model.parameters(), lr=0.5)

    def mean_logit(out, target):
        return out.mean()

    model.compile(optimizer=opt, loss="bce_with_logits", metrics=["binary_accuracy", mean_logit], lr=0.02)
    assert model.optimizer is opt and opt.param_groups[0]["lr"] == 0.02
    h = model.fit(x, y.astype(np.float32), epochs=20, batch_size=64, verbose=0).history
    assert set(h) == {"loss", "binary_accuracy", "mean_logit"}
    assert h["binary_accuracy"][-1] > 0.9


def test_clipnorm_bounds_each_update_and_loss_modules_work():
    x, y = _blobs(64)
    model = _mlp(out=3)
    model.compile(optimizer="sgd", loss=nn.CrossEntropyLoss(), lr=1.0, clipnorm=1e-3)
    before = _weights(model)
    model.fit(x, y, epochs=1, batch_size=64, verbose=0)   # one step; the gradient norm is far above 1e-3
    step = np.sqrt(sum(((_weights(model)[k] - v) ** 2).sum() for k, v in before.items()))
    assert 0 < step <= 1e-3 * 1.0001


def test_verbose_progress_bar_shows_loss(capsys):
    x, y = _blobs(100)
    model = _mlp(out=3)
    model.compile(loss="cross_entropy", metrics=["accuracy"])
    model.fit(x, y, epochs=1, batch_size=25, validation_split=0.2, verbose=1)
    err = capsys.readouterr().err
    assert "Epoch 1/1" in err and "loss=" in err and "val_accuracy=" in err
    model.fit(x, y, epochs=1, verbose=2)
    assert "Epoch 1/1 - loss:" in capsys.readouterr().out
    model.fit(x, y, epochs=1, verbose=0)
    model.predict(x, verbose=0)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


# ---- callbacks --------------------------------------------------------------------------------------
class _Snapshots(Callback):
    """The weights at the end of every epoch (on the host)."""

    def __init__(self):
        super().__init__()
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append(_weights(self.model))


def test_early_stopping_restores_best_weights():
    x, y = _blobs(400)
    model = _mlp(out=3)
    model.compile(loss="cross_entropy", lr=0.05)
    snaps = _Snapshots()
    stop = EarlyStopping(monitor="val_loss", patience=2)
    # Validation labels are permuted: the better the model fits y, the worse val_loss gets.
    h = model.fit(x, y, epochs=30, batch_size=32, validation_data=(x, (y + 1) % 3), callbacks=[snaps, stop],
                  verbose=0)
    epochs_run = len(h.history["loss"])
    assert epochs_run < 30 and stop.stopped_epoch == epochs_run - 1
    best = int(np.argmin(h.history["val_loss"]))
    assert stop.best_epoch == best and stop.best == h.history["val_loss"][best]
    restored = _weights(model)
    for k, v in snaps.weights[best].items():
        np.testing.assert_array_equal(restored[k], v)
    assert not np.array_equal(restored["0.weight"], snaps.weights[-1]["0.weight"])


def test_early_stopping_on_training_loss_without_restore():
    x, y = _blobs(100)
    model = _mlp(out=3)
    model.compile(loss="cross_entropy", lr=1e-3)
    stop = EarlyStopping(monitor="loss", patience=1, min_delta=10.0, restore_best_weights=False)
    h = model.fit(x, y, epochs=10, callbacks=[stop], verbose=0)
    assert len(h.history["loss"]) == 2 and stop.best_weights is None
    with pytest.warns(RuntimeWarning, match="val_loss"):
        model.fit(x, y, epochs=1, callbacks=[EarlyStopping()], verbose=0)


def test_model_checkpoint_writes_the_file(tmp_path):
    x, y = _blobs(200)
    model = _mlp(out=3)
    model.compile(loss="cross_entropy", metrics=["accuracy"], lr=1e-2)
    every = ModelCheckpoint(tmp_path / "model-{epoch:02d}.ggrad", save_best_only=False)
    best = ModelCheckpoint(tmp_path / "best.ggrad", monitor="val_accuracy", save_best_only=True)
    model.fit(x, y, epochs=3, validation_split=0.25, callbacks=[every, best], verbose=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.ggrad", "model-01.ggrad", "model-02.ggrad",
                                                          "model-03.ggrad"]
    assert best.mode == "max" and 1 <= len(best.saved) <= 3
    last = Sequential.load(tmp_path / "model-03.ggrad")
    np.testing.assert_array_equal(last.predict(x), model.predict(x))


def test_learning_rate_scheduler_changes_lr():
    x, y = _blobs(64)
    model = _mlp(out=3)
    model.compile(optimizer="sgd", loss="cross_entropy", lr=0.1)
    seen = []

    class Record(Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(self.model.optimizer.param_groups[0]["lr"])

    h = model.fit(x, y, epochs=4, callbacks=[LearningRateScheduler(lambda epoch: 0.1 * 0.5 ** epoch), Record()],
                  verbose=0)
    assert seen == pytest.approx([0.1, 0.05, 0.025, 0.0125])
    assert h.history["lr"] == pytest.approx(seen)
    model.fit(x, y, epochs=2, callbacks=[LearningRateScheduler(lambda epoch, lr: lr * 0.1)], verbose=0)
    assert model.optimizer.param_groups[0]["lr"] == pytest.approx(0.0125 * 0.01)
    with pytest.raises(ValueError, match="invalid learning rate"):
        model.fit(x, y, epochs=1, callbacks=[LearningRateScheduler(lambda epoch: -1.0)], verbose=0)


# ---- summary, save, load ----------------------------------------------------------------------------
def test_summary():
    model = Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 3))
    before = ggrad.stats()["computes"]
    text = model.summary(print_fn=None)
    assert ggrad.stats()["computes"] == before
    assert "0 (Linear)" in text and "(None, 64)" in text and "(None, 3)" in text and "3 (Linear)" in text
    assert "Total params: 387" in text and "Trainable params: 387" in text
    assert model.training
    model[0].weight.requires_grad_(False)
    assert "Non-trainable params: 128" in model.summary(print_fn=None)
    plain = Sequential(nn.ReLU(), nn.Linear(4, 2))
    assert "?" in plain.summary(print_fn=None)
    assert "(None, 4)" in plain.summary(input_shape=(4,), print_fn=None)


def test_save_load_round_trip_resumes_training(tmp_path):
    x, y = _blobs(256)
    model = Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Dropout(0.1), nn.Linear(16, 3, bias=False),
                          nn.Softplus(), nn.Linear(3, 3))
    model.compile(optimizer="adamw", loss="cross_entropy", metrics=["accuracy"], lr=1e-2)
    model.fit(x, y, epochs=1, verbose=0)
    path = tmp_path / "m.ggrad"
    model.save(path)
    loaded = Sequential.load(path)
    assert [type(m).__name__ for m in loaded] == [type(m).__name__ for m in model]
    assert loaded[1].negative_slope == 0.2 and loaded[2].p == 0.1 and loaded[3].bias is None
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert isinstance(loaded.optimizer, optim.AdamW)
    assert loaded.optimizer.state_dict()["state"][0]["step"] == model.optimizer.state_dict()["state"][0]["step"]
    for m in (model, loaded):   # same shuffles, same dropout masks, same optimizer state: same weights
        ggrad.manual_seed(7)
        m.fit(x, y, epochs=1, verbose=0)
    a, b = _weights(model), _weights(loaded)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_save_nested_and_load_custom_layer(tmp_path):
    class Scale(nn.Module):
        def __init__(self, factor):
            super().__init__()
            self.factor = factor

        def forward(self, x):
            return x * self.factor

    model = Sequential(Sequential(nn.Linear(2, 4), nn.Tanh()), Scale(3.0), nn.Linear(4, 1))
    model.save(tmp_path / "n.ggrad")
    with pytest.raises(ValueError, match="custom_objects"):
        Sequential.load(tmp_path / "n.ggrad")
    loaded = Sequential.load(tmp_path / "n.ggrad", custom_objects={"Scale": Scale})
    assert isinstance(loaded[0], nn.Sequential) and loaded[1].factor == 3.0
    x = np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert loaded.optimizer is None


def test_keras_model_is_a_container_and_nests_plain_containers(tmp_path):
    assert ggrad.Sequential is Sequential and issubclass(Sequential, nn.Sequential)
    model = Sequential(nn.Sequential(nn.Linear(2, 4), nn.Tanh()), nn.Linear(4, 1))
    assert type(model[:1]) is Sequential and type(model + nn.Sequential(nn.ReLU())) is Sequential
    model.save(tmp_path / "c.ggrad")
    loaded = Sequential.load(tmp_path / "c.ggrad")
    assert type(loaded) is Sequential and type(loaded[0]) is nn.Sequential
    x = np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))


def test_unsavable_layer_says_why(tmp_path):
    class Opaque(nn.Module):
        def __init__(self, table):
            super().__init__()
            self._table = table

        def forward(self, x):
            return x

    model = Sequential(nn.Linear(2, 2), Opaque({"a": 1}))
    with pytest.raises(ValueError, match="get_config"):
        model.save(tmp_path / "o.ggrad")
    assert not (tmp_path / "o.ggrad").exists()


# ---- bad input ---------------------------------------------------------------------------------------
def test_bad_input():
    x, y = _blobs(50)
    model = _mlp(out=3)
    with pytest.raises(RuntimeError, match="not compiled"):
        model.fit(x, y)
    with pytest.raises(RuntimeError, match="not compiled"):
        model.evaluate(x, y)
    with pytest.raises(ValueError, match="unknown loss 'crossentropy'"):
        model.compile(loss="crossentropy")
    with pytest.raises(ValueError, match="unknown metric 'precision'"):
        model.compile(loss="cross_entropy", metrics=["precision"])
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'"):
        model.compile(optimizer="rmsprop")
    model.compile(loss="cross_entropy")
    with pytest.raises(ValueError, match="different numbers of samples: 50 and 49"):
        model.fit(x, y[:-1], verbose=0)
    with pytest.raises(ValueError, match=r"first layer is Linear\(in_features=2\)"):
        model.fit(np.ones((50, 3), np.float32), y, verbose=0)
    with pytest.raises(ValueError, match=r"first layer is Linear\(in_features=2\)"):
        model.predict(np.ones((5, 4), np.float32))
    with pytest.raises(ValueError, match=r"class indices in y must lie in \[0, 3\)"):
        model.fit(x, y + 3, verbose=0)
    with pytest.raises(ValueError, match="integer class indices"):
        model.fit(x, y + 0.5, verbose=0)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        model.fit(x, y, batch_size=0, verbose=0)
    with pytest.raises(ValueError, match="validation_split must be in"):
        model.fit(x, y, validation_split=1.5, verbose=0)
    with pytest.raises(ValueError, match="validation_data must be a pair"):
        model.fit(x, y, validation_data=x, verbose=0)
    with pytest.raises(ValueError, match="x is None"):
        model.fit(None, y, verbose=0)
    with pytest.raises(TypeError, match="Callback"):
        model.fit(x, y, callbacks=[lambda: None], verbose=0)


def test_softmax_before_cross_entropy_warns():
    model = Sequential(nn.Linear(2, 3), nn.Softmax(dim=-1))
    with pytest.warns(UserWarning, match="takes logits"):
        model.compile(loss="cross_entropy")
