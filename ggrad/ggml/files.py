"""Atomic file writes: a temporary file in the target's directory, fsynced, then renamed over the target.

An interrupted write (exception, KeyboardInterrupt, full disk) leaves the previous file intact and no
temporary file behind. A writer killed outright (kill -9, power loss) cannot clean up: its temporary file,
named `.<target>.<pid>.<random>.tmp`, is removed by the next write of the same target once no process of
that pid is alive (a writer on another machine sharing the directory is not seen). Nothing else in the
directory is touched. The new file gets the mode a plain `open(path, "w")` would give (0o666 minus the
umask), not `mkstemp`'s 0o600.
"""

import contextlib
import os
import re
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
    prefix = "." + os.path.basename(path) + "."
    _remove_stale(directory, prefix)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{prefix}{os.getpid()}.", suffix=".tmp")
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


def _remove_stale(directory, prefix):
    """Remove the temporary files that killed writes of one target left in `directory`: those named
    `<prefix><pid>.<mkstemp's 8 characters>.tmp` whose process is gone (POSIX only: elsewhere none is)."""
    if os.name != "posix":
        return
    pattern = re.compile(re.escape(prefix) + r"([0-9]+)\.[a-z0-9_]{8}\.tmp")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is not None and not _alive(int(match.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def _alive(pid):
    """Whether a process `pid` exists (one of another user's counts; pid 0, the caller's group, counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


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
