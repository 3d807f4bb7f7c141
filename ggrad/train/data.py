"""What `Trainer.fit/evaluate/predict` accept as data: arrays split into batches, or batches as given.

Arrays (numpy or Tensors, samples along the first dimension) are cut into `batch_size` batches,
shuffled with ggrad's seeded generator; anything else iterable is taken as the batches themselves,
`(x, y)` pairs, as Keras takes a dataset (a `DataLoader`, a list of pairs, a generator).
"""

import numpy as np

from ..autograd import Tensor
from ..autograd.factory import generator


def is_batches(x, y):
    """True when `x` is itself the batches: no `y`, and `x` is neither a numpy array nor a Tensor."""
    return y is None and x is not None and not isinstance(x, (np.ndarray, Tensor))


def as_numpy(a, name, op):
    if a is None:
        raise ValueError(f"{op}: {name} is None")
    if isinstance(a, Tensor):
        return a.detach().numpy()
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{op}: {name} must be a numpy array or a Tensor: {err}") from None


def check_positive_int(value, name, op, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (0 if allow_zero else 1):
        raise ValueError(f"{op}: {name} must be a {'non-negative' if allow_zero else 'positive'} int, got {value!r}")


def array_batches(x, y, batch_size, shuffle):
    """(x, y) batches of `batch_size` samples (the last one partial), in a fresh random order if `shuffle`."""
    n = len(x)
    order = generator().permutation(n) if shuffle else None
    for start in range(0, n, batch_size):
        idx = slice(start, start + batch_size) if order is None else order[start:start + batch_size]
        yield x[idx], y[idx]


def batch_count(batches):
    """How many batches an iterable holds, or None when it cannot say (a generator)."""
    try:
        return len(batches)
    except TypeError:
        return None


def pairs(batches, op):
    """The (x, y) batches of an iterable, each checked to be a pair."""
    try:
        iterator = iter(batches)
    except TypeError:
        raise TypeError(f"{op}: x must be arrays with y, or an iterable of (x, y) batches; got "
                        f"{type(batches).__name__}") from None
    for batch in iterator:
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise ValueError(f"{op}: each batch must be a pair (x, y), got {type(batch).__name__}"
                             + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""))
        yield batch[0], batch[1]
