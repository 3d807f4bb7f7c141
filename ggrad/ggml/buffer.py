"""Backend buffers: device memory that tensors are placed in, freed when the Buffer is dropped."""

from ._lib import ffi, lib
from .errors import GGMLError, ShapeError


class Buffer:
    """A `ggml_backend_buffer_t` of `size` bytes on a buffer type (a device's memory).

    `alloc(tensor)` places tensors one after another (aligned) and returns their offsets.

    `managed=False` leaves freeing to the caller (`free()`): for pools whose buffers must never be freed
    behind their back by the garbage collector's ordering within a reference cycle.
    """

    __slots__ = ("ptr", "size", "alignment", "_offset", "_managed", "__weakref__")

    def __init__(self, buffer_type, size, managed=True):
        size = max(int(size), 1)
        ptr = lib.ggml_backend_buft_alloc_buffer(buffer_type, size)
        if ptr == ffi.NULL:
            name = ffi.string(lib.ggml_backend_buft_name(buffer_type)).decode()
            raise MemoryError(f"could not allocate {size} bytes of {name} memory")
        self.ptr = ffi.gc(ptr, lib.ggml_backend_buffer_free) if managed else ptr
        self._managed = managed
        self.size = size
        self.alignment = int(lib.ggml_backend_buffer_get_alignment(ptr))
        self._offset = 0

    @classmethod
    def wrapping(cls, ptr, size):
        """A Buffer over an existing `ggml_backend_buffer_t` (e.g. `ggml_backend_cpu_buffer_from_ptr`'s, over
        memory its caller keeps alive), freed when dropped."""
        if ptr == ffi.NULL:
            raise MemoryError(f"Buffer.wrapping: GGML made no buffer over {size} bytes")
        buffer = object.__new__(cls)
        buffer.ptr = ffi.gc(ptr, lib.ggml_backend_buffer_free)
        buffer._managed, buffer.size, buffer._offset = True, int(size), 0
        buffer.alignment = int(lib.ggml_backend_buffer_get_alignment(ptr))
        return buffer

    @property
    def is_host(self):
        return bool(lib.ggml_backend_buffer_is_host(self.ptr))

    @property
    def name(self):
        return ffi.string(lib.ggml_backend_buffer_name(self.ptr)).decode()

    def alloc_size(self, tensor):
        return int(lib.ggml_backend_buffer_get_alloc_size(self.ptr, tensor.ptr))

    def alloc(self, tensor, offset=None):
        """Place an unallocated `tensor` at `offset` (default: after the previous one)."""
        if tensor.ptr.data != ffi.NULL or tensor.ptr.buffer != ffi.NULL:
            raise GGMLError(f"alloc: tensor {tensor.name!r} already has memory")
        if tensor.ptr.view_src != ffi.NULL:
            raise ShapeError("alloc: a view takes its memory from its source; allocate the source")
        size = self.alloc_size(tensor)
        if offset is None:
            offset = -(-self._offset // self.alignment) * self.alignment
        if offset + size > self.size:
            raise MemoryError(f"alloc: {size} bytes at offset {offset} do not fit in a buffer of {self.size}")
        base = ffi.cast("char *", lib.ggml_backend_buffer_get_base(self.ptr))
        status = lib.ggml_backend_tensor_alloc(self.ptr, tensor.ptr, base + offset)
        if status != lib.GGML_STATUS_SUCCESS:
            raise GGMLError(f"alloc: ggml_backend_tensor_alloc failed ({status})")
        self._offset = offset + size
        return offset

    def place(self, tensor):
        """Place `tensor` at the start of the buffer (a buffer reused for one tensor at a time)."""
        return self.alloc(tensor, offset=0)

    def free(self):
        """Free the memory now (required for `managed=False` buffers; harmless twice)."""
        if self.ptr is not None:
            if self._managed:
                ffi.release(self.ptr)
            else:
                lib.ggml_backend_buffer_free(self.ptr)
            self.ptr = None

    def clear(self, value=0):
        lib.ggml_backend_buffer_clear(self.ptr, value)


def alloc_context_tensors(ctx, buffer_type):
    """Allocate every tensor of a no_alloc Context in one new Buffer (None if the context is empty)."""
    ptr = lib.ggml_backend_alloc_ctx_tensors_from_buft(ctx._live(), buffer_type)
    if ptr == ffi.NULL:
        if lib.ggml_get_first_tensor(ctx.ptr) == ffi.NULL:
            return None
        raise MemoryError("could not allocate the context's tensors")
    buf = Buffer.__new__(Buffer)
    buf.ptr = ffi.gc(ptr, lib.ggml_backend_buffer_free)
    buf._managed = True
    buf.size = int(lib.ggml_backend_buffer_get_size(ptr))
    buf.alignment = int(lib.ggml_backend_buffer_get_alignment(ptr))
    buf._offset = buf.size
    return buf


def alloc_size(buffer_type, tensor):
    """Bytes `tensor` needs in a buffer of `buffer_type` (may exceed nbytes for padding)."""
    return int(lib.ggml_backend_buft_get_alloc_size(buffer_type, tensor.ptr))
