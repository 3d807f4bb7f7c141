"""Second derivatives of each differentiable op against torch: d/dx of h(d f(op(x)) / dx), with the
first gradient taken with create_graph=True. A rule whose saved tensors lose their history (or a
backward op without a rule of its own) gives a wrong value or an error here."""

import numpy as np
import pytest

import ggrad
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

LABELS = np.array([0, 3, 1])

OPS = {
    "exp": lambda L, N, x: x.exp(),
    "log": lambda L, N, x: (x.abs() + 0.1).log(),
    "sqrt": lambda L, N, x: (x.abs() + 0.1).sqrt(),
    "sin": lambda L, N, x: x.sin(),
    "cos": lambda L, N, x: x.cos(),
    "tanh": lambda L, N, x: x.tanh(),
    "sigmoid": lambda L, N, x: x.sigmoid(),
    "softplus": lambda L, N, x: N.softplus(x),
    "softplus_beta": lambda L, N, x: N.softplus(x, beta=2.0),
    "elu": lambda L, N, x: N.elu(x),
    "celu": lambda L, N, x: N.celu(x),
    "selu": lambda L, N, x: N.selu(x),
    "gelu": lambda L, N, x: N.gelu(x),
    "gelu_tanh": lambda L, N, x: N.gelu(x, approximate="tanh"),
    "silu": lambda L, N, x: N.silu(x),
    "mish": lambda L, N, x: N.mish(x),
    "logsigmoid": lambda L, N, x: N.logsigmoid(x),
    "softsign": lambda L, N, x: N.softsign(x),
    "tanhshrink": lambda L, N, x: N.tanhshrink(x),
    "hardswish": lambda L, N, x: N.hardswish(x * 3.0),
    "prelu": lambda L, N, x: N.prelu(x * x - 0.3, L.tensor(np.array([0.25], np.float32))),
    "atan": lambda L, N, x: L.atan(x),
    "asin": lambda L, N, x: L.asin(x),
    "acos": lambda L, N, x: L.acos(x),
    "sinh": lambda L, N, x: L.sinh(x),
    "cosh": lambda L, N, x: L.cosh(x),
    "tan": lambda L, N, x: L.tan(x),
    "erf": lambda L, N, x: L.erf(x),
    "expm1": lambda L, N, x: L.expm1(x),
    "log1p": lambda L, N, x: L.log1p(x.abs()),
    "rsqrt": lambda L, N, x: L.rsqrt(x.abs() + 0.5),
    "reciprocal": lambda L, N, x: (x.abs() + 0.5).reciprocal(),
    "div": lambda L, N, x: x / (x * x + 1.0),
    "pow3": lambda L, N, x: x ** 3,
    "pow_half": lambda L, N, x: (x.abs() + 0.1) ** 0.5,
    "tensor_pow": lambda L, N, x: (x.abs() + 0.5) ** x,
    "clamp": lambda L, N, x: (x * x).clamp(0.1, 0.5) * x,
    "where": lambda L, N, x: L.where(x > 0, x * x, x.exp()),
    "mean": lambda L, N, x: (x * x).mean(),
    "prod": lambda L, N, x: x.prod(1),
    "cumsum": lambda L, N, x: L.cumsum(x * x, 1),
    "cumprod": lambda L, N, x: L.cumprod(x, 1),
    "max": lambda L, N, x: (x * x).max(1)[0],
    "amax": lambda L, N, x: L.amax(x * x, 1),
    "norm": lambda L, N, x: L.norm(x, dim=1),
    "norm_all": lambda L, N, x: L.norm(x),
    "logsumexp": lambda L, N, x: L.logsumexp(x, 1),
    "var": lambda L, N, x: x.var(1),
    "std": lambda L, N, x: x.std(1),
    "softmax": lambda L, N, x: L.softmax(x, 1),
    "log_softmax": lambda L, N, x: L.log_softmax(x, 1),
    "glu": lambda L, N, x: N.glu(x, -1),
    "layer_norm": lambda L, N, x: N.layer_norm(x, (4,)),
    "rms_norm": lambda L, N, x: N.rms_norm(x, (4,)),
    "embedding": lambda L, N, x: N.embedding(L.tensor(np.array([0, 2, 2])), x) ** 2,
    "mse": lambda L, N, x: N.mse_loss(x, x.detach() * 0.5),
    "smooth_l1": lambda L, N, x: N.smooth_l1_loss(x, x.detach() * 0.0),
    "huber": lambda L, N, x: N.huber_loss(x * 3.0, x.detach() * 0.0),
    "bce": lambda L, N, x: N.binary_cross_entropy(x.sigmoid(), L.ones(3, 4) * 0.3),
    "bce_logits": lambda L, N, x: N.binary_cross_entropy_with_logits(x, L.ones(3, 4) * 0.3),
    "cross_entropy": lambda L, N, x: N.cross_entropy(x, L.tensor(LABELS)),
    "nll": lambda L, N, x: N.nll_loss(L.log_softmax(x, 1), L.tensor(LABELS)),
    "sdpa": lambda L, N, x: N.scaled_dot_product_attention(*(x.reshape(1, 3, 4) * s for s in (1.0, 0.5, 1.0))),
    "sdpa_causal": lambda L, N, x: N.scaled_dot_product_attention(*(x.reshape(1, 3, 4) * s for s in (1.0, 0.5, 1.0)),
                                                                  is_causal=True),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_second_derivative_matches_torch(name):
    rng = np.random.default_rng(sorted(OPS).index(name))
    a = (rng.uniform(0.2, 0.9, (3, 4)) * rng.choice([-1, 1], (3, 4))).astype(np.float32)
    results = []
    for lib, nf in ((ggrad, F), (torch, TF)):
        x = lib.tensor(a, requires_grad=True)
        y = OPS[name](lib, nf, x)
        g, = lib.autograd.grad((y * y.cos()).sum(), x, create_graph=True)
        (g * g.sin()).sum().backward()
        results.append(x.grad.detach().numpy() if lib is torch else x.grad.numpy())
    ours, theirs = results
    np.testing.assert_allclose(ours, theirs, rtol=2e-3, atol=2e-3 * np.abs(theirs).max() + 1e-6)
