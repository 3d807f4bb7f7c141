"""Atomic file writes: a temporary file in the target's directory, fsynced, then renamed over the target.

An interrupted write (exception, KeyboardInterrupt, full disk) leaves the previous file intact and no
temporary file behind. The new file gets the mode a plain `open(path, "w")` would give (0o666 minus
the umask), not `mkstemp`'s 0o600.
"""

import contextlib
import os
import tempfile


def _umask():
    """The process umask, read without changing it where Linux allows (`os.umask` alone is racy)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path):
    """Yield a binary file object; on a clean exit it replaces `path` durably, on an exception nothing changes."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory):
    """Make the rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
