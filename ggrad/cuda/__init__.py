"""`ggrad.cuda` (PyTorch's torch.cuda) over GGML's CUDA devices: availability, seeding, synchronisation, memory.

A device argument is None (the first CUDA device: ggrad has no current-device switch), an index, a name
("cuda:1") or a Device. Where no CUDA device is there, the calls that need one raise `CUDAUnavailableError`
(an AssertionError, as PyTorch's "Torch not compiled with CUDA enabled", and a ggrad DeviceError); the seeding
calls are then silently ignored and the memory counters read 0, as PyTorch's. ggrad has one random generator
for every device, so `manual_seed` seeds it (on a machine with CUDA) exactly as `ggrad.manual_seed` does.
Memory is ggrad's own accounting of the device (`ggrad.stats()["memory"]`): allocated = tensors held plus
the compute buffer of a step, reserved adds the freed buffers kept for reuse, the peak is since the last
`reset_peak_memory_stats` (or `ggrad.reset_stats`).
"""

from __future__ import annotations

import dataclasses
from typing import Union

from .. import ggml
from ..autograd import execution, memory
from ..autograd.factory import manual_seed as _manual_seed
from ..ggml import DeviceError
from . import amp

__all__ = ["CUDAUnavailableError", "is_available", "device_count", "current_device", "is_initialized", "init",
           "get_device_name", "get_device_properties", "mem_get_info", "is_bf16_supported", "manual_seed",
           "manual_seed_all", "synchronize", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "empty_cache", "amp"]

DeviceArg = Union[None, int, str, ggml.Device]


class CUDAUnavailableError(DeviceError, AssertionError):
    """A CUDA call on a machine (or GGML build) without a CUDA device."""


def _devices():
    return [d for d in ggml.devices() if d.type == "cuda"]


def _device(device: DeviceArg) -> ggml.Device:
    """The CUDA Device that `device` names."""
    found = _devices()
    if not found:
        raise CUDAUnavailableError("ggrad.cuda: no CUDA device (GGML was built without CUDA, or no GPU is visible)")
    if device is None:
        return found[0]
    if isinstance(device, int) and not isinstance(device, bool):
        if not 0 <= device < len(found):
            raise DeviceError(f"ggrad.cuda: invalid device ordinal {device} ({len(found)} CUDA devices)")
        return found[device]
    dev = ggml.device(device)
    if dev.type != "cuda":
        raise DeviceError(f"ggrad.cuda: expected a CUDA device, got {dev.torch_name}")
    return dev


def is_available() -> bool:
    """Whether GGML offers at least one CUDA device."""
    return bool(_devices())


def device_count() -> int:
    return len(_devices())


def is_initialized() -> bool:
    """As PyTorch's: whether CUDA is set up (GGML sets it up when it lists the devices)."""
    return is_available()


def init() -> None:
    """Set CUDA up: raises CUDAUnavailableError where there is none."""
    _device(None)


def current_device() -> int:
    """The index of the device "cuda" means: always 0 in ggrad."""
    _device(None)
    return 0


def get_device_name(device: DeviceArg = None) -> str:
    """The GPU's name as GGML's CUDA backend describes it ("NVIDIA H100 80GB HBM3")."""
    return _device(device).description


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """What GGML tells of a CUDA device: its name and total memory in bytes."""
    name: str
    total_memory: int


def get_device_properties(device: DeviceArg = None) -> DeviceProperties:
    dev = _device(device)
    return DeviceProperties(dev.description, dev.total_memory)


def mem_get_info(device: DeviceArg = None) -> tuple[int, int]:
    """(free, total) bytes of the device, as its driver reports them."""
    dev = _device(device)
    return dev.free_memory, dev.total_memory


def is_bf16_supported() -> bool:
    """Whether bfloat16 tensors can be computed on CUDA: wherever a CUDA device is."""
    return is_available()


def manual_seed(seed: int) -> None:
    """Seed ggrad's generator (the one every device draws from); ignored where no CUDA device is."""
    if is_available():
        _manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def synchronize(device: DeviceArg = None) -> None:
    """Compute everything pending on the device now (ggrad's work is deferred until read: this is what
    waiting for the GPU means here, e.g. before taking a time)."""
    execution.realize(_device(device))


def _memory(device):
    if not is_available():
        return None
    return memory.runtime(_device(device)).memory()


def memory_allocated(device: DeviceArg = None) -> int:
    """Bytes held by tensors on the device plus its compute buffer; 0 without CUDA."""
    m = _memory(device)
    return 0 if m is None else m["persistent"] + m["compute_buffer"]


def max_memory_allocated(device: DeviceArg = None) -> int:
    """The peak of `memory_allocated` since the last reset; 0 without CUDA."""
    m = _memory(device)
    return 0 if m is None else m["peak"]


def memory_reserved(device: DeviceArg = None) -> int:
    """`memory_allocated` plus the freed buffers ggrad keeps for reuse; 0 without CUDA."""
    m = _memory(device)
    return 0 if m is None else m["persistent"] + m["compute_buffer"] + m["pooled"]


def reset_peak_memory_stats(device: DeviceArg = None) -> None:
    """Start the peak again from what is allocated now (on every device: ggrad keeps one reset)."""
    _device(device)
    memory.stats.reset_peaks()


reset_max_memory_allocated = reset_peak_memory_stats


def empty_cache() -> None:
    """Free the buffers ggrad keeps for reuse on the CUDA devices (tensors still held keep theirs)."""
    for dev in _devices():
        memory.runtime(dev).pool.clear()
