"""Devices of every registered GGML backend, their backends, and the CPU thread setting.

GGML names devices `CPU`, `CUDA0`, `Vulkan0`, `RPC0` (each RPC server is a registry `RPC[host:port]`);
ggrad also accepts the PyTorch-like `cpu`, `cuda:0`, `vulkan:0`, `rpc:0`. A device's backend is started once and shared.
"""

import re

from ._lib import ffi, lib
from .errors import DeviceError, DeviceLostError
from .rpc import client as _rpc_client, protocol as _rpc_protocol, server as _rpc_server
from .threads import policy as _threads

_TYPE_NAMES = {
    lib.GGML_BACKEND_DEVICE_TYPE_CPU: "cpu",
    lib.GGML_BACKEND_DEVICE_TYPE_GPU: "gpu",
    lib.GGML_BACKEND_DEVICE_TYPE_ACCEL: "accel",
}
if hasattr(lib, "GGML_BACKEND_DEVICE_TYPE_IGPU"):
    _TYPE_NAMES[lib.GGML_BACKEND_DEVICE_TYPE_IGPU] = "gpu"

_devices = {}  # GGML device name -> Device
_resolved = {}  # a name `device()` was given -> its Device (devices are never unregistered: a name keeps its answer)
_rpc_regs = {}  # endpoint -> the ggml_backend_reg_t registered for it
_relays = {}    # endpoint -> the rpc.client.Relay that GGML's client talks to in its place


class Device:
    """One device of one GGML backend.

    Attributes:
        name: GGML's device name (`"CPU"`, `"CUDA0"`).
        description: what the backend says of it.
        type: PyTorch's device type: `"cpu"`, `"cuda"`, `"vulkan"`, `"rpc"` (the backend, lower case).
        kind: GGML's device type: `"cpu"`, `"gpu"` or `"accel"`.
        backend_name: the registry it belongs to (`"CPU"`, `"CUDA"`, `"Vulkan"`, `"RPC"`).
        index: its position among that registry's devices.
        relay: for an RPC device, the `rpc.client.Relay` in front of its server (else None).
    """

    def __init__(self, ptr, backend_name, index):
        self.ptr = ptr
        self.name = ffi.string(lib.ggml_backend_dev_name(ptr)).decode()
        self.description = ffi.string(lib.ggml_backend_dev_description(ptr)).decode()
        self.kind = _TYPE_NAMES.get(lib.ggml_backend_dev_type(ptr), "accel")
        self.type = "cpu" if self.kind == "cpu" else backend_name.lower()
        self.backend_name = backend_name
        self.index = index
        self.relay = None
        self._backend = None

    @property
    def is_cpu(self):
        return self.kind == "cpu"

    def memory(self):
        """(free, total) bytes, as the backend reports them."""
        free = ffi.new("size_t *")
        total = ffi.new("size_t *")
        lib.ggml_backend_dev_memory(self.ptr, free, total)
        return int(free[0]), int(total[0])

    @property
    def free_memory(self):
        return self.memory()[0]

    @property
    def total_memory(self):
        return self.memory()[1]

    @property
    def backend(self):
        """The started `ggml_backend_t` of this device (started on first use)."""
        if self._backend is None:
            ptr = lib.ggml_backend_dev_init(self.ptr, ffi.NULL)
            if ptr == ffi.NULL:
                raise DeviceError(f"could not start the backend of device {self.name}")
            self._backend = ptr
            if self.is_cpu:
                lib.ggml_backend_cpu_set_n_threads(ptr, _threads.max_threads)
        return self._backend

    @property
    def buffer_type(self):
        return lib.ggml_backend_dev_buffer_type(self.ptr)

    @property
    def host_buffer_type(self):
        """A pinned host buffer type for faster transfers, or None."""
        buft = lib.ggml_backend_dev_host_buffer_type(self.ptr)
        return None if buft == ffi.NULL else buft

    def supports_op(self, tensor):
        """Whether this device can compute the op of a `GTensor`."""
        return bool(lib.ggml_backend_dev_supports_op(self.ptr, tensor.ptr))

    @property
    def torch_name(self):
        """The short name: `cpu`, `cuda:0`, `vulkan:0`, `rpc:0`."""
        if self.is_cpu:
            return "cpu"
        return f"{self.backend_name.lower()}:{self.index}"

    def __repr__(self):
        free, total = self.memory()
        return (f"Device({self.torch_name!r}, ggml={self.name!r}, kind={self.kind!r}, "
                f"description={self.description!r}, memory={free >> 20}/{total >> 20} MiB)")

    def __str__(self):
        return self.torch_name

    def __eq__(self, other):   # as torch.device: a Device never equals a string
        return isinstance(other, Device) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (device, (self.name,))


def _refresh():
    for r in range(lib.ggml_backend_reg_count()):
        reg = lib.ggml_backend_reg_get(r)
        reg_name = ffi.string(lib.ggml_backend_reg_name(reg)).decode()
        for i in range(lib.ggml_backend_reg_dev_count(reg)):
            ptr = lib.ggml_backend_reg_dev_get(reg, i)
            name = ffi.string(lib.ggml_backend_dev_name(ptr)).decode()
            if name in _devices:
                continue
            if reg_name.startswith("RPC["):
                # each server is a registry of its own ("RPC[host:port]"); number their devices as one backend
                index = sum(1 for d in _devices.values() if d.backend_name == "RPC")
                _devices[name] = Device(ptr, "RPC", index)
            else:
                _devices[name] = Device(ptr, reg_name, i)


def devices():
    """Every device of every registered backend: CPU always; CUDA, Vulkan, RPC servers when present."""
    _refresh()
    return list(_devices.values())


def device(name=None):
    """Look a device up by `cpu`, `cuda:0`, `vulkan:1`, `rpc:0`, GGML's own name (`CUDA0`), or a Device."""
    if isinstance(name, Device):
        return name
    if name is None:
        name = "cpu"
    if not isinstance(name, str):
        raise DeviceError(f"device must be a name or a Device, not {type(name).__name__}")
    dev = _resolved.get(name)
    if dev is None:
        dev = _lookup(name)
        if dev is not None:
            _resolved[name] = dev
    return dev if dev is not None else _unknown(name)


def _lookup(name):
    _refresh()
    if name in _devices:
        return _devices[name]
    m = re.fullmatch(r"([a-zA-Z]+)(?::(\d+))?", name.strip())
    if m:
        kind, index = m.group(1).lower(), int(m.group(2) or 0)
        for dev in _devices.values():
            if (kind == "cpu" and dev.is_cpu) or (dev.backend_name.lower() == kind and dev.index == index):
                return dev
        if kind == "gpu":
            gpus = [d for d in _devices.values() if d.kind == "gpu"]
            if index < len(gpus):
                return gpus[index]
    return None


def _unknown(name):
    known = ", ".join(f"{d.torch_name} ({d.name})" for d in _devices.values())
    raise DeviceError(f"no device {name!r}; this GGML build offers: {known}")


def cpu():
    return device("cpu")


def set_num_threads(n):
    """Compute every graph with `n` CPU threads (as `torch.set_num_threads`); `None`: choose per graph.

    By default (and after `set_num_threads(None)`) each graph gets at most one thread per physical core,
    one for small graphs, and fewer while other processes keep cores busy (`ggrad.ggml.threads`).
    `GGRAD_NUM_THREADS=n` in the environment sets `n` at import. `None` is ggrad's own: PyTorch has no
    per-graph choice to return to.
    """
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ValueError(f"set_num_threads: expected a positive int (or None for the per-graph default), got {n!r}")
    _threads.fixed = n
    for dev in _devices.values():
        if dev.is_cpu and dev._backend is not None:
            lib.ggml_backend_cpu_set_n_threads(dev._backend, _threads.max_threads)


def get_num_threads():
    """The most CPU threads a graph computes with: the count set, else the physical cores available."""
    return _threads.max_threads


def backend_proc(backend_name, symbol, signature):
    """A function that an optional backend exports through the registry, cast to `signature`, or None."""
    reg = lib.ggml_backend_reg_by_name(backend_name.encode())
    if reg == ffi.NULL:
        return None
    addr = lib.ggml_backend_reg_get_proc_address(reg, symbol.encode())
    if addr == ffi.NULL:
        return None
    return ffi.cast(signature, addr)


def has_backend(backend_name):
    """Whether the installed GGML registered a backend called `backend_name` (`"RPC"`, `"CUDA"`, `"Vulkan"`)."""
    return lib.ggml_backend_reg_by_name(backend_name.encode()) != ffi.NULL


def _rpc_proc(symbol, signature):
    fn = backend_proc("RPC", symbol, signature)
    if fn is None:
        raise DeviceError("this GGML was built without RPC; rebuild libggml-python with CMAKE_ARGS=-DGGML_RPC=ON")
    return fn


def rpc_add_server(endpoint, connect_timeout=5.0, timeout=300.0):
    """Register a running RPC server (`"host:port"`); its devices then appear in `devices()`.

    GGML's client aborts the process when a server dies, so it talks to a relay process instead, which
    first checks that the peer speaks GGML's RPC protocol (DeviceError otherwise, within `connect_timeout`
    seconds). A server that later dies, answers garbage, or takes longer than `timeout` seconds to answer
    one request (the compute before it included) makes its devices raise DeviceLostError (a RuntimeError)
    at the next compute or read on them; the process and its other devices carry on.
    """
    fn = _rpc_proc("ggml_backend_rpc_add_server", "ggml_backend_reg_t (*)(const char *)")
    if endpoint not in _rpc_regs:
        try:
            _rpc_protocol.parse_endpoint(endpoint)
        except ValueError as e:
            raise DeviceError(f"could not add RPC server: {e}") from None
        relay = _rpc_client.Relay(endpoint, connect_timeout, timeout)
        reg = fn(relay.local_endpoint.encode())
        if reg == ffi.NULL or relay.failure():
            relay.close()
            raise DeviceError(f"could not add RPC server {endpoint!r}: {relay.failure() or 'it has no devices'}")
        lib.ggml_backend_register(reg)
        _rpc_regs[endpoint] = reg
        _relays[endpoint] = relay
        _refresh()
        for dev in _devices.values():
            if dev.backend_name == "RPC" and dev.description == relay.local_endpoint:
                dev.description, dev.relay = endpoint, relay
    _refresh()
    return [d for d in _devices.values() if d.backend_name == "RPC" and d.description == endpoint]


def check_device(dev, what="compute"):
    """Raise DeviceLostError if `dev` is an RPC device whose server has been given up on."""
    relay = dev.relay
    if relay is not None:
        reason = relay.failure()
        if reason is not None:
            raise DeviceLostError(f"{what} on {dev.torch_name} ({dev.name}): RPC server {relay.endpoint} "
                                  f"failed: {reason}. Its tensors are lost; the other devices still work")


def check_buffer(buffer_ptr, what):
    """`check_device` for the device that owns a `ggml_backend_buffer_t` (a no-op without RPC servers)."""
    if _relays and buffer_ptr != ffi.NULL:
        owner = lib.ggml_backend_buft_get_device(lib.ggml_backend_buffer_get_type(buffer_ptr))
        for dev in _devices.values():
            if dev.relay is not None and dev.ptr == owner:
                check_device(dev, what)


def rpc_start_server(endpoint, device_names=("CPU",), cache_dir=None, n_threads=None, max_clients=4,
                     max_buffer_bytes=None, idle_timeout=600.0):
    """Serve local devices over RPC at `endpoint` (blocks; run it in a separate process).

    This is `python -m ggrad.rpc_server`: GGML's own server runs in worker processes on private loopback
    ports behind a proxy that checks every request (see `ggrad.ggml.rpc.server`). `max_clients` are served
    at once, their buffers together capped at `max_buffer_bytes` (default: the devices' free memory), and a
    client idle for `idle_timeout` seconds is disconnected. `cache_dir` lets GGML keep large uploads on
    disk by hash (clients can then fill that disk). The protocol has no authentication.
    """
    _rpc_proc("ggml_backend_rpc_start_server",
              "void (*)(const char *, const char *, size_t, size_t, ggml_backend_dev_t *)")
    try:
        host, port = _rpc_protocol.parse_endpoint(endpoint)
    except ValueError as e:
        raise DeviceError(f"rpc_start_server: {e}") from None
    names = [device(n).name for n in device_names]
    try:
        server = _rpc_server.Server(host, port, names, n_threads or get_num_threads(), max_clients,
                                    max_buffer_bytes, idle_timeout, cache_dir=cache_dir)
    except OSError as e:
        raise DeviceError(f"rpc_start_server: cannot listen on {endpoint!r} ({e})") from None
    try:
        server.serve_forever()
    finally:
        server.close()
