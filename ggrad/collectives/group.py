"""The default process group of torch.distributed's surface: every rank of the run, over MPI or TCP.

`init_process_group` finds how the ranks were started ("gloo", "nccl" and "mpi" are accepted as names;
the transport follows the launcher):
  - `mpiexec -n N python train.py` (any MPI launcher, seen by its environment variables): the ranks are
    MPI's; torchrun's RANK / WORLD_SIZE, and `rank=` / `world_size=`, may be given too and must agree.
  - `torchrun --nproc_per_node=N train.py` or `python -m ggrad.distributed.run` (or anything that sets
    RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT): the ranks meet in a TCPStore served by rank 0 at
    MASTER_ADDR:MASTER_PORT (init_method "env://", or "tcp://host:port", or a `store=`) and the
    collectives run over sockets (sockets.py). LOCAL_RANK is the launcher's business, not read here.
  - one process with RANK=0 and WORLD_SIZE=1 (or the arguments): a world of one, no rendezvous.
"""

import datetime
import os

from . import mpi, sockets
from .store import TCPStore

NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)   # PyTorch's default_pg_timeout
_MPI_LAUNCHED = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


class Backend(str):
    """A backend name as PyTorch's `torch.distributed.Backend` (a lowercase str); each runs on the transport
    of the launcher (MPI or sockets)."""

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
    """Every rank of the run, with the backend it was created for, its timeout and its transport
    (mpi.MPITransport or sockets.SocketTransport, which run the collectives).

    `timeout` (seconds) bounds each collective: a rank that does not join in time is reported by a
    RankLostError (ggrad.distributed), as a lost rank.
    """

    def __init__(self, transport, backend, timeout, store=None):
        self.transport, self.backend, self.timeout, self.store = transport, backend, timeout, store

    def rank(self):
        return self.transport.rank

    def size(self):
        return self.transport.size

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


_state = {"default": None, "groups": 0}


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
    """Join every rank of the run into the default process group (torch.distributed's).

    See the module docstring for the launchers. `group_name`, `pg_options` and `device_id` are accepted
    and change nothing. ValueError when called twice, when RANK / WORLD_SIZE (or MASTER_ADDR / MASTER_PORT
    for a world of several) are missing, or when they disagree with MPI's; DistStoreError or RankLostError
    when the other ranks do not join within `timeout`.
    """
    if _state["default"] is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {type(timeout).__name__}")
    claimed_rank, claimed_size = _claimed("RANK", rank), _claimed("WORLD_SIZE", world_size)
    seconds = timeout.total_seconds()
    if any(v in os.environ for v in _MPI_LAUNCHED):
        transport = _mpi_transport(claimed_rank, claimed_size, seconds)
    else:
        if claimed_rank is None or claimed_size is None:
            missing = "RANK" if claimed_rank is None else "WORLD_SIZE"
            raise ValueError(f"Error initializing torch.distributed using env:// rendezvous: environment variable "
                             f"{missing} expected, but not set (or run the script under torchrun or mpiexec)")
        if not 0 <= claimed_rank < claimed_size:
            raise ValueError(f"init_process_group: rank {claimed_rank} is not in [0, {claimed_size - 1}] (world "
                             f"size {claimed_size})")
        if store is not None and not isinstance(store, TCPStore):
            raise TypeError(f"init_process_group: store must be a TCPStore (ggrad.distributed.TCPStore), got "
                            f"{type(store).__name__}")
        if store is None and claimed_size > 1:
            store = _store(init_method, claimed_rank, claimed_size, timeout)
        transport = sockets.rendezvous(store, claimed_rank, claimed_size, seconds, _state["groups"])
    _state["groups"] += 1
    backend = Backend(backend if backend is not None else Backend.GLOO)   # after the rendezvous, as PyTorch
    _state["default"] = ProcessGroup(transport, backend, seconds, store)


def _mpi_transport(claimed_rank, claimed_size, seconds):
    """The transport of an MPI run, after checking what the caller claims against MPI's numbers."""
    comm = mpi.world()
    for what, claim, actual in (("world_size", claimed_size, comm.size), ("rank", claimed_rank, comm.rank)):
        if claim is not None and claim != actual:
            raise ValueError(f"init_process_group: {what} {claim} (argument or environment) but MPI started this "
                             f"process as rank {comm.rank} of {comm.size}")
    return mpi.MPITransport(comm, seconds)


def _store(init_method, rank, size, timeout):
    """The TCPStore of torchrun's rendezvous: served by rank 0 at MASTER_ADDR:MASTER_PORT (env://, the
    default) or at init_method's tcp://host:port."""
    if init_method is None or init_method == "env://":
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            if name not in os.environ:
                raise ValueError(f"Error initializing torch.distributed using env:// rendezvous: environment "
                                 f"variable {name} expected, but not set")
        host, port = os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
    elif isinstance(init_method, str) and init_method.startswith("tcp://") and ":" in init_method[6:]:
        host, port = init_method[6:].rsplit(":", 1)
    else:
        raise ValueError(f"init_process_group: init_method {init_method!r} is not one ggrad has: env:// (torchrun's "
                         "variables) or tcp://host:port")
    if not port.isdigit():
        raise ValueError(f"init_process_group: the master's port must be a number, got {port!r}")
    return TCPStore(host.strip("[]"), int(port), size, is_master=rank == 0, timeout=timeout)


def destroy_process_group(group=None):
    """Leave the default process group: its sockets and store close (MPI itself stays up until exit), so
    a later init may join again."""
    if _state["default"] is None:
        raise AssertionError("Process group cannot be None")   # PyTorch's error type and words
    current = default_group(group)
    current.transport.close()
    if isinstance(current.store, TCPStore):
        current.store.close()
    _state["default"] = None


def is_available():
    """True: the socket transport needs nothing more (MPI runs need mpi4py: is_mpi_available)."""
    return True


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
    """False: "gloo" is accepted by init_process_group and runs on MPI or sockets, but there is no Gloo here."""
    return False


def is_nccl_available():
    """False: "nccl" is accepted by init_process_group and runs on MPI or sockets, but there is no NCCL here."""
    return False
