"""A GGUF file's tensors read in place: its data section mapped into memory as one CPU buffer.

llama.cpp maps its model files instead of reading them: the weights are page cache, which the kernel may
drop and read again, rather than memory of the process's own. `MappedGGUF(file)` does the same for the CPU:
the file is mapped copy-on-write (a write to a tensor, e.g. `copy_` into a loaded weight, goes to the
process's own copy of that page; the file never changes), its data section becomes a CPU backend buffer
(`ggml_backend_cpu_buffer_from_ptr`), and `tensor(info)` places one tensor of the file there at its own
offset. `page_out(tensor)` hands a tensor's pages back to the kernel (read from the file again when next
used; pages written to stay): what a weight that is multiplied through a repacked copy does after repacking.
"""

import mmap
import os
import sys

from ._lib import ffi, lib
from .buffer import Buffer
from .context import Context
from .errors import ShapeError

_CPU_ALIGNMENT = 32   # GGML's CPU buffers (TENSOR_ALIGNMENT): a mapped data section must be so aligned
_MADV_PAGEOUT = 21    # madvise(2) on Linux 5.4+: reclaim these pages (Python's mmap does not always name it)


def can_map(file):
    """Whether GGUFFile `file`'s tensors can be read in place (its data and tensors 32-byte aligned)."""
    return file.data_offset % _CPU_ALIGNMENT == 0 and file.alignment % _CPU_ALIGNMENT == 0


class MappedGGUF:
    """The data section of validated GGUFFile `file` mapped copy-on-write as a CPU buffer (see the module
    docstring); its tensors keep it alive."""

    def __init__(self, file):
        if not can_map(file):
            raise ShapeError(f"MappedGGUF: {file.path} has its data at offset {file.data_offset} with alignment "
                             f"{file.alignment}; mapping needs both multiples of {_CPU_ALIGNMENT}")
        with open(file.path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        if len(self._map) != file.size:
            raise ShapeError(f"MappedGGUF: {file.path} changed size since it was read ({file.size} -> "
                             f"{len(self._map)} bytes)")
        self._start = file.data_offset
        self._memory = ffi.from_buffer("char[]", self._map)   # keeps the map exported (and open) while held
        size = max(file.size - file.data_offset, 1)
        ptr = lib.ggml_backend_cpu_buffer_from_ptr(self._memory + self._start, size)
        self.buffer = Buffer.wrapping(ptr, size)
        self.context = Context(n_tensors=len(file.tensors))
        self.path = file.path

    def tensor(self, info):
        """A GTensor (GGML dimensions `info.ne`) over tensor `info`'s bytes in the mapping (no copy)."""
        t = self.context.new_tensor(info.dtype, info.ne, info.name)
        self.buffer.alloc(t, offset=info.offset - self._start)
        return t

    def page_out(self, tensor):
        """Give the kernel back the whole pages of GTensor `tensor` (one of `tensor()`'s); False where the
        system cannot (not Linux, or before Linux 5.4: MADV_PAGEOUT is Linux's) or the tensor is not in this
        mapping."""
        offset = int(ffi.cast("uintptr_t", tensor.ptr.data)) - int(ffi.cast("uintptr_t", self._memory))
        if not 0 <= offset <= len(self._map) - tensor.nbytes:
            return False
        first = -(-offset // mmap.PAGESIZE) * mmap.PAGESIZE
        end = (offset + tensor.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
        if end <= first:
            return False
        advise = getattr(self._map, "madvise", None)   # none on Windows
        if advise is None or not sys.platform.startswith("linux"):
            return False
        try:
            advise(getattr(mmap, "MADV_PAGEOUT", _MADV_PAGEOUT), first, end - first)
        except OSError:   # EINVAL: a kernel without MADV_PAGEOUT
            return False
        return True

    def __repr__(self):
        return f"MappedGGUF({os.path.basename(self.path)!r}, {len(self._map)} bytes)"
