"""ggrad.ggml: the GGML binding. Contexts, tensors, graphs, devices, buffers, schedulers, op builders.

This layer knows nothing of autograd. Shapes are GGML's (`ne`, innermost first) except where a
function says numpy order.
"""

from ._lib import ffi, lib
from . import hooks
from .errors import (GGRADError, ShapeError, DTypeError, DeviceError, DeviceLostError, GGMLError, ArgumentError, FormatError,
                     UnsupportedDTypeError, UnsupportedShapeError)
from .dtypes import DType, f32, f16, bf16, i32, i16, i8, all_dtypes, as_dtype
from .backend import (Device, devices, device, cpu, set_num_threads, get_num_threads, has_backend,
                     rpc_add_server, rpc_start_server, check_device)
from .context import Context, GTensor, Graph, MAX_DIMS, latest_source, tensor_overhead
from .buffer import Buffer, alloc_context_tensors, alloc_size
from .sched import Scheduler
from .build import build_info
from . import threads
from .data import set_data, get_data, get_raw, copy_tensor, view, encode, decode

hooks.install()

VERSION = ffi.string(lib.ggml_version()).decode()
from . import ops, gguf, kernels
