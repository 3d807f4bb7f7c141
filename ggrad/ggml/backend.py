"""Devices of every registered GGML backend, their backends, and the CPU thread setting.

GGML names devices `CPU`, `CUDA0`, `Vulkan0`, `RPC0` (each RPC server is a registry `RPC[host:port]`);
ggrad also accepts the PyTorch-like `cpu`, `cuda:0`, `vulkan:0`, `rpc:0`. A device's backend is started once and shared.
"""

import re

from ._lib import ffi, lib
from .errors import DeviceError
from .threads import policy as _threads

_TYPE_NAMES = {
    lib.GGML_BACKEND_DEVICE_TYPE_CPU: "cpu",
    lib.GGML_BACKEND_DEVICE_TYPE_GPU: "gpu",
    lib.GGML_BACKEND_DEVICE_TYPE_ACCEL: "accel",
}
if hasattr(lib, "GGML_BACKEND_DEVICE_TYPE_IGPU"):
    _TYPE_NAMES[lib.GGML_BACKEND_DEVICE_TYPE_IGPU] = "gpu"

_devices = {}  # GGML device name -> Device
_rpc_regs = {}  # endpoint -> the ggml_backend_reg_t registered for it


class Device:
    """One device of one GGML backend.

    Attributes:
        name: GGML's device name (`"CPU"`, `"CUDA0"`).
        description: what the backend says of it.
        type: `"cpu"`, `"gpu"` or `"accel"`.
        backend_name: the registry it belongs to (`"CPU"`, `"CUDA"`, `"Vulkan"`, `"RPC"`).
        index: its position among that registry's devices.
    """

    def __init__(self, ptr, backend_name, index):
        self.ptr = ptr
        self.name = ffi.string(lib.ggml_backend_dev_name(ptr)).decode()
        self.description = ffi.string(lib.ggml_backend_dev_description(ptr)).decode()
        self.type = _TYPE_NAMES.get(lib.ggml_backend_dev_type(ptr), "accel")
        self.backend_name = backend_name
        self.index = index
        self._backend = None

    @property
    def is_cpu(self):
        return self.type == "cpu"

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
        return (f"Device({self.torch_name!r}, ggml={self.name!r}, type={self.type!r}, "
                f"description={self.description!r}, memory={free >> 20}/{total >> 20} MiB)")

    def __eq__(self, other):
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
            gpus = [d for d in _devices.values() if d.type == "gpu"]
            if index < len(gpus):
                return gpus[index]
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


def rpc_add_server(endpoint):
    """Register a running `rpc-server` (`"host:port"`); its devices then appear in `devices()`."""
    fn = backend_proc("RPC", "ggml_backend_rpc_add_server", "ggml_backend_reg_t (*)(const char *)")
    if fn is None:
        raise DeviceError("this GGML was built without RPC; rebuild libggml-python with CMAKE_ARGS=-DGGML_RPC=ON")
    if endpoint not in _rpc_regs:
        reg = fn(endpoint.encode())
        if reg == ffi.NULL:
            raise DeviceError(f"could not add RPC server {endpoint!r} (is an rpc server listening there?)")
        lib.ggml_backend_register(reg)
        _rpc_regs[endpoint] = reg
    _refresh()
    return [d for d in _devices.values() if d.backend_name == "RPC" and d.description == endpoint]


def rpc_start_server(endpoint, device_names=("CPU",), cache_dir=None, n_threads=None):
    """Serve local devices over RPC at `endpoint` (blocks; run it in a separate process)."""
    fn = backend_proc("RPC", "ggml_backend_rpc_start_server",
                      "void (*)(const char *, const char *, size_t, size_t, ggml_backend_dev_t *)")
    if fn is None:
        raise DeviceError("this GGML was built without RPC; rebuild libggml-python with CMAKE_ARGS=-DGGML_RPC=ON")
    devs = [device(n) for n in device_names]
    arr = ffi.new("ggml_backend_dev_t[]", [d.ptr for d in devs])
    if n_threads is not None:
        set_num_threads(n_threads)
    cache = ffi.NULL if cache_dir is None else ffi.new("char[]", str(cache_dir).encode())
    fn(endpoint.encode(), cache, get_num_threads(), len(devs), arr)
