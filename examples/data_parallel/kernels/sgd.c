// Plain stochastic gradient descent: w -= LR * g over n elements. Every rank
// applies it to the same all-reduced gradient, so the weights stay bitwise
// identical across ranks.
void sgd(float* restrict w, const float* restrict g, int n) {
  const float lr = (float)(LR);
  for (int i = 0; i < n; i++) w[i] -= lr * g[i];
}
