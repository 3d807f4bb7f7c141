"""ggrad: a PyTorch-style define-by-run autograd framework on the GGML tensor library.

    import ggrad
    x = ggrad.randn(4, 3, requires_grad=True)
    loss = (x @ x.T).sum()
    loss.backward()
    print(x.grad)
"""

from __future__ import annotations

import builtins as _builtins
import math as _math
import sys as _sys
import warnings as _warnings
from typing import Any as _Any

from . import ggml
from .ggml import (Device, devices, device, set_num_threads, get_num_threads, GGRADError, ShapeError, DTypeError,
                   DeviceError, GGMLError, ArgumentError)
from .ggml import f32 as float32, f16 as float16, bf16 as bfloat16, i32 as int32
from .autograd import (Tensor, Function, no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
                       is_inference_mode_enabled)
from .autograd.ops import *  # noqa: F401,F403  (the functional API: ggrad.exp, ggrad.matmul, ...)
from .autograd.ops import sum, max, min, abs, pow  # noqa: F401  (shadow the builtins on purpose)
from .autograd.factory import (tensor, from_numpy, zeros, ones, full, empty, arange, eye, rand, randn, randint,
                               zeros_like, ones_like, full_like, empty_like, rand_like, randn_like, randint_like,
                               manual_seed,
                               initial_seed, default_generator,
                               linspace, logspace, randperm, as_tensor, seed, get_rng_state, set_rng_state)
from .autograd.torch_dtypes import BOOL as bool, INT64 as int64  # noqa: A001  (torch.bool, torch.int64)
from .autograd.torch_dtypes import INT8 as int8, UINT8 as uint8, INT16 as int16
from .autograd.dtype_rules import result_type, promote_types
from .autograd.execution import realize, set_graph_cache as _set_graph_cache
from .autograd.memory import stats as _stats
from .autograd.anomaly_mode import is_anomaly_enabled, is_anomaly_check_nan_enabled
from .autograd.profiler import profile
from .autograd.generator import Generator
from .autograd.type_info import finfo, iinfo
from .autograd.printing import set_printoptions
from .autograd.complex_tensor import (ComplexTensor, COMPLEX64 as complex64, view_as_real, view_as_complex, polar,
                                      complex, real, imag, angle, conj, is_complex)  # noqa: A001
from .autograd.legacy import (FloatTensor, HalfTensor, BFloat16Tensor, DoubleTensor, LongTensor, IntTensor,
                              ShortTensor, CharTensor, ByteTensor, BoolTensor)

from .autograd import ops as _ops
from .autograd.boundary import guard as _guard
_guard(globals(), _ops.__all__)   # a non-Tensor input raises TypeError naming the op, as PyTorch

from . import nn, optim  # noqa: E402  (they build on everything above)
from .nn.functional import conv3d, conv_transpose3d  # noqa: E402  (torch.conv3d, torch.conv_transpose3d)
from .serialization import save, load  # noqa: E402
from . import train  # noqa: E402  (the Keras-like loop, above nn and optim)
from .train import swa_utils as _swa_utils  # noqa: E402
# torch.optim.swa_utils's path: the module lives in train (AveragedModel is a Module; optim does not import nn)
optim.swa_utils = _swa_utils
_sys.modules["ggrad.optim.swa_utils"] = _swa_utils
from . import amp  # noqa: E402
from . import utils  # noqa: E402  (ggrad.utils.data: Dataset, DataLoader)
from . import linalg  # noqa: E402  (torch.linalg's norms and products)
from .triangular import cholesky_inverse, cholesky_solve  # noqa: E402  (torch.cholesky_solve, ...)
from . import special  # noqa: E402  (torch.special)
from . import fft  # noqa: E402  (torch.fft, as products with cosine and sine matrices)
from . import jit, random, testing  # noqa: E402  (torch.jit's names, torch.random, torch.testing.assert_close)
from . import func  # noqa: E402  (torch.func's transforms: jvp)
from .amp import autocast  # noqa: E402  (ggrad.autocast, as torch.autocast)
from .train import Sequential  # noqa: E402  (the Keras-style model; nn.Sequential is PyTorch's container)
from . import cuda, backends, compiler, distributions  # noqa: E402  (torch.cuda, .backends, .compiler, .distributions)
from . import distributed  # noqa: E402  (torch.distributed; mpi4py is imported on first use)
from . import multiprocessing  # noqa: E402  (torch.multiprocessing: spawn)
from . import models  # noqa: E402  (llama.cpp's GGUF models: ggrad.models.from_gguf)
from .compiler import compile  # noqa: E402,A001  (torch.compile: returns the model, ggrad compiles each step)
from .autograd.compiled_step import compile_step, CompiledStep  # noqa: E402  (a training step recorded once, replayed)
from .backends.cuda import set_float32_matmul_precision, get_float32_matmul_precision  # noqa: E402
from .settings import *  # noqa: E402,F401,F403  (default dtype, deterministic algorithms, inter-op threads)

float = float32  # noqa: A001  (torch.float)
half = float16
cfloat = complex64
int = int32  # noqa: A001
long = int64
short = int16
float64 = double = ggml.dtypes.from_name("f64")   # named so PyTorch code reads; creating one raises (no f64 compute)
pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan   # torch.pi, torch.e, torch.inf, torch.nan
newaxis = None


def cross(input: Tensor, other: Tensor, dim: _builtins.int | None = None) -> Tensor:  # noqa: A002
    """The cross product of 3-vectors along `dim` (PyTorch's torch.cross; linalg.cross's default is -1). Without
    `dim`, the first dimension of size 3, with PyTorch's deprecation warning."""
    if dim is None:
        _warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                       "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                       "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        dim = next((i for i, n in enumerate(input.shape) if n == 3), -1)
    return linalg.cross(input, other, dim=dim)


def is_floating_point(t: Tensor) -> _builtins.bool:
    return not isinstance(t, ComplexTensor) and t.dtype.is_float
__version__ = "0.1.0"


def stats() -> dict[str, _Any]:
    """Counters of the execution engine: graph computes, nodes, bytes uploaded/read and host reads, tensors
    persisted, graph-cache hits and misses, backward passes replayed."""
    return _stats.as_dict()


def reset_stats() -> None:
    _stats.reset()


def is_tensor(obj: object) -> _builtins.bool:
    """Whether `obj` is a ggrad Tensor or complex tensor (PyTorch's torch.is_tensor)."""
    return isinstance(obj, (Tensor, ComplexTensor))


def numel(input: Tensor) -> _builtins.int:  # noqa: A002 (PyTorch's name)
    """The number of elements of `input` (PyTorch's torch.numel)."""
    return input.numel()


def set_graph_cache(enabled: _builtins.bool) -> None:
    """Reuse the graph, nodes and memory plan of a step whose recorded trace repeats (on by default;
    `GGRAD_GRAPH_CACHE=0` turns it off at start). Results are the same either way."""
    _set_graph_cache(enabled)
