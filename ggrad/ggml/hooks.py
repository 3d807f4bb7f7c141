"""Callbacks from C: abort, log and the scheduler's per-node eval callback.

Python exceptions never cross into C: a callback stores what it raised and `raise_pending()` re-raises
it once control is back in Python.
"""

import contextlib
import os
import sys

from ._lib import ffi, lib

_state = {"op": None, "pending": None, "eval": None, "log_level": lib.GGML_LOG_LEVEL_WARN, "capture": None}


def set_current_op(name):
    """Remember which op is being built, so that an abort can say where it came from."""
    _state["op"] = name


@ffi.def_extern()
def ggrad_abort_callback(message):
    text = ffi.string(message).decode(errors="replace") if message != ffi.NULL else "(no message)"
    where = f" while building/computing op {_state['op']!r}" if _state["op"] else ""
    sys.stderr.write(f"\nggrad: GGML aborted the process{where}: {text}\n"
                     "ggrad: this input should have been rejected in Python; please report it.\n")
    sys.stderr.flush()


@ffi.def_extern()
def ggrad_log_callback(level, text, user_data):
    capture = _state["capture"]
    if capture is not None and level >= lib.GGML_LOG_LEVEL_ERROR and text != ffi.NULL:
        capture.append(ffi.string(text).decode(errors="replace").strip())
        return
    if level >= _state["log_level"] and level != lib.GGML_LOG_LEVEL_CONT and text != ffi.NULL:
        sys.stderr.write(ffi.string(text).decode(errors="replace"))


@ffi.def_extern()
def ggrad_eval_callback(tensor, ask, user_data):
    fn = _state["eval"]
    if fn is None or _state["pending"] is not None:
        return True
    try:
        return bool(fn(tensor, bool(ask)))
    except BaseException as exc:  # stored, re-raised in Python after compute
        _state["pending"] = exc
        return False


@contextlib.contextmanager
def eval_callback(scheduler, fn):
    """Install `fn(tensor_ptr, ask) -> bool` as the scheduler's eval callback for the duration."""
    if fn is None:
        yield
        return
    _state["eval"] = fn
    lib.ggml_backend_sched_set_eval_callback(scheduler.ptr, lib.ggrad_eval_callback, ffi.NULL)
    try:
        yield
    finally:
        lib.ggml_backend_sched_set_eval_callback(scheduler.ptr, ffi.NULL, ffi.NULL)
        _state["eval"] = None


@contextlib.contextmanager
def capture_errors():
    """Collect GGML's error log lines (a list) instead of printing them, e.g. to put them in an exception."""
    lines, previous = [], _state["capture"]
    _state["capture"] = lines
    try:
        yield lines
    finally:
        _state["capture"] = previous


def store_exception(exc):
    """Keep the first exception a C callback raised, for `raise_pending()`."""
    if _state["pending"] is None:
        _state["pending"] = exc


def raise_pending():
    exc, _state["pending"] = _state["pending"], None
    if exc is not None:
        raise exc


def set_log_level(level):
    """Show GGML log lines at or above `level` ("debug", "info", "warn", "error", "none")."""
    levels = {"debug": lib.GGML_LOG_LEVEL_DEBUG, "info": lib.GGML_LOG_LEVEL_INFO,
              "warn": lib.GGML_LOG_LEVEL_WARN, "error": lib.GGML_LOG_LEVEL_ERROR, "none": 1 << 30}
    if level not in levels:
        raise ValueError(f"set_log_level: expected one of {sorted(levels)}, got {level!r}")
    _state["log_level"] = levels[level]


def install():
    lib.ggml_set_abort_callback(lib.ggrad_abort_callback)
    lib.ggml_log_set(lib.ggrad_log_callback, ffi.NULL)
    set_log_level(os.environ.get("GGRAD_LOG_LEVEL", "warn"))
