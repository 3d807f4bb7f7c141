"""`autocast`: mixed precision as PyTorch's `torch.autocast`, for the ops of one device type.

Inside `with ggrad.autocast("cuda", dtype=ggrad.float16):` the ops in TABLE change dtypes:

- "lower": the matrix products (matmul, linear, conv1d/2d, conv_transpose1d/2d, attention) cast their floating point inputs to
  the autocast dtype and give a result in it. GGML multiplies with the low precision operand as its
  first operand and accumulates in f32: on the CPU always, on CUDA for bf16 (cuBLAS COMPUTE_32F) and
  for f16 because every f16 product asks for it (ops/products.py's _product; GGML's CUDA f16 product otherwise
  accumulates in f16, COMPUTE_16F, and with it runs TF32 on its f32 conversions). Their backward
  products run in the same low precision, except where the backend takes weight gradients from
  out_prod (CUDA, which has no f16 out_prod): there both gradients of a product with a float32 weight
  come from float32 out_prod, which cuBLAS runs on TF32 tensor cores (float16's 10-bit mantissa,
  float32 accumulation): the weight's from the float16 rows of x cast back, x's from the float32
  master weight and the gradient, read in place (products.py).
- "float32": softmax, log_softmax, norms, losses, exp/log, sums and the like cast their floating point
  inputs to float32 and give a float32 result, as PyTorch's CUDA list "ops that autocast to float32".
- "banned": binary_cross_entropy raises, as in PyTorch (use binary_cross_entropy_with_logits).

PyTorch's list also has sum, prod and cumsum; here they keep their input's dtype (mean, var and other
composites are built on sum, and would change dtype with it). Every other op runs in its inputs' dtypes; mixed float dtypes meet in float32 (ggrad's promotion).
The casts are differentiable: the gradient is cast back to the input's dtype, so float32 parameters
(master weights) get float32 gradients. linear and matmul are one Function each (products.py) that
multiplies the low precision copies and gives the gradients of the float32 sources straight from
GGML's float32 products, with no cast; their rounded results are noted (autograd/roundings.py) so that
an op outside the table that computes in float32 (a residual add) reads the float32 value instead of
casting back; one that keeps its input for its backward (GELU) reads and keeps the rounded value, as
PyTorch (half the bytes from forward to backward; dtype_rules._kept_half). A cast of a leaf that requires grad (a parameter) is cached
for the rest of the outermost autocast region while it is pending (one cast per weight per step, read
by forward and backward): a graph computed since (an optimizer step, a read) or a new value of the
weight makes it cast again. Ops nested inside a hooked op run as written, except attention's two
products, which give their float32 results unrounded, as PyTorch's fused attention (SDPA) keeps its
scores: q @ k^T goes into the float32 softmax and weights @ v multiplies the float32 weights the
softmax saves anyway, with no cast of a (..., L, S) tensor forward or backward.
Backward rules run outside the policy (autograd suspends it).
"""

import functools

from . import products
from ..autograd import autocast_hook
from ..autograd.autocast_hook import BANNED, FLOAT32, LOWER
from ..autograd.tensor import Tensor
from ..ggml import DType, as_dtype, bf16, f16, f32

# Each hooked op's class (PyTorch's CUDA autocast op lists, restricted to ops ggrad has), declared where the op
# is written: @autocast_op(name, class, casts).
TABLE = autocast_hook.CLASSES

_PRODUCTS = {"linear": products.linear, "matmul": products.matmul}   # one Function a product: products.py
_DEFAULT_DTYPE = {"cpu": bf16}   # PyTorch: bfloat16 on the CPU, float16 elsewhere
_BANNED_MESSAGE = ("{op} and torch.nn.BCELoss are unsafe to autocast. Many models use a sigmoid layer right "
                   "before the binary cross entropy layer. In this case, combine the two layers using "
                   "binary_cross_entropy_with_logits or BCEWithLogitsLoss, which are safe to autocast.")


def _in_dtype(out, dtype):
    """A product's result in the autocast dtype, as PyTorch gives it."""
    if isinstance(out, Tensor) and out.dtype.is_float and out.dtype is not dtype:
        return out.to(dtype)
    return out


class _Policy:
    """What the hooked ops do inside one autocast region: the dtype, the device type, the cast cache."""

    def __init__(self, device_type, dtype, cache):
        self.device_type = device_type
        self.dtype = dtype
        self.cache = cache   # id(leaf) -> (leaf, version, dtype, cast) or None when caching is off

    def __call__(self, name, fn, args, kwargs):
        kind, n_cast = TABLE[name]
        if not any(isinstance(a, Tensor) and a.device.type == self.device_type for a in args):
            return fn(*args, **kwargs)   # another device type's op
        if kind == BANNED:
            raise RuntimeError(_BANNED_MESSAGE.format(op=name))
        if name in _PRODUCTS:
            return _PRODUCTS[name](self, fn, *args, **kwargs)
        target = self.dtype if kind == LOWER else f32
        limit = len(args) if n_cast is None else n_cast
        args = tuple(self.cast(a, target) if i < limit else a for i, a in enumerate(args))
        if n_cast is None:
            kwargs = {k: self.cast(v, target) for k, v in kwargs.items()}
        with autocast_hook.install(products.unrounded if name == "attention" else None):
            out = fn(*args, **kwargs)
        if kind != LOWER:
            return out
        if isinstance(out, tuple):   # attention's (output, weights): the output
            return (_in_dtype(out[0], target),) + out[1:]
        return _in_dtype(out, target)

    def cast(self, value, dtype):
        """`value` in `dtype` if it is a floating point Tensor; anything else as it is."""
        if not isinstance(value, Tensor) or not value.dtype.is_float or value.dtype is dtype:
            return value
        if self.cache is None or not (value.requires_grad and value.grad_fn is None):
            return value.to(dtype)
        hit = self.cache.get(id(value))
        if hit is not None and hit[0] is value and hit[1] == value._version and hit[2] is dtype \
                and hit[3]._pending is not None:   # computed since: an optimizer may have updated the weight
            return hit[3]
        out = value.to(dtype)
        self.cache[id(value)] = (value, value._version, dtype, out)
        return out


class autocast:
    """Run the ops of `device_type` in mixed precision within the block (or the decorated function).

    As PyTorch's `torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`.

    Args:
        device_type (str): "cpu", "cuda", "vulkan" (a device's name before the colon).
        dtype (DType, optional): ggrad.float16 or ggrad.bfloat16; default bfloat16 on "cpu", float16 elsewhere.
        enabled (bool, default True): False runs the block as written (and turns off an enclosing autocast).
        cache_enabled (bool, optional): cache casts of parameters within the region (default True).
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected device_type of type str, got {type(device_type).__name__}")
        self.device_type = device_type.split(":")[0].lower()
        dtype = _DEFAULT_DTYPE.get(self.device_type, f16) if dtype is None else dtype
        self.fast_dtype = as_dtype(dtype) if isinstance(dtype, (DType, str)) else dtype
        if self.fast_dtype not in (f16, bf16):
            raise RuntimeError(f"autocast: the autocast dtype must be ggrad.float16 or ggrad.bfloat16, "
                               f"got {getattr(dtype, 'name', dtype)!r}")
        self.enabled = bool(enabled)
        self.cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._installs = []

    def __enter__(self):
        outer = autocast_hook.current()
        if not self.enabled:
            policy = None
        elif isinstance(outer, _Policy) and outer.cache is not None and self.cache_enabled:
            policy = _Policy(self.device_type, self.fast_dtype, outer.cache)   # nested: one cache per region
        else:
            policy = _Policy(self.device_type, self.fast_dtype, {} if self.cache_enabled else None)
        install = autocast_hook.install(policy)
        install.__enter__()
        self._installs.append(install)
        return self

    def __exit__(self, *exc):
        self._installs.pop().__exit__(*exc)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)
        return run


def is_autocast_enabled(device_type=None):
    """Whether an autocast region is active (for `device_type`, when given)."""
    policy = autocast_hook.current()
    return isinstance(policy, _Policy) and (device_type is None or policy.device_type == device_type)


def get_autocast_dtype(device_type):
    """The dtype of the active autocast region of `device_type` (its default when none is active)."""
    policy = autocast_hook.current()
    if isinstance(policy, _Policy) and policy.device_type == device_type:
        return policy.dtype
    return _DEFAULT_DTYPE.get(device_type, f16)
