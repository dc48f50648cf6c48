// One fully connected layer, y = x @ w + b, with an optional ReLU:
// x is [M, K], w is [K, N], b is [N], y is [M, N], all row-major float.
// The plan launches CORES slices in parallel; slice core_id computes a
// contiguous block of rows, so slices never write the same bytes.
void linear(float* restrict y, const float* restrict x, const float* restrict w, const float* restrict b,
            int core_id) {
  const int rows = (M + CORES - 1) / CORES;
  const int first = core_id * rows;
  const int last = first + rows < M ? first + rows : M;
  for (int i = first; i < last; i++) {
    float* restrict yi = y + i * N;
    for (int j = 0; j < N; j++) yi[j] = b[j];
    // i-k-j order: the inner loop streams one row of w and vectorises.
    for (int k = 0; k < K; k++) {
      const float xik = x[i * K + k];
      const float* restrict wk = w + k * N;
      for (int j = 0; j < N; j++) yi[j] += xik * wk[j];
    }
#if RELU
    for (int j = 0; j < N; j++) yi[j] = yi[j] > 0.0f ? yi[j] : 0.0f;
#endif
  }
}
