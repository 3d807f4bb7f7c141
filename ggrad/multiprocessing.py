"""`ggrad.multiprocessing`: PyTorch's torch.multiprocessing: Python's multiprocessing with `spawn`.

`spawn(fn, args, nprocs)` is how PyTorch's DDP tutorials start their ranks: each process runs
`fn(i, *args)`; they set MASTER_ADDR / MASTER_PORT and call `init_process_group(rank=i, world_size=n)`,
which meets the others over TCP (ggrad.collectives.group). When one process fails, the others are
stopped and the parent raises ProcessRaisedException (with the child's traceback) or
ProcessExitedException (an exit code or signal), as PyTorch's. Tensors cross processes by pickling
(a copy of their values): GGML's buffers are not shared memory, so the sharing strategies are names only.
"""

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback
from multiprocessing import *  # noqa: F401,F403  (torch.multiprocessing re-exports them)

_STRATEGIES = {"file_descriptor", "file_system"}
_state = {"strategy": "file_descriptor"}


def set_sharing_strategy(new_strategy):
    """Accepted for PyTorch's names; tensors are pickled copies here whatever the strategy."""
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"sharing strategy {new_strategy!r} is not one of {sorted(_STRATEGIES)}")
    _state["strategy"] = new_strategy


def get_sharing_strategy():
    return _state["strategy"]


def get_all_sharing_strategies():
    return set(_STRATEGIES)


class ProcessException(Exception):
    """A spawned process failed (PyTorch's torch.multiprocessing.ProcessException)."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A spawned process raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a nonzero code or was killed by a signal."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_file):
    """A spawned process's entry: fn(i, *args); an exception's traceback goes to `error_file`, exit 1."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass   # stopped by the parent
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes `start_processes` started; `join()` waits for them (PyTorch's ProcessContext)."""

    def __init__(self, processes, error_files):
        self.processes, self.error_files = processes, error_files

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        """Wait up to `timeout` seconds (None: until done); True once every process has exited. The first
        failure stops the others and raises ProcessRaisedException or ProcessExitedException."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            failed = next((i for i, p in enumerate(self.processes) if p.exitcode not in (None, 0)), None)
            if failed is not None:
                self._stop()
                raise self._failure(failed)
            if all(p.exitcode == 0 for p in self.processes):
                self._remove_files()
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            multiprocessing.connection.wait([p.sentinel for p in self.processes if p.exitcode is None], 0.1)

    def _stop(self):
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        for p in self.processes:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()

    def _failure(self, index):
        process, path = self.processes[index], self.error_files[index]
        code = process.exitcode
        trace = ""
        if os.path.exists(path):
            with open(path) as f:
                trace = f.read()
        self._remove_files()
        if trace:
            return ProcessRaisedException(f"\n\n-- Process {index:d} terminated with the following error:\n{trace}",
                                          index, process.pid)
        if code < 0:
            name = signal.Signals(-code).name
            return ProcessExitedException(f"process {index:d} terminated with signal {name}", index, process.pid,
                                          code, name)
        return ProcessExitedException(f"process {index:d} terminated with exit code {code:d}", index, process.pid,
                                      code)

    def _remove_files(self):
        for path in self.error_files:
            if os.path.exists(path):
                os.unlink(path)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start `nprocs` processes running fn(i, *args) with the multiprocessing start method `start_method`;
    wait for them when `join` (None), else return their ProcessContext."""
    context = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        handle, path = tempfile.mkstemp(prefix="ggrad-spawn-", suffix=".err")
        os.close(handle)
        os.unlink(path)   # written by the child only when fn raises
        process = context.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
        process.start()
        processes.append(process)
        error_files.append(path)
    spawned = ProcessContext(processes, error_files)
    if not join:
        return spawned
    while not spawned.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start `nprocs` processes running fn(i, *args) (PyTorch's torch.multiprocessing.spawn); see
    start_processes."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
