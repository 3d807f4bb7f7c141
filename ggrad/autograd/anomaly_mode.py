"""Anomaly detection, as PyTorch's `detect_anomaly` / `set_detect_anomaly`: while on (and check_nan),
backward reads every gradient a node returns and raises naming the node that returned nan.

Reading each gradient computes the graph piece by piece, so this is a debugging mode. Unlike
PyTorch's, it records no forward traceback (that would cost every op a check).
"""

import contextvars
import functools

_mode = contextvars.ContextVar("ggrad_anomaly_mode", default=(False, True))   # (enabled, check_nan)


def is_anomaly_enabled():
    return _mode.get()[0]


def is_anomaly_check_nan_enabled():
    enabled, check_nan = _mode.get()
    return enabled and check_nan


class set_detect_anomaly:
    """Turn anomaly detection on or off: as a call (it stays) or as a context manager."""

    def __init__(self, mode, check_nan=True):
        self._token = _mode.set((bool(mode), bool(check_nan)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _mode.reset(self._token)


class detect_anomaly:
    """A context manager (or decorator) inside which anomaly detection is on."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._token = _mode.set((True, bool(self.check_nan)))
        return self

    def __exit__(self, *exc):
        _mode.reset(self._token)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper
