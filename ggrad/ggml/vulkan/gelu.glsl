// GELU's tanh form and its gradient on one f32 value, as csrc/gelu.c computes them: x sigmoid(2c (x + a x^3)),
// x clamped to [-20, 20] inside and what lies beyond added back where positive (inf and nan as PyTorch); the
// gradient g s (1 + h (1 - s)) with s = sigmoid(2c (x + a x^3)), h = 2c x (1 + 3a x^2).

const float SQRT_2_OVER_PI = 0.7978845608028654;
const float GELU_A = 0.044715;
const float GELU_FLAT = 20.0;

float gelu_forward(float x) {
    const float c2 = 2.0 * SQRT_2_OVER_PI;
    // comparisons, not clamp(): a nan stays nan
    const float inside = x < -GELU_FLAT ? -GELU_FLAT : (x > GELU_FLAT ? GELU_FLAT : x);
    const float z = inside * (inside * inside * (c2 * GELU_A) + c2);
    const float beyond = x - inside;
    return inside / (1.0 + exp(-z)) + beyond * (beyond > 0.0 ? 1.0 : 0.0);
}

float gelu_backward(float g, float x) {
    const float c2 = 2.0 * SQRT_2_OVER_PI;
    const float x2 = x * x;
    const float s = 1.0 / (1.0 + exp(-x * (x2 * (c2 * GELU_A) + c2)));
    const float h = x * (x2 * (3.0 * c2 * GELU_A) + c2);
    return g * (s * (h * (1.0 - s) + 1.0));
}
