"""One re-entrant lock per device, held while recording into or computing the device's pending graph.

Ops of several threads interleave into one pending graph and a compute takes it whole: under the lock no
thread sees a half-built graph, and a device's scheduler and thread pool are never entered twice at once.
Devices have a lock each, so their graphs still compute at the same time (dp_train).
"""

import threading

_locks = {}   # device name -> RLock
_making = threading.Lock()


def lock_of(device):
    """The lock of `device` (made at its first use)."""
    lock = _locks.get(device.name)
    if lock is None:
        with _making:
            lock = _locks.setdefault(device.name, threading.RLock())
    return lock
