"""A user-defined differentiable op with `ggrad.Function`: a numerically stable "softclip".

softclip(x, c) = c * tanh(x / c) squashes x smoothly into (-c, c). Forward and backward are written
with ggrad ops, so GGML computes both; the gradient is checked against finite differences.

    python examples/custom_function.py
"""

import numpy as np

import ggrad


class SoftClip(ggrad.Function):
    """y = c * tanh(x / c); dy/dx = 1 - tanh(x / c)**2."""

    @staticmethod
    def forward(ctx, x, c):
        t = ggrad.tanh(x / c)
        ctx.save_for_backward(t)
        return t * c

    @staticmethod
    def backward(ctx, grad):
        t, = ctx.saved_tensors
        return grad * (1.0 - t * t), None   # no gradient for the constant c


def main():
    ggrad.manual_seed(0)
    x = ggrad.randn(5, requires_grad=True) * 3.0
    x = x.detach().requires_grad_()
    y = SoftClip.apply(x, 2.0)
    y.sum().backward()

    xs = x.numpy().astype(np.float64)
    eps = 1e-4
    numeric = (2.0 * np.tanh((xs + eps) / 2.0) - 2.0 * np.tanh((xs - eps) / 2.0)) / (2 * eps)
    print("x           ", np.round(xs, 3))
    print("softclip(x) ", np.round(y.numpy(), 3))
    print("analytic dx ", np.round(x.grad.numpy(), 4))
    print("numeric dx  ", np.round(numeric, 4))
    error = np.abs(x.grad.numpy() - numeric).max()
    print(f"max |analytic - numeric| = {error:.2e}")
    return error


if __name__ == "__main__":
    if main() > 1e-3:
        raise SystemExit("gradient check failed")
