// One fully connected layer on this rank's rows: y = x @ w + b, with an
// optional ReLU. x is [batch, K], w is [K, N], b is [N], y is [batch, N], all
// row-major float. Only rows row0 .. row0+rows-1 (this rank's shard of the
// batch) are read and written; the plan computes the shard from `rank` and
// `world_size`.
void linear(float* restrict y, const float* restrict x, const float* restrict w, const float* restrict b, int row0,
            int rows) {
  for (int i = row0; i < row0 + rows; i++) {
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
