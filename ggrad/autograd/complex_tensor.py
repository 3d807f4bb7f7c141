"""Complex tensors where PyTorch scripts meet them (rotary embeddings): complex64 emulated over float32 pairs.

GGML has no complex type. A `ComplexTensor` holds one float32 Tensor of shape (*shape, 2), the real and
imaginary parts side by side (the layout of PyTorch's `view_as_real`), and composes every complex op from real
ops on it. Autograd therefore reaches through complex values with no rule of its own, and the gradient it leaves
is PyTorch's: `view_as_real(z.grad)` is the gradient of `view_as_real(z)` (dL/dre + i dL/dim, PyTorch's
conjugate Wirtinger convention).

A ComplexTensor is not a `ggrad.Tensor`: ggrad's real functions (`ggrad.exp(z)`, `ggrad.matmul(z, w)`) refuse it
with a TypeError instead of computing on its pairs; its methods and operators are the complex ops. The real
binary ops (`+ - * / @`, `ggrad.mul`, `x.add`, ...) hand a complex operand (this or a complex number) to the
complex op of their name (ops/complex_operands.py), and `ggrad.is_tensor` says True. What it has is what
complex-valued model code uses: + - * / with complex, real and number operands, @ between complex tensors,
reshape/view/flatten/unsqueeze/squeeze/permute/transpose/expand, indexing, `.real` / `.imag` (views), `abs`,
`angle`, `conj`, `exp`, `sum` / `mean`, dtype, device, printing, `numpy()`. `conj()` computes the conjugate
(PyTorch's is a lazy view: `is_conj()` is False here and `view_as_real` of a conjugate works). `tensor(complex
data)` and the factories with `dtype=complex64` (zeros, ones, full, empty, eye, rand, randn, the `_like` and
`new_` forms) make complex leaves (factory.py asks `_leaf` here); complex128 data becomes complex64, as float64
becomes float32. Module buffers may be complex, and ggrad.save / load keep them.
"""

import builtins
import warnings

import numpy as np

from .. import ggml
from . import ops, printing
from .factory import complex_leaves, full_like, tensor
from .ops import complex_operands
from .ops.broadcast import broadcast_shapes
from .tensor import Tensor


class ComplexDType:
    """ggrad.complex64 (PyTorch's torch.complex64 / torch.cfloat): a pair of float32s per element."""

    __slots__ = ()
    name, torch_name, itemsize = "c64", "complex64", 8
    numpy = np.dtype(np.complex64)
    is_floating_point, is_quantized = False, False
    is_complex = is_signed = True

    @property
    def is_float(self):
        """Asked by ggrad's real ops of their inputs' dtypes: a complex tensor stops them here, before they
        could compute on it as on a real one."""
        raise TypeError("a complex64 tensor (ggrad.ComplexTensor) is not an input of this real op: use the complex "
                        "tensor's methods and operators, or view_as_real")

    def to_real(self):
        return ggml.f32

    def to_complex(self):
        return self

    def __repr__(self):
        return "ggrad.complex64"

    def __reduce__(self):
        return "COMPLEX64"


COMPLEX64 = ComplexDType()


def _parts(x, op):
    """(real part, imaginary part) of an operand: Tensors or numbers; None for a real operand's imaginary part."""
    if isinstance(x, ComplexTensor):
        return x.real, x.imag
    if isinstance(x, Tensor):
        if x.dtype.name in ("f16", "bf16"):   # PyTorch would give complex32 / refuse; ggrad has complex64 only
            x = x.float()
        return x, None
    if isinstance(x, (int, float, np.integer, np.floating)):
        return x, None
    if isinstance(x, (builtins.complex, np.complexfloating)):
        return x.real, x.imag
    raise TypeError(f"{op}: expected a Tensor, a complex tensor or a number as operand, got {type(x).__name__}")


def _times(p, q):
    return None if p is None or q is None else p * q


def _plus(p, q):
    return q if p is None else p if q is None else p + q


def _minus(p, q):
    return (None if q is None else -q) if p is None else p if q is None else p - q


def _join(re, im):
    """The complex tensor re + i im (Tensors or numbers, broadcast together; None is 0)."""
    like = re if isinstance(re, Tensor) else im
    re, im = (full_like(like, 0.0 if v is None else v, dtype=ggml.f32) if not isinstance(v, Tensor) else v
              for v in (re, im))
    re, im = re.float(), im.float()
    shape = broadcast_shapes(re.shape, im.shape, "complex")
    return ComplexTensor(ops.stack([re.expand(shape), im.expand(shape)], -1))


def add(x, y):
    (a, b), (c, d) = _parts(x, "add"), _parts(y, "add")
    return _join(a + c, _plus(b, d))


def sub(x, y):
    (a, b), (c, d) = _parts(x, "sub"), _parts(y, "sub")
    return _join(a - c, _minus(b, d))


def mul(x, y):
    """(a + ib)(c + id) = (ac - bd) + i(ad + bc)."""
    (a, b), (c, d) = _parts(x, "mul"), _parts(y, "mul")
    return _join(_minus(a * c, _times(b, d)), _plus(_times(a, d), _times(b, c)))


def div(x, y):
    """(a + ib) / (c + id) = ((ac + bd) + i(bc - ad)) / (c^2 + d^2)."""
    (a, b), (c, d) = _parts(x, "div"), _parts(y, "div")
    if d is None:
        return _join(a / c, None if b is None else b / c)
    scale = 1.0 / (c * c + d * d)
    return _join(_plus(a * c, _times(b, d)) * scale, _minus(_times(b, c), a * d) * scale)


def matmul(x, y):
    """(A + iB)(C + iD) = (AC - BD) + i(AD + BC), as four real products. Both complex, as PyTorch's."""
    for t in (x, y):
        if not isinstance(t, (Tensor, ComplexTensor)):
            raise TypeError(f"matmul(): argument must be Tensor, not {type(t).__name__}")
    if not (isinstance(x, ComplexTensor) and isinstance(y, ComplexTensor)):
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_scalar_type(x.dtype)} != "
                           f"{_scalar_type(y.dtype)}")
    (a, b), (c, d) = _parts(x, "matmul"), _parts(y, "matmul")
    return _join(ops.matmul(a, c) - ops.matmul(b, d), ops.matmul(a, d) + ops.matmul(b, c))


# PyTorch's ScalarType names, which its dtype errors use
_SCALAR_TYPES = {"float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "float64": "Double", "int32": "Int",
                 "int64": "Long", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                 "complex64": "ComplexFloat"}


def _scalar_type(dtype):
    return _SCALAR_TYPES.get(dtype.torch_name, dtype.torch_name)


def _check_pair(op, first, second):
    """PyTorch's checks of complex(real, imag) / polar(abs, angle): two float tensors of one dtype."""
    for t, name in ((first[0], first[1]), (second[0], second[1])):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    a, b = first[0], second[0]
    if not (a.dtype.is_float and b.dtype.is_float):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got {_scalar_type(a.dtype)} "
                           f"and {_scalar_type(b.dtype)}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"Expected object of scalar type {_scalar_type(a.dtype)} but got scalar type "
                           f"{_scalar_type(b.dtype)} for second argument")
    if a.dtype is not ggml.f32:
        raise RuntimeError(f"{op}: ggrad emulates complex64 only (float32 parts); got {a.dtype.torch_name} "
                           "tensors: convert them with .float()")


def complex(real, imag):  # noqa: A001 (PyTorch's name)
    """torch.complex: the complex tensor real + i imag (float32 tensors of one dtype, broadcast together)."""
    _check_pair("complex", (real, "real"), (imag, "imag"))
    return _join(real, imag)


def polar(abs, angle):  # noqa: A002 (PyTorch's names)
    """torch.polar: abs * (cos(angle) + i sin(angle)) (float32 tensors of one dtype, broadcast together)."""
    _check_pair("polar", (abs, "abs"), (angle, "angle"))
    return _join(abs * ops.cos(angle), abs * ops.sin(angle))


def view_as_complex(input):  # noqa: A002
    """torch.view_as_complex: a float32 tensor of shape (..., 2) read as complex64 of shape (...), sharing
    its values (and its gradient). PyTorch's layout checks: last dimension of size 2 and stride 1, the
    other strides and the storage offset even."""
    if not isinstance(input, Tensor):
        raise TypeError(f"view_as_complex(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.dtype is not ggml.f32:
        if input.dtype.name in ("f16", "f64"):
            raise RuntimeError(f"view_as_complex: ggrad emulates complex64 only; a {input.dtype.torch_name} "
                               "tensor (PyTorch: complex32/complex128) is not supported: convert it with .float()")
        raise RuntimeError("view_as_complex is only supported for half, float and double tensors, but got a "
                           f"tensor of scalar type: {_scalar_type(input.dtype)}")
    if input.ndim == 0:
        raise RuntimeError("Input tensor must have one or more dimensions")
    if input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    strides = input.stride()
    if strides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if input.storage_offset() % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return ComplexTensor(input.view(input.shape))


def view_as_real(input):  # noqa: A002
    """torch.view_as_real: a complex tensor's values as float32 of shape (..., 2), real part first."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return input._pairs


def is_complex(input):  # noqa: A002
    """Whether `input` is a complex tensor."""
    if not isinstance(input, (Tensor, ComplexTensor)):
        raise TypeError(f"is_complex(): argument 'input' must be Tensor, not {type(input).__name__}")
    return isinstance(input, ComplexTensor)


def real(input):  # noqa: A002
    """The real part (a view); a real tensor is its own real part."""
    return input.real if isinstance(input, ComplexTensor) else input


def imag(input):  # noqa: A002
    """The imaginary part (a view); RuntimeError for a real tensor, as PyTorch."""
    if isinstance(input, ComplexTensor):
        return input.imag
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def angle(input):  # noqa: A002
    """The argument in (-pi, pi]; of a real tensor, 0 for x >= 0 and pi for x < 0 (nan stays nan)."""
    if isinstance(input, ComplexTensor):
        return input.angle()
    x = input if input.dtype.is_float else input.float()
    return ops.where(ops.isnan(x), x, ops.where(x < 0, float(np.pi), 0.0))


def conj(input):  # noqa: A002
    """The complex conjugate; a real tensor is its own."""
    return input.conj() if isinstance(input, ComplexTensor) else input


def _lifted(t):
    """A complex operand as a ComplexTensor (a real tensor gets imaginary part 0)."""
    return t if isinstance(t, ComplexTensor) else _join(t, None)


def cat(tensors, dim=0):
    """torch.cat of complex tensors (real ones among them are made complex, as PyTorch promotes them)."""
    parts = [_lifted(t) for t in tensors]
    return ComplexTensor(ops.cat([p._pairs for p in parts], _dim(dim, parts[0].ndim)))


def stack(tensors, dim=0):
    parts = [_lifted(t) for t in tensors]
    return ComplexTensor(ops.stack([p._pairs for p in parts], _dim(dim, parts[0].ndim + 1)))


def _dim(d, ndim):
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1) - 1}], "
                         f"but got {d})")
    return d % ndim if ndim else 0


def _sizes(args):
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)


class ComplexTensor:
    """A complex64 tensor: `_pairs` is the float32 Tensor (*shape, 2) of its real and imaginary parts."""

    __slots__ = ("_pairs", "__weakref__")
    dtype = COMPLEX64

    def __init__(self, pairs):
        self._pairs = pairs

    # ---- state ---------------------------------------------------------------------------------
    shape = property(lambda self: self._pairs.shape[:-1])
    device = property(lambda self: self._pairs.device)
    ndim = property(lambda self: self._pairs.ndim - 1)
    real = property(lambda self: self._pairs.select(-1, 0), doc="The real part, a view.")
    imag = property(lambda self: self._pairs.select(-1, 1), doc="The imaginary part, a view.")
    grad_fn = property(lambda self: self._pairs.grad_fn)
    is_leaf = property(lambda self: self._pairs.is_leaf)

    @property
    def requires_grad(self):
        return self._pairs.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self._pairs.requires_grad = value

    @property
    def grad(self):
        """The gradient, complex: view_as_real of it is the gradient of view_as_real(self)."""
        g = self._pairs.grad
        return None if g is None else ComplexTensor(g)

    def requires_grad_(self, requires_grad=True):
        self._pairs.requires_grad_(requires_grad)
        return self

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[_dim(dim, self.ndim)]

    def dim(self):
        return self.ndim

    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def element_size(self):
        return 8

    def is_complex(self):
        return True

    def is_floating_point(self):
        return False

    def is_conj(self):
        return False   # conj() computes the conjugate: there is no lazy conjugate bit to resolve

    def resolve_conj(self):
        return self

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- reads ---------------------------------------------------------------------------------
    def numpy(self):
        pairs = np.ascontiguousarray(self._pairs.detach().numpy(), dtype=np.float32)
        return pairs.view(np.complex64).reshape(self.shape)

    def __array__(self, dtype=None, copy=None):
        return self.numpy() if dtype is None else self.numpy().astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return builtins.complex(self.numpy().reshape(-1)[0])

    def tolist(self):
        return self.numpy().tolist()

    def __repr__(self):
        return printing.tensor_text(self, printing.values_text(self.numpy(), "tensor("), False)   # complex64: the default

    def __bool__(self):
        return bool(self.item() != 0)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Backward from a complex output needs its `gradient` (complex, or view_as_real's pairs)."""
        if gradient is None:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs")
        pairs = gradient._pairs if isinstance(gradient, ComplexTensor) else gradient
        self._pairs.backward(pairs, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    # ---- arithmetic ----------------------------------------------------------------------------
    __add__ = add
    __sub__ = sub
    __mul__ = mul
    __truediv__ = div
    __matmul__ = matmul
    add, sub, mul, div, matmul, multiply, divide = add, sub, mul, div, matmul, mul, div

    def __radd__(self, other):
        return add(other, self)

    def __rsub__(self, other):
        return sub(other, self)

    def __rmul__(self, other):
        return mul(other, self)

    def __rtruediv__(self, other):
        return div(other, self)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __neg__(self):
        return ComplexTensor(-self._pairs)

    neg = __neg__

    def conj(self):
        return _join(self.real, -self.imag)

    def abs(self):
        """|z|, with PyTorch's gradient 0 at z = 0 (not sqrt's 0/0)."""
        r2 = self.real * self.real + self.imag * self.imag
        zero = r2 == 0
        return ops.where(zero, 0.0, ops.sqrt(ops.where(zero, 1.0, r2)))

    __abs__ = abs

    def angle(self):
        """The argument atan2(imag, real) in (-pi, pi] (gradient 0 at z = 0, as PyTorch)."""
        return ops.atan2(self.imag, self.real)

    def exp(self):
        """e^(a + ib) = e^a (cos b + i sin b)."""
        scale = ops.exp(self.real)
        return _join(scale * ops.cos(self.imag), scale * ops.sin(self.imag))

    def sum(self, dim=None, keepdim=False):
        return ComplexTensor(ops.sum(self._pairs, self._reduced(dim), keepdim))

    def mean(self, dim=None, keepdim=False):
        return ComplexTensor(ops.mean(self._pairs, self._reduced(dim), keepdim))

    def _reduced(self, dim):
        """The pairs' dimensions a reduction over the complex dimensions `dim` (None: all) runs over."""
        if dim is None:
            return tuple(range(self.ndim))
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        return tuple(_dim(d, self.ndim) for d in dims)

    # ---- shape ---------------------------------------------------------------------------------
    def view(self, *shape):
        return ComplexTensor(self._pairs.view(*_sizes(shape), 2))

    def reshape(self, *shape):
        return ComplexTensor(self._pairs.reshape(*_sizes(shape), 2))

    def view_as(self, other):
        return self.view(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        start, end = _dim(start_dim, self.ndim), _dim(end_dim, self.ndim)
        return ComplexTensor(self._pairs.flatten(start, end))

    def unsqueeze(self, dim):
        return ComplexTensor(self._pairs.unsqueeze(_dim(dim, self.ndim + 1)))

    def squeeze(self, dim=None):
        if dim is None:
            dims = {i for i, s in enumerate(self.shape) if s == 1}
        else:
            dims = {_dim(d, self.ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if i not in dims or s != 1))

    def permute(self, *dims):
        dims = tuple(_dim(d, self.ndim) for d in _sizes(dims))
        return ComplexTensor(self._pairs.permute(*dims, self.ndim))

    def transpose(self, dim0, dim1):
        return ComplexTensor(self._pairs.transpose(_dim(dim0, self.ndim), _dim(dim1, self.ndim)))

    def t(self):
        return self.transpose(0, 1) if self.ndim == 2 else self

    def expand(self, *sizes):
        return ComplexTensor(self._pairs.expand(*_sizes(sizes), 2))

    def expand_as(self, other):
        return self.expand(other.shape)

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis for i in index):
            return ComplexTensor(self._pairs[index + (slice(None),)])
        return ComplexTensor(self._pairs[index + (Ellipsis, slice(None))])

    def contiguous(self):
        return ComplexTensor(self._pairs.contiguous())

    def clone(self):
        return ComplexTensor(self._pairs.clone())

    def copy_(self, src):
        """Write `src`'s values (complex, real or a number) into this tensor, in place."""
        values = _lifted(src) if isinstance(src, (Tensor, ComplexTensor)) else _join(full_like(self.real, 0.0), None) + src
        self._pairs.copy_(values._pairs.expand(self._pairs.shape).clone())   # its own memory, not src's
        return self

    def detach(self):
        return ComplexTensor(self._pairs.detach())

    # ---- dtype and device ----------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """`.to(device)`, `.to(dtype)` (a real dtype keeps the real part and warns, as PyTorch),
        `.to(other)`."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, (Tensor, ComplexTensor)):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (ComplexDType, ggml.DType)) or ggml.dtypes.is_name(a):
                dtype = a
            else:
                device = a
        out = ComplexTensor(self._pairs.to(device)) if device is not None else self
        if dtype is not None and dtype is not COMPLEX64:
            warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=2)
            return out.real.to(dtype)
        return out.clone() if copy and out is self else out

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def type_as(self, other):
        return self.to(other.dtype)

    def float(self):
        return self.to(ggml.f32)



# ggrad's functions that take complex tensors: the boundary (boundary.py) hands a call with one to these
FUNCTIONS = {
    "add": add, "sub": sub, "subtract": sub, "mul": mul, "multiply": mul, "div": div, "divide": div,
    "true_divide": div, "matmul": matmul, "cat": cat, "concat": cat, "concatenate": cat, "stack": stack,
    "abs": ComplexTensor.abs, "angle": angle, "exp": ComplexTensor.exp, "neg": ComplexTensor.neg,
    "negative": ComplexTensor.neg, "conj": conj, "conj_physical": conj, "resolve_conj": ComplexTensor.resolve_conj,
    "sum": ComplexTensor.sum, "mean": ComplexTensor.mean, "reshape": ComplexTensor.reshape,
    "flatten": ComplexTensor.flatten, "squeeze": ComplexTensor.squeeze, "unsqueeze": ComplexTensor.unsqueeze,
    "permute": ComplexTensor.permute, "transpose": ComplexTensor.transpose, "clone": ComplexTensor.clone,
    "detach": ComplexTensor.detach, "real": real, "imag": imag, "is_complex": is_complex,
}
# the real binary ops hand a complex operand to these (ops/complex_operands.py)
complex_operands.register(ComplexTensor, {"add": add, "sub": sub, "mul": mul, "div": div, "matmul": matmul})


def _leaf(values, device, requires_grad):
    """The complex leaf of `values` (a numpy array, complex or real) on `device`: `tensor(complex data)`,
    `zeros(..., dtype=complex64)` and the other factories (factory.py)."""
    pairs = np.stack([np.real(values), np.imag(values)], -1).astype(np.float32)
    return ComplexTensor(tensor(pairs, device=device, requires_grad=requires_grad))


complex_leaves(_leaf)
