"""Random sampling from tensors: bernoulli, multinomial and normal, on the device of their input.

Uniform numbers come from the seeded host generator (factory.py); the comparisons that turn them into
samples run on the device, so sampling in a generation loop adds no round trip. Invalid probabilities
are found by the graph's compute, which raises RuntimeError as PyTorch does.

multinomial returns int64, as PyTorch. Differences from PyTorch: the random streams differ.
"""

import numpy as np

from ...ggml import f32
from ..torch_dtypes import INT64, resolve
from ..dtype_rules import require_float
from ..factory import generator as _host_generator, tensor
from ..grad_mode import no_grad
from . import reduce as rd
from . import unary as un
from .indexing import check_values, count_outside
from .scan import cumsum
from .sorting import topk
from ..declaration import declare
from ..arguments import NUMBER, kinds


@declare()
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Samples of N(mean, std): mean and/or std Tensors (their broadcast shape, on their device) or, both
    numbers, `size` samples. As PyTorch's, no gradient flows to mean or std."""
    if dtype is not None:
        resolve(dtype)   # an unknown dtype is PyTorch's TypeError
    from_tensors = [t for t in (mean, std) if hasattr(t, "shape")]
    if from_tensors and size is not None:
        raise TypeError("normal(): size is taken only with float mean and std (a Tensor mean or std sets the shape)")
    for t in from_tensors:
        if not t.dtype.is_float:
            raise NotImplementedError(f'"normal_kernel_cpu" not implemented for \'{t.type()[6:-6]}\'')
    if not hasattr(std, "shape") and isinstance(std, (int, float)) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if not from_tensors:
        if size is None:
            raise TypeError("normal(): with float mean and std, size is required (normal(mean, std, size))")
        noise = _host_generator(generator).standard_normal(tuple(size))
        out = tensor(noise * float(std) + float(mean), dtype=dtype, device=device)
        return out.requires_grad_(True) if requires_grad else out
    with no_grad():
        try:
            shape = np.broadcast_shapes(*[tuple(t.shape) for t in from_tensors])
        except ValueError as e:
            raise RuntimeError(f"normal(): mean and std shapes do not broadcast: {e}") from None
        noise = tensor(_host_generator(generator).standard_normal(shape), device=from_tensors[0].device)
        return noise * std + mean


def _uniform(shape, device, generator, open_at_zero=False):
    u = _host_generator(generator).random(shape, dtype=np.float32)
    return tensor(1.0 - u if open_at_zero else u, device=device)   # 1 - [0, 1) is (0, 1]


@kinds(p=NUMBER)
@declare(method=True)
def bernoulli(input, p=None, generator=None):  # noqa: A002 (PyTorch's names)
    """1.0 with probability input (or `p`), else 0.0, in the input's shape and dtype; draws from
    `generator` (a ggrad.Generator) when given, else from the default generator."""
    require_float(input, "bernoulli")
    _host_generator(generator)   # a bad generator raises before anything is drawn
    with no_grad():
        probs = input.detach() if p is None else input.detach() * 0.0 + float(p)
        if p is not None and not 0.0 <= float(p) <= 1.0:
            raise RuntimeError(f"bernoulli: expects p to be in [0, 1], but got p={p}")
        probs = probs.to(f32) if probs.dtype is not f32 else probs
        check_values(probs, lambda t: count_outside(t, 0.0, 1.0), "bernoulli: Expected p_in >= 0 && p_in <= 1 to be true")
        out = un.Step.apply(probs - _uniform(input.shape, input.device, generator))
        return out if out.dtype is input.dtype else out.to(input.dtype)


@declare()
def poisson(input, generator=None):  # noqa: A002
    """Poisson draws with the rates in `input` (float, >= 0), of its shape, dtype and device; no gradient."""
    require_float(input, "poisson")
    rates = input.detach().numpy().astype(np.float64)
    if np.any(rates < 0) or np.any(np.isnan(rates)):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    drawn = _host_generator(generator).poisson(rates)
    return tensor(np.asarray(drawn, np.float32), device=input.device).to(input.dtype)


def _bad_probs(t):
    """How many entries are negative, infinite or nan (inf and nan have clamp(x - x) = 1)."""
    not_finite = un.Clamp.apply(t - t, 0.0, 1.0)
    return rd.SumAll.apply(un.Step.apply(-t) + not_finite)


def _empty_rows(t):
    return rd.SumAll.apply(un.Step.apply(-rd.sum(t, -1)) + (1.0 - un.Step.apply(rd.sum(t, -1))))


@declare(method=True)
def multinomial(input, num_samples, replacement=False, generator=None):  # noqa: A002
    """Indices drawn from the rows of `input` (non-negative weights, any scale), int64.

    With replacement (or one sample): the first index whose cumulative weight exceeds u * total.
    Without: the num_samples largest of log(weight) + Gumbel noise, which draws in the order that
    sampling one at a time without replacement would.
    """
    require_float(input, "multinomial")
    _host_generator(generator)   # a bad generator raises before anything is drawn
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {input.shape}")
    n = input.shape[-1]
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples, got {num_samples}")
    if not replacement and num_samples > n:
        raise RuntimeError(f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement ({num_samples} > {n})")
    with no_grad():
        w = input.detach().to(f32) if input.dtype is not f32 else input.detach()
        check_values(w, _bad_probs, "multinomial: probability tensor contains either `inf`, `nan` or element < 0")
        check_values(w, _empty_rows, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
        rows = w if w.ndim == 2 else w.reshape(1, n)
        if replacement or num_samples == 1:
            out = _inverse_cdf(rows, num_samples, generator)
        else:
            gumbel = -np.log(-np.log(1.0 - _host_generator(generator).random(rows.shape)))
            keys = un.log(rows) + tensor(gumbel.astype(np.float32), device=rows.device)
            out = topk(keys, num_samples, -1).indices
        return out if input.ndim == 2 else out.reshape(num_samples)


def _inverse_cdf(rows, num_samples, generator):
    r, n = rows.shape
    cdf = cumsum(rows, -1)                                   # (r, n); its last column is the total
    total = cdf[:, n - 1:n]                                  # (r, 1)
    u = _uniform((r, num_samples, 1), rows.device, generator, open_at_zero=True)
    target = u * total.reshape(r, 1, 1)                      # (r, s, 1), in (0, total]
    below = un.Step.apply(target - cdf.reshape(r, 1, n))     # cdf_j < target
    return rd.sum(below, -1).to(INT64)                        # how many lie below: the index drawn
