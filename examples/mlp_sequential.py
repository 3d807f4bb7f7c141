"""Keras-like training with ggrad.Sequential: compile, fit, evaluate, predict, save, load.

Uses scikit-learn's bundled 8x8 digits (1,797 images, no download) when scikit-learn is installed,
and otherwise a synthetic 10-class problem of the same shape.

    python examples/mlp_sequential.py [--epochs 30] [--quick]
"""

import argparse
import os
import tempfile

import numpy as np

import ggrad
from ggrad import nn


def load_data(seed=0):
    """(x, y, name): 64 features in [0, 1], 10 classes."""
    try:
        from sklearn.datasets import load_digits
        digits = load_digits()
        return digits.data.astype(np.float32) / 16.0, digits.target.astype(np.int32), "scikit-learn digits"
    except ImportError:
        rng = np.random.default_rng(seed)
        centers = rng.uniform(0, 1, (10, 64)).astype(np.float32)
        y = rng.integers(0, 10, 1800).astype(np.int32)
        x = np.clip(centers[y] + rng.normal(0, 0.6, (1800, 64)).astype(np.float32), 0, 1)
        return x, y, "synthetic 10-class blobs (install scikit-learn for the digits)"


def main(argv=None):
    parser = argparse.ArgumentParser(description="Keras-like MLP training on 8x8 digits.")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="3 epochs, no progress bars (for tests)")
    args = parser.parse_args(argv)
    epochs, verbose = (3, 0) if args.quick else (args.epochs, 1)

    ggrad.manual_seed(0)
    x, y, name = load_data()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    test_idx, train_idx = order[:300], order[300:]
    print(f"data: {name}; {len(train_idx)} train / {len(test_idx)} test examples")

    model = ggrad.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10),            # logits: cross_entropy applies log-softmax itself
    )
    model.compile(optimizer="adamw", loss="cross_entropy", metrics=["accuracy"], lr=3e-3)
    model.summary(input_shape=(64,))
    history = model.fit(x[train_idx], y[train_idx], epochs=epochs, batch_size=64, validation_split=0.1,
                        verbose=verbose, callbacks=[ggrad.train.EarlyStopping(patience=5)])
    results = model.evaluate(x[test_idx], y[test_idx], verbose=0)
    print(f"test: {results}")
    probs = model.predict(x[test_idx[:5]])
    print("first predictions:", probs.argmax(axis=1).tolist(), "labels:", y[test_idx[:5]].tolist())

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "digits_mlp.npz")
        model.save(path)
        reloaded = ggrad.Sequential.load(path)
        same = np.allclose(reloaded.predict(x[test_idx[:5]]), probs, atol=1e-5)
        print(f"saved and reloaded: predictions identical = {same}")
    return history, results


if __name__ == "__main__":
    main()
