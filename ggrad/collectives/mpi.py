"""The MPI layer under ggrad.distributed: mpi4py imported lazily, an all-reduce that notices a lost rank.

mpi4py and an MPI (the `mpich` wheel) are an optional extra: `pip install -e ".[mpi]"`. Nothing
imports them until a distributed function runs, so ggrad works without them.

A dead rank: MPICH's `mpiexec` ends every rank at once when one dies (its default, "auto-cleanup");
run `mpiexec -disable-auto-cleanup -n N ...` to let the survivors report it. They do: each all-reduce
is non-blocking and polled against a deadline; when it has not completed within `timeout` seconds
(or MPI reports an error), every surviving rank raises `RankLostError` naming the ranks whose
processes are gone (peers on this host are checked by pid; others are named as not answering).
MPI cannot finalize with a lost peer (MPI_Finalize would wait for it forever), so after a lost rank
the process skips MPI_Finalize at exit. That needs mpi4py to be imported here first (ggrad sets
`mpi4py.rc.finalize = False` and finalizes itself at exit when no rank was lost).
"""

import atexit
import os
import socket
import sys
import time
import zlib

import numpy as np


class RankLostError(RuntimeError):
    """A rank of the distributed run died or stopped answering; this rank cannot go on with it."""


_state = {"MPI": None, "lost": False, "peers": {}}


def mpi():
    """The `mpi4py.MPI` module (imported on first use); ImportError saying how to install it when absent."""
    if _state["MPI"] is None:
        try:
            import mpi4py
        except ImportError:
            raise ImportError('ggrad.distributed needs mpi4py and an MPI: pip install "ggrad[mpi]" (mpi4py and '
                              "the mpich wheel), then run the script with mpiexec -n N python script.py") from None
        if "mpi4py.MPI" not in sys.modules:
            mpi4py.rc.finalize = False    # finalized by _finalize below, unless a rank was lost
            atexit.register(_finalize)
        from mpi4py import MPI
        _state["MPI"] = MPI
    return _state["MPI"]


def available():
    """True when mpi4py and its MPI library can be loaded."""
    try:
        mpi()
    except (ImportError, RuntimeError, OSError):
        return False
    return True


def _finalize():
    MPI = _state["MPI"]
    if MPI is not None and not _state["lost"] and MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.Finalize()


def world():
    """The communicator of every rank (MPI.COMM_WORLD), errors returned as exceptions."""
    comm = mpi().COMM_WORLD
    comm.Set_errhandler(mpi().ERRORS_RETURN)
    return comm


def _peers(comm, timeout):
    """(host hash, pid) of every rank of `comm`, gathered on its first collective (all ranks alive then)."""
    key = comm.py2f()
    if key not in _state["peers"]:
        MPI = mpi()
        mine = np.array([zlib.crc32(socket.gethostname().encode()), os.getpid()], np.int64)
        table = np.zeros((comm.size, 2), np.int64)
        request = comm.Iallgather(mine, table)
        deadline = time.monotonic() + timeout
        while not request.Test():
            if time.monotonic() > deadline:
                _state["lost"] = True
                raise RankLostError(f"ggrad.distributed: rank {comm.rank} of {comm.size}: not every rank joined "
                                    f"within {timeout:g} s (did one fail to start?)")
            time.sleep(1e-3)
        _state["peers"][key] = [(int(h), int(pid)) for h, pid in table]
    return _state["peers"][key]


def _alive(pid):
    """Whether process `pid` on this host still runs (an exited rank its launcher has not reaped yet is a
    zombie: signal 0 still reaches it, /proc says Z)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _lost(comm, what, timeout, error=None):
    """A RankLostError for `what` (which did not complete), naming the ranks that are gone."""
    _state["lost"] = True
    host = zlib.crc32(socket.gethostname().encode())
    peers = _peers(comm, timeout)
    dead = [r for r, (h, pid) in enumerate(peers) if h == host and r != comm.rank and not _alive(pid)]
    remote = [r for r, (h, _) in enumerate(peers) if h != host]
    if dead:
        who = ", ".join(f"rank {r} (pid {peers[r][1]})" for r in dead) + " exited"
    elif remote:
        who = f"no answer from ranks on other hosts ({', '.join(map(str, remote))})"
    else:
        who = "a rank stopped answering"
    cause = f"MPI error: {error}" if error is not None else f"not completed within {timeout:g} s"
    return RankLostError(f"ggrad.distributed: rank {comm.rank} of {comm.size}: {who}; {what}: {cause}. The run "
                         "cannot continue; resume it from its last checkpoint (resume=)")


def _wait(comm, start, timeout, what):
    """Start non-blocking operations (`start()` -> requests) and wait for them; RankLostError on a lost rank."""
    MPI = mpi()
    _peers(comm, timeout)
    try:
        requests = start()
        deadline = time.monotonic() + timeout
        pause = 1e-5
        while not MPI.Request.Testall(requests):
            if time.monotonic() > deadline:
                raise _lost(comm, what, timeout)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
    except MPI.Exception as e:
        raise _lost(comm, what, timeout, e) from e


def allreduce_sum(comm, arrays, timeout, what="gradient all-reduce"):
    """Sum each array across every rank, in place, all at once (MPI pipelines them)."""
    MPI = mpi()
    _wait(comm, lambda: [comm.Iallreduce(MPI.IN_PLACE, a, op=MPI.SUM) for a in arrays], timeout, what)
    return arrays


def reduce_in_place(comm, array, op, timeout, what):
    """Combine the contiguous `array` across every rank with the MPI operation `op`, in place."""
    _wait(comm, lambda: [comm.Iallreduce(mpi().IN_PLACE, array, op=op)], timeout, what)
    return array


def gather_all(comm, array, table, timeout, what):
    """table[r] = rank r's `array` on every rank (table: (comm.size, array.size), contiguous)."""
    _wait(comm, lambda: [comm.Iallgather(array, table)], timeout, what)
    return table


def barrier(comm, timeout):
    """Return once every rank has reached its barrier."""
    _wait(comm, lambda: [comm.Ibarrier()], timeout, "barrier")


def check_same_size(comm, size, timeout, what):
    """RuntimeError on every rank unless every rank passes the same `size` (one small all-reduce): a
    collective over arrays of different sizes would fail inside MPI, or hang."""
    MPI = mpi()
    bounds = np.array([size, -size], np.int64)
    _wait(comm, lambda: [comm.Iallreduce(MPI.IN_PLACE, bounds, op=MPI.MAX)], timeout, what)
    if bounds[0] != -bounds[1]:
        raise size_mismatch(what, comm.rank, size, -bounds[1], bounds[0])


def size_mismatch(what, rank, size, low, high):
    """The RuntimeError for ranks whose buckets differ in size (from `low` to `high` elements)."""
    return RuntimeError(f"{what}: the ranks' buckets differ in size (rank {rank}: {size}; all ranks: {low} to "
                        f"{high}): every rank must compute gradients for the same parameters")


def broadcast_arrays(comm, arrays, timeout, what, root=0):
    """Overwrite each contiguous array with rank `root`'s (every rank passes arrays of the same shapes)."""
    _wait(comm, lambda: [comm.Ibcast(a, root=root) for a in arrays], timeout, what)
    return arrays


def broadcast_bytes(comm, data, timeout, what):
    """Rank 0's `data` (bytes; ignored elsewhere) on every rank."""
    size = np.array([len(data) if comm.rank == 0 else 0], np.int64)
    broadcast_arrays(comm, [size], timeout, what)
    buf = np.frombuffer(bytearray(data), np.uint8) if comm.rank == 0 else np.empty(int(size[0]), np.uint8)
    broadcast_arrays(comm, [buf], timeout, what)
    return buf.tobytes()


class MPITransport:
    """ggrad.collectives' operations over an MPI communicator, each bounded by `timeout` seconds (the
    interface sockets.SocketTransport has too: reductions named "sum", "prod", "min", "max", "band",
    "bor", "bxor", "lor", "land", "lxor")."""

    def __init__(self, comm, timeout):
        self.comm, self.timeout, self.rank, self.size = comm, timeout, comm.rank, comm.size

    def reduce(self, array, op, what):
        MPI = mpi()
        operation = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX, "band": MPI.BAND,
                     "bor": MPI.BOR, "bxor": MPI.BXOR, "lor": MPI.LOR, "land": MPI.LAND, "lxor": MPI.LXOR}[op]
        return reduce_in_place(self.comm, array, operation, self.timeout, what)

    def sum_arrays(self, arrays, what):
        return allreduce_sum(self.comm, arrays, self.timeout, what)

    def gather(self, array, table, what):
        return gather_all(self.comm, array, table, self.timeout, what)

    def broadcast(self, arrays, root, what):
        return broadcast_arrays(self.comm, arrays, self.timeout, what, root=root)

    def barrier(self):
        barrier(self.comm, self.timeout)

    def check_same_size(self, size, what):
        check_same_size(self.comm, size, self.timeout, what)

    def close(self):
        """MPI stays up until exit (a later init_process_group joins COMM_WORLD again)."""
