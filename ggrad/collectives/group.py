"""The default process group of torch.distributed's surface: every rank of the MPI run.

ggrad's ranks are MPI processes, so MPI is the rendezvous whatever the backend is called ("gloo",
"nccl" and "mpi" are accepted and all mean MPI). `init_process_group` honours:
  - `mpiexec -n N python train.py` (any MPI launcher): rank and world size are MPI's; torchrun's
    RANK / WORLD_SIZE, and `rank=` / `world_size=`, may be given too and must agree with them.
  - one process without a launcher, where RANK / WORLD_SIZE (or the arguments) say a world of 1.
It refuses a world of N > 1 processes that MPI did not start (torchrun's own rendezvous over
MASTER_ADDR / MASTER_PORT): those processes cannot reach each other over MPI; it says to use mpiexec.
LOCAL_RANK, MASTER_ADDR and MASTER_PORT are not needed and not read.
"""

import datetime
import os

from . import mpi

NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)   # PyTorch's default_pg_timeout
_MPI_LAUNCHED = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


class Backend(str):
    """A backend name as PyTorch's `torch.distributed.Backend` (a lowercase str); every one runs on MPI."""

    UNDEFINED, GLOO, NCCL, MPI = "undefined", "gloo", "nccl", "mpi"
    _NAMES = ("gloo", "nccl", "mpi")

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, got {type(name).__name__}")
        value = name.lower()
        # PyTorch's device:backend form ("cpu:gloo,cuda:nccl") names a backend per device: each must be known
        names = [part.split(":")[-1] for part in value.split(",")]
        if not all(n in cls._NAMES for n in names):
            raise AssertionError(f"Unknown backend type {name}")   # PyTorch's error type and words
        return str.__new__(cls, value)


class ProcessGroup:
    """Every rank of the run (MPI's COMM_WORLD), with the backend it was created for and its timeout.

    `timeout` (seconds) bounds each collective: a rank that does not join in time is reported by a
    RankLostError (ggrad.distributed), as a lost rank.
    """

    def __init__(self, comm, backend, timeout):
        self.comm, self.backend, self.timeout = comm, backend, timeout

    def rank(self):
        return self.comm.rank

    def size(self):
        return self.comm.size

    def name(self):
        return str(self.backend)

    def __repr__(self):
        return f"ProcessGroup(backend={self.backend!r}, rank={self.rank()}, size={self.size()})"


class _World:
    """`torch.distributed.group.WORLD`: stands for the default group wherever a group is accepted."""

    def __repr__(self):
        return "group.WORLD"


class group:  # noqa: N801  (PyTorch's name: torch.distributed.group.WORLD)
    WORLD = _World()


_state = {"default": None}


def default_group(group=None):
    """The process group `group` names (None and group.WORLD: the default one); ValueError before init."""
    current = _state["default"]
    if current is None:
        raise ValueError(NOT_INITIALIZED)
    if group is None or isinstance(group, _World) or group is current:
        return current
    raise ValueError(f"ggrad.distributed has one process group, every rank's (group.WORLD); got {group!r}")


def _claimed(name, argument):
    """The rank or world size the caller claims: the argument when given (>= 0), else torchrun's variable."""
    if argument is not None and argument >= 0:
        return int(argument)
    value = os.environ.get(name)
    return None if value is None else int(value)


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Join every rank of the MPI run into the default process group (torch.distributed's).

    See the module docstring for what is honoured. `init_method`, `store`, `group_name`, `pg_options` and
    `device_id` are accepted and do not change the group (MPI is the rendezvous). ValueError when called
    twice, or when RANK / WORLD_SIZE or the arguments disagree with MPI's; RuntimeError for a world that
    MPI did not start.
    """
    if _state["default"] is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {type(timeout).__name__}")
    claimed_rank, claimed_size = _claimed("RANK", rank), _claimed("WORLD_SIZE", world_size)
    comm = mpi.world()
    launched = comm.size > 1 or any(v in os.environ for v in _MPI_LAUNCHED)
    if not launched:
        if claimed_rank is None or claimed_size is None:
            missing = "RANK" if claimed_rank is None else "WORLD_SIZE"
            raise ValueError(f"Error initializing torch.distributed using env:// rendezvous: environment variable "
                             f"{missing} expected, but not set (or run the script under mpiexec -n N)")
        if claimed_size != 1:
            raise RuntimeError(f"init_process_group: world_size {claimed_size} but this process was not started "
                               "by an MPI launcher: ggrad's ranks are MPI processes and cannot meet over "
                               "torchrun's rendezvous (MASTER_ADDR/MASTER_PORT); run the script with "
                               f"`mpiexec -n {claimed_size} python script.py`")
    for what, claim, actual in (("world_size", claimed_size, comm.size), ("rank", claimed_rank, comm.rank)):
        if claim is not None and claim != actual:
            raise ValueError(f"init_process_group: {what} {claim} (argument or environment) but MPI started this "
                             f"process as rank {comm.rank} of {comm.size}")
    backend = Backend(backend if backend is not None else Backend.GLOO)   # after the rendezvous, as PyTorch
    _state["default"] = ProcessGroup(comm, backend, timeout.total_seconds())


def destroy_process_group(group=None):
    """Leave the default process group (MPI itself stays up until exit, so a later init may join again)."""
    if _state["default"] is None:
        raise AssertionError("Process group cannot be None")   # PyTorch's error type and words
    default_group(group)
    _state["default"] = None


def is_available():
    """Whether ggrad.distributed can run here: mpi4py and an MPI library load."""
    return mpi.available()


def is_initialized():
    return _state["default"] is not None


def get_rank(group=None):
    """This process's rank in the group; ValueError before init_process_group, as PyTorch's."""
    return default_group(group).rank()


def get_world_size(group=None):
    """How many ranks the group holds; ValueError before init_process_group, as PyTorch's."""
    return default_group(group).size()


def get_backend(group=None):
    """The backend name the group was created with."""
    return default_group(group).backend


def is_mpi_available():
    return mpi.available()


def is_gloo_available():
    """False: "gloo" is accepted by init_process_group and runs on MPI, but there is no Gloo here."""
    return False


def is_nccl_available():
    """False: "nccl" is accepted by init_process_group and runs on MPI, but there is no NCCL here."""
    return False
