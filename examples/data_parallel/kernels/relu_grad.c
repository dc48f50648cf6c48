// The gradient of a layer's input through the next layer and this layer's
// ReLU, on this rank's rows: dx[i] = (dy[i] @ w^T) where h[i] > 0, else 0.
// dy is [batch, N], w (the next layer's weights) is [K, N], h (this layer's
// ReLU output) and dx are [batch, K].
void relu_grad(float* restrict dx, const float* restrict dy, const float* restrict w, const float* restrict h,
               int row0, int rows) {
  for (int i = row0; i < row0 + rows; i++) {
    const float* restrict dyi = dy + i * N;
    for (int k = 0; k < K; k++) {
      // Units the ReLU switched off pass no gradient: skip their dot product.
      float acc = 0.0f;
      if (h[i * K + k] > 0.0f) {
        const float* restrict wk = w + k * N;
        for (int j = 0; j < N; j++) acc += dyi[j] * wk[j];
      }
      dx[i * K + k] = acc;
    }
  }
}
